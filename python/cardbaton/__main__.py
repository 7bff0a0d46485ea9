"""python3 -m cardbaton [--help | --version]: the contract, in words."""

import sys

import cardbaton

USAGE = "usage: python3 -m cardbaton [--help | --version]"


def main(argv):
    if argv in ([], ["--help"], ["-h"]):
        print(USAGE)
        print()
        print(cardbaton.__doc__.strip())
        print()
        print("The calls:")
        for name in ("pause_requested", "save_and_exit", "publish", "resume_path",
                     "atomic_write"):
            doc = getattr(cardbaton, name).__doc__.strip().split("\n")
            print("  cardbaton.%s: %s" % (name, " ".join(s.strip() for s in doc)))
        print("  cardbaton.torch.save / load: a model's, optimizer's and scheduler's"
              " state with the random states of Python, NumPy and torch"
              " (see pydoc cardbaton.torch)")
        return 0
    if argv == ["--version"]:
        print("cardbaton %s" % cardbaton.__version__)
        return 0
    sys.stderr.write("%s\n" % USAGE)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
