#!/usr/bin/env python3
"""torch_job.py - a resumable PyTorch training job for CardBaton.

A small regression network trained for --steps steps on random minibatches
(drawn from torch's generator; the net has dropout, so the generator is used
by the model too), with SGD + momentum and a step learning-rate schedule.  It
follows the checkpoint contract (SPEC section 9) through CardBaton's helper:

  * after every step, ``cardbaton.pause_requested()``;
  * when asked, ``cardbaton.torch.save`` writes the model, the optimizer, the
    scheduler, the step and every random state (Python, NumPy, torch CPU and
    CUDA) atomically to --checkpoint, and ``cardbaton.save_and_exit`` publishes
    it and exits 75;
  * resumed (``cardbaton.resume_path()`` set), ``cardbaton.torch.load`` puts
    all of it back and the loop goes on with the next step.

Paused and resumed any number of times -- by hand, by its time limit, by a
preemption, on another node that sees the checkpoint -- it ends with weights
bit-identical to an uninterrupted run (on the same device and PyTorch), saved
to --out with torch.save.

Job file:

    command: [python3, torch_job.py, --out, model.pt, --checkpoint, ck.pt]
    resume_command: [python3, torch_job.py, --out, model.pt, --checkpoint, ck.pt]
    checkpoint_grace_seconds: 60

Needs torch (Debian: python3-torch); the helper is the `cardbaton` package
(python/ in the source tree, found there when it is not installed).
"""

import argparse
import os
import sys

try:
    import cardbaton
except ImportError:     # not installed: the source tree's
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "python"))
    import cardbaton
import cardbaton.torch as cbt
import torch


def main(argv=None):
    p = argparse.ArgumentParser(prog="torch_job.py", description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--out", required=True, help="the trained weights, at the end")
    p.add_argument("--checkpoint", required=True, help="where to save when asked to pause")
    p.add_argument("--seed", type=int, default=7)
    a = p.parse_args(argv)

    torch.manual_seed(a.seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(0.3),
                                torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=50, gamma=0.5)
    step = 0
    if cardbaton.resume_path():
        step = cbt.load(cardbaton.resume_path(), model, opt, sched)["step"]
        print("resuming after step %d" % step, flush=True)
    while step < a.steps:
        x = torch.randn(32, 8)
        loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        step += 1
        if step < a.steps and cardbaton.pause_requested():
            cbt.save(a.checkpoint, model, opt, sched, extra={"step": step})
            print("paused after step %d" % step, flush=True)
            cardbaton.save_and_exit(a.checkpoint)
    tmp = a.out + ".tmp"
    torch.save(model.state_dict(), tmp)
    os.replace(tmp, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
