"""cardbaton - the checkpoint contract of CardBaton for Python jobs.

A job that declares ``resume_command`` may be paused by the queue (``cardbaton
pause``, its time limit, a preemption, a drain) and resumed later, on the same
node or on another one that sees its checkpoint.  The contract (CardBaton's
SPEC section 9), as the worker drives it:

  1. At a safe point (between steps: nothing half-updated) the job asks
     ``pause_requested()``: whether the file named by ``SSHGPU_PAUSE_FILE``
     (or ``CARDBATON_PAUSE_FILE``) exists.
  2. When it does, the job saves its whole state wherever it likes (for
     PyTorch, ``cardbaton.torch.save``), then calls ``save_and_exit(path)``:
     it publishes ``{"checkpoint": "/abs/path"}`` atomically at
     ``SSHGPU_CHECKPOINT_READY`` and exits with status 75.  The worker records
     the job ``paused`` only when it sees both.
  3. Resumed, the job runs its ``resume_command``; ``resume_path()`` is then
     the saved path (``SSHGPU_CHECKPOINT``, as the resuming node sees it),
     else None: a fresh start.

Standard library only; Python 3.9 or later.  ``python3 -m cardbaton --help``
prints this text.
"""

import json
import os
import sys

__all__ = ["EX_PAUSED", "pause_requested", "save_and_exit", "publish", "resume_path",
           "atomic_write", "fsync_dir"]
__version__ = "0.1.0"

EX_PAUSED = 75          # "paused": the contract's exit status (EX_TEMPFAIL)


def _env(name):
    """SSHGPU_NAME, else CARDBATON_NAME; None when neither is set (or empty)."""
    return os.environ.get("SSHGPU_" + name) or os.environ.get("CARDBATON_" + name) or None


def pause_requested():
    """True when the queue asks this job to checkpoint and stop: the pause
    file exists.  False outside the queue (no pause file named).  Cheap (one
    stat): call it after every step."""
    path = _env("PAUSE_FILE")
    return bool(path) and os.path.lexists(path)


def resume_path():
    """The checkpoint to resume from (this node's path to it), or None on a
    fresh start."""
    return _env("CHECKPOINT")


def fsync_dir(path):
    """fsync the directory PATH (a rename or a new entry in it made durable)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path, data):
    """Write DATA (bytes or str) at PATH so that a reader sees the old file or
    the whole new one, before or after a crash: a temporary file in the same
    directory, flush, fsync, os.replace, fsync of the directory."""
    path = os.path.abspath(path)
    d, base = os.path.split(path)
    tmp = os.path.join(d, ".%s.%d.tmp" % (base, os.getpid()))
    if isinstance(data, str):
        data = data.encode("utf-8")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):     # only when something failed before replace
            os.unlink(tmp)
    fsync_dir(d)


def publish(path):
    """Publish PATH (made absolute) as this attempt's checkpoint, atomically,
    at SSHGPU_CHECKPOINT_READY.  Save the state at PATH first: the marker
    says it is whole.  Raises RuntimeError outside the queue (no marker path
    named), ValueError for an empty path."""
    if not path:
        raise ValueError("cardbaton.publish: an empty checkpoint path")
    ready = _env("CHECKPOINT_READY")
    if not ready:
        raise RuntimeError("cardbaton.publish: no SSHGPU_CHECKPOINT_READY: "
                           "not run by the queue")
    atomic_write(ready, json.dumps({"checkpoint": os.path.abspath(path)}) + "\n")


def save_and_exit(path):
    """Publish PATH as the checkpoint (``publish``) and exit with status 75,
    which with the marker makes the attempt ``paused``.  Never returns."""
    publish(path)
    sys.stdout.flush()
    sys.stderr.flush()
    raise SystemExit(EX_PAUSED)
