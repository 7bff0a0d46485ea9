#!/usr/bin/env bats
# install.bats - `make install` / `make uninstall` (every tool, the worker
# for nodes, the man pages, the bash completion, the examples), the
# completion itself, the README's quick start as written, and that every
# "SPEC §N" in the sources and docs names a section of doc/SPEC.md.

load ../lib/common

bats_require_minimum_version 1.5.0
test_timeout 120

setup() {
	setup_common
}

teardown() {
	teardown_common
}

# What `make install DESTDIR=$T/root PREFIX=/usr` must put in place.
installed_files() {
	local t m
	echo usr/bin/cardbaton
	echo usr/bin/sshgpu
	for t in submit status logs promote pause resume cancel hold release wait gpus bootstrap spoold run worker \
		 top metrics report mcp users; do
		echo "usr/bin/cardbaton-$t"
	done
	echo usr/libexec/cardbaton/cardbaton-worker-static
	echo usr/libexec/cardbaton/cardbaton-worker-dynamic
	echo usr/libexec/cardbaton/cardbaton-worker.shar
	for m in "$CB_TOP"/worker/*.c "$CB_TOP"/worker/*.h; do
		echo "usr/libexec/cardbaton/${m##*/}"
	done
	for m in "$CB_TOP"/base/*.[ch]; do
		echo "usr/libexec/cardbaton/${m##*/}"
	done
	echo usr/libexec/cardbaton/wire.c
	echo usr/libexec/cardbaton/wire.h
	for m in "$CB_TOP"/man/*.[158]; do
		echo "usr/share/man/man${m##*.}/${m##*/}"
	done
	echo usr/share/bash-completion/completions/cardbaton
	echo usr/share/bash-completion/completions/sshgpu
	for m in "$CB_TOP"/examples/*; do
		echo "usr/share/doc/cardbaton/examples/${m##*/}"
	done
}

@test "make install puts every tool, the worker, man pages, completion and examples in place; uninstall removes them" {
	run make -C "$CB_TOP" B="$CB_BUILD" install DESTDIR="$T/root" PREFIX=/usr
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	local f
	for f in $(installed_files); do
		[ -e "$T/root/$f" ] || { echo "missing: $f"; false; }
	done
	# The man pages of every section, the new section-5 pages among them.
	[ -f "$T/root/usr/share/man/man5/cardbaton.5" ]
	[ -f "$T/root/usr/share/man/man5/cardbaton-spool.5" ]
	[ -f "$T/root/usr/share/man/man8/cardbaton-worker.8" ]
	# Links, and executables where they must be.
	[ "$(readlink "$T/root/usr/bin/sshgpu")" = cardbaton ]
	[ "$(readlink "$T/root/usr/bin/cardbaton-run")" = cardbaton-spoold ]
	[ "$(readlink "$T/root/usr/share/bash-completion/completions/sshgpu")" = cardbaton ]
	for f in cardbaton cardbaton-submit cardbaton-spoold cardbaton-worker; do
		[ -x "$T/root/usr/bin/$f" ]
	done
	[ -x "$T/root/usr/libexec/cardbaton/cardbaton-worker-static" ]
	cmp "$CB_TOP/completion/cardbaton.bash" "$T/root/usr/share/bash-completion/completions/cardbaton"
	cmp "$CB_TOP/examples/cluster.yaml" "$T/root/usr/share/doc/cardbaton/examples/cluster.yaml"
	# The installed tools run; so does the Python helper, where python3
	# looks for /usr's packages.
	"$T/root/usr/bin/cardbaton" --help >/dev/null
	py=$(python3 -c 'import sys; print("usr/lib/python%d.%d/%s-packages" % (sys.version_info[0], sys.version_info[1], "dist" if any(p.endswith("dist-packages") for p in sys.path) else "site"))')
	for f in "$CB_TOP"/python/cardbaton/*.py; do cmp "$f" "$T/root/$py/cardbaton/${f##*/}"; done
	[ "$(cd / && PYTHONPATH="$T/root/$py" python3 -m cardbaton --version)" = "cardbaton 0.1.0" ]

	run make -C "$CB_TOP" B="$CB_BUILD" uninstall DESTDIR="$T/root" PREFIX=/usr
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	run find "$T/root" ! -type d
	[ "$status" -eq 0 ]
	[ -z "$output" ] || { echo "left behind: $output"; false; }
	for f in $(installed_files); do
		[ ! -e "$T/root/$f" ] && [ ! -L "$T/root/$f" ]
	done
	[ ! -e "$T/root/usr/libexec/cardbaton" ]
	[ ! -e "$T/root/usr/share/doc/cardbaton" ]
}

