"""cardbaton.torch - a PyTorch training state, saved and loaded whole.

``save(path, model, optimizer, scheduler=None, extra=None)`` writes, atomically
(a temporary file beside PATH, fsync, rename, fsync of the directory), the
state dicts of MODEL, OPTIMIZER and SCHEDULER, EXTRA (anything torch.save
takes: the step, a metric) and the random states a resumed run needs to draw
what an uninterrupted run would have drawn: Python's ``random``, NumPy's
global generator (when NumPy is installed), torch's CPU generator and every
CUDA device's (when CUDA is available).  ``load(path, model, optimizer,
scheduler=None)`` puts all of it back and returns EXTRA.

With the contract (``cardbaton``)::

    import cardbaton, cardbaton.torch as cbt
    extra = cbt.load(cardbaton.resume_path(), model, opt) if cardbaton.resume_path() else {"step": 0}
    for step in range(extra["step"], steps):
        train_step(...)
        if cardbaton.pause_requested():
            cbt.save(ck, model, opt, extra={"step": step + 1})
            cardbaton.save_and_exit(ck)

A data loader's own order is the job's to keep (its sampler's generator in
EXTRA, or a seed derived from the step).  Needs torch; NumPy is optional.
"""

import os
import random

import torch

from cardbaton import fsync_dir

__all__ = ["save", "load", "rng_state", "set_rng_state"]

FORMAT = "cardbaton-torch/1"


def rng_state():
    """The random states of Python, NumPy (None without it), torch's CPU
    generator and each CUDA device's (empty without CUDA)."""
    try:
        import numpy
        np_state = numpy.random.get_state()
    except ImportError:
        np_state = None
    return {
        "python": random.getstate(),
        "numpy": np_state,
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def set_rng_state(st):
    """Put back what ``rng_state`` returned."""
    random.setstate(st["python"])
    if st.get("numpy") is not None:
        import numpy
        numpy.random.set_state(st["numpy"])
    torch.set_rng_state(st["torch"])
    if st.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(st["cuda"])


def save(path, model, optimizer, scheduler=None, extra=None):
    """Save the whole training state at PATH, atomically (see the module)."""
    path = os.path.abspath(path)
    d, base = os.path.split(path)
    tmp = os.path.join(d, ".%s.%d.tmp" % (base, os.getpid()))
    state = {
        "format": FORMAT,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "extra": extra,
        "rng": rng_state(),
    }
    try:
        with open(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    fsync_dir(d)


def load(path, model, optimizer, scheduler=None, map_location=None):
    """Load what ``save`` wrote at PATH into MODEL, OPTIMIZER and SCHEDULER,
    set the random states back, and return its EXTRA.  Raises ValueError for
    a file that is not such a state."""
    # Our own file, with the random states in it (not weights only:
    # torch 2.6 and later refuse those unless told).
    try:
        state = torch.load(path, map_location=map_location, weights_only=False)
    except TypeError:       # torch before 1.13 has no weights_only
        state = torch.load(path, map_location=map_location)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ValueError("%s: not a cardbaton.torch checkpoint" % path)
    model.load_state_dict(state["model"])
    if optimizer is not None and state["optimizer"] is not None:
        optimizer.load_state_dict(state["optimizer"])
    if scheduler is not None and state["scheduler"] is not None:
        scheduler.load_state_dict(state["scheduler"])
    set_rng_state(state["rng"])
    return state["extra"]