# complete WORD... : run the completion function on the command line
# WORD... (the last word is the one being completed); prints COMPREPLY.
complete_line() {
	bash -c '
		source "$CB_TOP/completion/cardbaton.bash" || exit 1
		COMP_WORDS=("$@")
		COMP_CWORD=$(( $# - 1 ))
		COMP_LINE="$*"
		COMP_POINT=${#COMP_LINE}
		_cardbaton "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
		printf "%s\n" "${COMPREPLY[@]}" | sort
	' complete "$@"
}

@test "bash completion: subcommands, flags, node names, queued job IDs" {
	printf 'spool: ./spool\nnodes:\n  alpha:\n    local: true\n  beta:\n    local: true\n    idle_mib: 64\n' > "$T/config.yaml"

	run complete_line cardbaton pa
	[ "$status" -eq 0 ]
	[ "$output" = pause ]
	run complete_line sshgpu res
	[ "$output" = resume ]
	run complete_line cardbaton rel
	[ "$output" = release ]
	run complete_line cardbaton submit --no
	[ "$output" = --node ]
	run complete_line cardbaton-status --js
	[ "$output" = --json ]
	run complete_line cardbaton wait --ti
	[ "$output" = --timeout ]
	run complete_line cardbaton wa
	[ "$output" = wait ]
	run complete_line cardbaton me
	[ "$output" = metrics ]
	run complete_line cardbaton status --st
	[ "$output" = --state ]
	run complete_line cardbaton status --state fa
	[ "$output" = failed ]
	run complete_line cardbaton-report --si
	[ "$output" = --since ]

	# --node: the nodes of ./config.yaml, or of the --config named.
	run complete_line cardbaton submit --node ''
	[ "$output" = "$(printf 'alpha\nbeta')" ]
	mkdir "$T/elsewhere"
	printf 'nodes:\n  gamma:\n    local: true\n' > "$T/elsewhere/other.yaml"
	run complete_line cardbaton --config "$T/elsewhere/other.yaml" gpus --node ''
	[ "$output" = gamma ]

	# Job IDs from the spool's names (new/ included: no daemon runs).
	# Pinned to a card no node has, so that they stay queued.
	local a b
	a=$(cardbaton-submit --config "$T/config.yaml" --gpus 7 -- true)
	b=$(cardbaton-submit --config "$T/config.yaml" --gpus 7 --priority 5 -- true)
	run complete_line cardbaton cancel ''
	[ "$output" = "$(printf '%s\n' "$a" "$b" | sort)" ]
	run complete_line cardbaton promote "$b"
	[ "$output" = "$b" ]
	# Accepted by the daemon: now read from queued/.
	start_daemon
	stop_daemon
	[ -z "$(ls "$T/spool/new")" ]
	run complete_line cardbaton pause ''
	[ "$output" = "$(printf '%s\n' "$a" "$b" | sort)" ]
	run complete_line cardbaton-wait --timeout 5 ''
	[ "$output" = "$(printf '%s\n' "$a" "$b" | sort)" ]
}

@test "README quick start, as written, on the embedded default config" {
	# No config.yaml in the working directory: the embedded default (one
	# local node, spool in $XDG_STATE_HOME/cardbaton/spool).  Two cards, so
	# that the job asking for two stays queued behind the pinned one.
	mkdir "$T/qs"
	cd "$T/qs"
	fake_gpus \
		"0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0" \
		"1, GPU-11111111-1111-1111-1111-111111111111, NVIDIA Fake A100, 0, 81920, 0"
	# What the README's commands need: ~/experiments with train.py in it.
	mkdir -p "$HOME/experiments"
	cat > "$HOME/experiments/train.py" <<'PY'
import sys, time, os
print("training with", " ".join(sys.argv[1:]), flush=True)
while not os.path.exists(os.path.expanduser("~/experiments/stop")):
    time.sleep(0.05)
PY
	cp "$HOME/experiments/train.py" "$T/qs/train.py"

	# The lines of the README's quick start (README.md, "Quick start").
	run cardbaton gpus
	[ "$status" -eq 0 ]
	[[ $output == *local* ]]
	cardbaton run >>"$T/daemon.log" 2>&1 &
	DAEMON_PID=$!
	wait_for 10 'grep -q serving "$T/daemon.log"'

	local a b
	a=$(cardbaton submit --gpus 1 --priority 10 --timeout 7200 --cwd '~/experiments' -- python3 train.py --seed 0)
	b=$(cardbaton submit --gpu-count 2 -- python3 train.py --seed 1)
	[ -n "$a" ] && [ -n "$b" ]
	wait_for 20 '[ "$(cardbaton status --json "$a" | json "d[\"jobs\"][0][\"state\"]")" = running ]'
	wait_for 10 '[ "$(cardbaton status --json "$b" | json "d[\"jobs\"][0][\"state\"]")" = queued ]'

	run cardbaton status
	[ "$status" -eq 0 ]
	[[ $output == *"$a"* ]] && [[ $output == *"$b"* ]]
	wait_for 10 'cardbaton logs "$a" | grep -q "training with --seed 0"'
	run cardbaton logs "$a"
	[ "$status" -eq 0 ]
	[[ $output == *"training with --seed 0"* ]]

	run cardbaton promote "$b"
	[ "$status" -eq 0 ]
	run cardbaton cancel "$b"
	[ "$status" -eq 0 ]
	wait_for 10 '[ "$(cardbaton status --json "$b" | json "d[\"jobs\"][0][\"state\"]")" = cancelled ]'
	run cardbaton cancel "$a"
	[ "$status" -eq 0 ]
	# Cancelled, not succeeded: 1.
	run --separate-stderr timeout "$(scaled 30)" cardbaton wait "$a"
	[ "$status" -eq 1 ]
	[ "$stderr" = "cardbaton-wait: job $a cancelled" ]
	[ "$(cardbaton status --json "$a" | json 'd["jobs"][0]["state"]')" = cancelled ]
	# The spool is the embedded default's.
	[ -d "$XDG_STATE_HOME/cardbaton/spool/done" ]
	[ ! -e "$T/qs/spool" ]
}

# spec_refs TOP: every "SPEC §N" (also "SPEC section N", "SPEC §2, §5",
# "SPEC sections 8-10", "doc/SPEC.md §N", and a comment broken after
# "SPEC") in TOP's sources and docs (*.c *.h *.md *.bats *.bash *.py
# *.sh *.yaml, man/*, completion/*: the files git knows of, or all of
# TOP's when it is not a git checkout; not the fuzz corpora, which are
# data) must name a "## N." section of TOP/doc/SPEC.md.  Prints
# "refs N" and, for each that does not, "FILE:LINE: SPEC §N"; fails
# then.
spec_refs() {
	python3 - "$1" <<'PY'
import os, re, subprocess, sys
top = sys.argv[1]
with open(os.path.join(top, "doc/SPEC.md"), encoding="utf-8") as f:
    have = {int(n) for n in re.findall(r"^## (\d+)\. ", f.read(), re.M)}
try:
    files = subprocess.run(["git", "-C", top, "ls-files", "-z", "--cached", "--others",
                            "--exclude-standard"], capture_output=True, check=True
                           ).stdout.decode().split("\0")
except (OSError, subprocess.CalledProcessError):
    files = []
    for d, ds, fs in os.walk(top):
        ds[:] = [x for x in ds if x != ".git" and not x.startswith("build")]
        files += [os.path.relpath(os.path.join(d, x), top) for x in fs]
kinds = (".c", ".h", ".md", ".bats", ".bash", ".py", ".sh", ".yaml")
ref = re.compile(r"\bSPEC(?:\.md)?(?:[ \t]*\n[ \t]*(?:\*|#|//)?)?[ \t]*(?:§§?|sections?[ \t]+)[ \t]*"
                 r"(\d+(?:[ \t]*(?:,|-|–|and|to)[ \t]*§?[ \t]*\d+)*)")
count, bad = 0, []
for name in sorted(files):
    if not name or name.startswith("tests/fuzz/corpus/") or not (
            name.endswith(kinds) or name.startswith(("man/", "completion/"))):
        continue
    try:
        with open(os.path.join(top, name), encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        continue
    for m in ref.finditer(text):
        nums, prev, sep = [], None, None
        for tok in re.findall(r"\d+|-|–|to", m.group(1)):
            if not tok.isdigit():
                sep = tok
                continue
            n = int(tok)
            nums += range(prev + 1, n + 1) if sep and prev is not None and prev < n else [n]
            prev, sep = n, None
        line = text.count("\n", 0, m.start()) + 1
        for n in nums:
            count += 1
            if n not in have:
                bad.append(f"{name}:{line}: SPEC §{n}")
print("refs", count)
for b in bad:
    print(b)
sys.exit(1 if bad or not count else 0)
PY
}

@test "every SPEC §N in the sources and docs names a section of doc/SPEC.md" {
	# doc/SPEC.md has sections 1 to 12, each once, in order.
	[ "$(grep -E '^## [0-9]+\. ' "$CB_TOP/doc/SPEC.md" | sed -E 's/^## ([0-9]+)\..*/\1/' | tr '\n' ' ')" = "1 2 3 4 5 6 7 8 9 10 11 12 " ]
	run spec_refs "$CB_TOP"
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[[ ${lines[0]} == "refs "* ]] && [ "${lines[0]#refs }" -ge 20 ]

	# The check itself: a tree (not a git checkout) with references to
	# sections that do not exist, in each form, is refused, each named.
	# ($S, so that this file holds no such reference itself.)
	local S=SP""EC
	mkdir -p "$T/tree/doc" "$T/tree/src" "$T/tree/man" "$T/tree/tests/fuzz/corpus/x" "$T/tree/build"
	cp "$CB_TOP/doc/SPEC.md" "$T/tree/doc/"
	printf '/*\n * a.c - fine (%s §9; %s section 4; %s\n * section 11).\n */\n' "$S" "$S" "$S" > "$T/tree/src/a.c"
	printf '/* %s §15 */\n' "$S" > "$T/tree/src/b.h"
	printf 'x\n# the contract (%s\n# section 0)\n' "$S" > "$T/tree/src/c.sh"
	printf 'see %s §2, §14 and doc/%s.md section 3\n' "$S" "$S" > "$T/tree/src/d.md"
	printf '.\\" %s sections 10-14\n' "$S" > "$T/tree/man/e.1"
	printf '%s §99\n' "$S" > "$T/tree/tests/fuzz/corpus/x/seed.yaml"   # data: not read
	printf '%s §98\n' "$S" > "$T/tree/build/f.c"                       # a build: not read
	run spec_refs "$T/tree"
	[ "$status" -eq 1 ]
	[ "${lines[0]}" = "refs 13" ] || { echo "$output"; false; }
	[ "${#lines[@]}" -eq 6 ] || { echo "$output"; false; }
	[[ $output == *"src/b.h:1: $S §15"* ]]
	[[ $output == *"src/c.sh:2: $S §0"* ]]
	[[ $output == *"src/d.md:1: $S §14"* ]]
	[[ $output == *"man/e.1:1: $S §13"* ]] && [[ $output == *"man/e.1:1: $S §14"* ]]
	[[ $output != *"§99"* ]] && [[ $output != *"§98"* ]]
	# With the references fixed, the same tree passes ...
	sed -i 's/§15/§1/; s/§14/§4/; s/section 0/section 8/; s/10-14/10-11/' \
		"$T/tree/src/b.h" "$T/tree/src/c.sh" "$T/tree/src/d.md" "$T/tree/man/e.1"
	run spec_refs "$T/tree"
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	# ... and the sections are those of doc/SPEC.md: without its §11,
	# a.c's "SPEC section 11" (and e.1's) no longer resolves.
	sed -i 's/^## 11\. /## Eleven. /' "$T/tree/doc/SPEC.md"
	not spec_refs "$T/tree" >/dev/null
}
