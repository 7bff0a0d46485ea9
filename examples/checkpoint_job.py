#!/usr/bin/env python3
"""checkpoint_job.py - a cooperative, resumable training job for CardBaton.

A complete example of the checkpoint contract (SPEC section 9), using
Python's standard library (3.9 or later) and CardBaton's helper for the
contract, the `cardbaton` package (python/ in the source tree, found there
when it is not installed).  It trains a small deterministic
"model" (linear regression, four floats, by SGD on synthetic data drawn from
random.Random(seed)) for --steps steps, sleeping --step-seconds per step to
look like work, and appends one line per step, "step K loss X", to the step
log (--log, default stdout).

The contract, as the worker drives it:

  * After every step (a safe point: nothing half-updated) the job looks for
    the file named by SSHGPU_PAUSE_FILE (or CARDBATON_PAUSE_FILE).  The
    worker creates it on `cardbaton pause` and at the time limit of a
    resumable job.

  * When the file exists, the job saves its whole state -- the step count,
    the random generator's full state (random.getstate(), including the
    cached second Gaussian), the model parameters and the running metric --
    atomically into --checkpoint-dir: a temporary file in that directory,
    flush, fsync, os.replace() onto checkpoint.json, fsync of the directory.

  * Then it publishes {"checkpoint": "/abs/path/checkpoint.json"} at the path
    in SSHGPU_CHECKPOINT_READY (or CARDBATON_CHECKPOINT_READY), atomically
    in the same way, and exits with status 75 (EX_TEMPFAIL).  The worker
    records the job `paused` only when it sees both the exit status 75 and a
    valid marker; anything else is a failure.

  * On resume the worker runs the job's resume_command with SSHGPU_CHECKPOINT
    (and CARDBATON_CHECKPOINT) set to the saved path; the job loads it and
    continues with the next step.  Without it the job starts from step 0.

  * At the end it writes --result (JSON: the final parameters, metric and
    step count, floats exact to the last bit) atomically and exits 0.

A run that is paused and resumed any number of times produces a result that
is byte-identical to an uninterrupted run, and a step log in which every
step appears exactly once, in order: the checkpoint records the step log's
length, and a resumed run cuts the log back to it (dropping lines written by
an attempt that was stopped after that checkpoint), then appends.  A fresh
run starts the step log afresh.  (With the default --log - the lines go to
standard output, which the worker appends to the attempt's log.)

SIGTERM (what `cardbaton cancel` sends, and what the worker sends after a
time limit without a checkpoint) stops the job at once: a half-written file
is removed, no marker is published, and the job dies of the signal (status
143 to a shell).  SIGINT likewise.  A hyper-parameter (--seed, --lr, --batch)
that differs from the checkpoint's is refused: the resume command must
continue the same run.  --steps may grow between attempts.

Exit status: 0 done; 75 paused, checkpoint saved and published; 64 usage;
65 unusable checkpoint; 66 checkpoint missing; 74 I/O error.

Job file (see examples/job.yaml):

    command: [python3, checkpoint_job.py, --result, result.json, --log, steps.log]
    resume_command: python3 checkpoint_job.py --result result.json --log steps.log

Try it by hand:

    SSHGPU_PAUSE_FILE=/tmp/p SSHGPU_CHECKPOINT_READY=/tmp/ready \\
        python3 checkpoint_job.py --log steps.log --result r.json &
    sleep 1; touch /tmp/p; wait     # exit 75, /tmp/ready names the state
    rm /tmp/p
    SSHGPU_CHECKPOINT=$(python3 -c 'import json; print(json.load(open("/tmp/ready"))["checkpoint"])') \\
        python3 checkpoint_job.py --log steps.log --result r.json
"""

import argparse
import json
import os
import random
import signal
import sys
import time

try:
    import cardbaton
except ImportError:     # not installed: the source tree's
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "python"))
    import cardbaton

EX_OK = 0
EX_USAGE = 64
EX_DATAERR = 65
EX_NOINPUT = 66
EX_IOERR = 74

STATE_FORMAT = "cardbaton-example-checkpoint/1"
STATE_NAME = "checkpoint.json"
PROG = "checkpoint_job.py"

# The synthetic task: y = TRUE_W . x + TRUE_B + uniform noise in [-NOISE, NOISE].
TRUE_W = (2.0, -3.0, 0.5)
TRUE_B = 1.0
NOISE = 0.1
EMA = 0.9                   # running metric: exponential moving average of the loss


class Usage(argparse.ArgumentParser):
    """argparse, with the sysexits usage status (64) instead of 2."""

    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(EX_USAGE, "%s: %s\n" % (self.prog, message))


class Fatal(Exception):
    """A message for stderr and the exit status that goes with it."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def warn(msg):
    sys.stderr.write("%s: %s\n" % (PROG, msg))
    sys.stderr.flush()


# ---- atomic files: the helper's ---------------------------------------------

atomic_write = cardbaton.atomic_write
fsync_dir = cardbaton.fsync_dir


def dumps(obj):
    # json writes floats with repr(): the shortest text that reads back to
    # the same double, so saving and loading loses nothing.
    return json.dumps(obj, indent=1, sort_keys=True) + "\n"


# ---- the model --------------------------------------------------------------

class Trainer:
    def __init__(self, seed, lr, batch):
        self.seed, self.lr, self.batch = seed, lr, batch
        self.rng = random.Random(seed)
        self.step = 0
        self.params = [0.0] * (len(TRUE_W) + 1)      # weights..., bias
        self.metric = None                           # EMA of the loss
        self.log_bytes = 0                           # step log length at self.step

    def train_step(self):
        """One SGD step on a fresh minibatch; returns the minibatch loss
        (measured before the update)."""
        n = len(TRUE_W)
        grad = [0.0] * (n + 1)
        loss = 0.0
        for _ in range(self.batch):
            x = [self.rng.gauss(0.0, 1.0) for _ in range(n)]
            # Three Gaussians a sample: random.gauss() makes them in pairs and
            # keeps the second for the next call, so the generator's state
            # between steps includes a cached value (getstate() has it).
            noise = NOISE * (2.0 * self.rng.random() - 1.0)
            y = sum(w * xi for w, xi in zip(TRUE_W, x)) + TRUE_B + noise
            err = sum(p * xi for p, xi in zip(self.params, x)) + self.params[n] - y
            loss += err * err
            for i in range(n):
                grad[i] += 2.0 * err * x[i]
            grad[n] += 2.0 * err
        loss /= self.batch
        for i in range(n + 1):
            self.params[i] -= self.lr * grad[i] / self.batch
        self.metric = loss if self.metric is None else EMA * self.metric + (1.0 - EMA) * loss
        self.step += 1
        return loss

    # The state: everything the next step depends on.
    def state(self):
        version, internal, gauss_next = self.rng.getstate()
        return {
            "format": STATE_FORMAT,
            "hyper": {"seed": self.seed, "lr": self.lr, "batch": self.batch},
            "step": self.step,
            "rng": [version, list(internal), gauss_next],
            "params": self.params,
            "metric": self.metric,
            "log_bytes": self.log_bytes,
        }

    def load(self, st):
        try:
            if st["format"] != STATE_FORMAT:
                raise ValueError("format %r, not %r" % (st["format"], STATE_FORMAT))
            want = {"seed": self.seed, "lr": self.lr, "batch": self.batch}
            if st["hyper"] != want:
                raise ValueError("it was made with %s, this run has %s" % (
                    json.dumps(st["hyper"], sort_keys=True), json.dumps(want, sort_keys=True)))
            version, internal, gauss_next = st["rng"]
            self.rng.setstate((version, tuple(internal), gauss_next))
            step, params, metric, log_bytes = st["step"], st["params"], st["metric"], st["log_bytes"]
            if not (isinstance(step, int) and step >= 0 and isinstance(log_bytes, int) and log_bytes >= 0):
                raise ValueError("bad step or log_bytes")
            if len(params) != len(self.params) or not all(isinstance(p, float) for p in params):
                raise ValueError("bad params")
            if not (metric is None or isinstance(metric, float)):
                raise ValueError("bad metric")
        except (KeyError, TypeError, ValueError) as e:
            msg = str(e) if isinstance(e, ValueError) else "%s: %s" % (type(e).__name__, e)
            raise Fatal(EX_DATAERR, "unusable checkpoint: %s" % msg)
        self.step, self.params, self.metric, self.log_bytes = step, list(params), metric, log_bytes

    def result(self):
        return {"steps": self.step, "params": self.params, "metric": self.metric}


# ---- the step log -------------------------------------------------------------

class StepLog:
    """Lines "step K loss X", flushed one by one.  A file is cut back to the
    length the state records, so that every step appears exactly once."""

    def __init__(self, path, length):
        self.path = path
        if path == "-":
            self.f = sys.stdout
            return
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o666)
            size = os.fstat(fd).st_size
            if size > length:
                os.ftruncate(fd, length)
            elif size < length:
                warn("%s: %d bytes, shorter than the %d the checkpoint recorded; appending"
                     % (path, size, length))
            self.f = os.fdopen(fd, "a", encoding="utf-8")
        except OSError as e:
            raise Fatal(EX_IOERR, "%s: %s" % (path, e.strerror))

    def write(self, line):
        self.f.write(line + "\n")
        self.f.flush()

    def length(self):
        """Bytes in the log file (0 for stdout)."""
        if self.path == "-":
            return 0
        return os.lseek(self.f.fileno(), 0, os.SEEK_CUR)    # O_APPEND: the end

    def sync(self):
        if self.path != "-":
            os.fsync(self.f.fileno())


# ---- pausing -------------------------------------------------------------------

def pause(trainer, log, ckdir):
    """Save, publish, exit 75 (never returns)."""
    try:
        log.sync()      # the state's log_bytes must not be ahead of the disk
        created = not os.path.isdir(ckdir)
        os.makedirs(ckdir, exist_ok=True)
        if created:
            fsync_dir(os.path.dirname(os.path.abspath(ckdir)))
        path = os.path.join(os.path.abspath(ckdir), STATE_NAME)
        atomic_write(path, json.dumps(trainer.state(), sort_keys=True) + "\n")
        # From here on the marker and the exit status go together: a SIGTERM
        # that arrives now waits (blocked) and the process exits 75.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
        try:
            cardbaton.publish(path)
        except RuntimeError:
            warn("no SSHGPU_CHECKPOINT_READY: not published")
    except OSError as e:
        raise Fatal(EX_IOERR, "saving the checkpoint: %s: %s" % (e.filename, e.strerror))
    warn("paused after step %d: %s" % (trainer.step, path))
    sys.exit(cardbaton.EX_PAUSED)


class Stopped(Exception):
    """SIGTERM or SIGINT: raised wherever the job is, so that a file being
    written is removed (the `finally` in atomic_write); no marker is
    published.  main() then dies of the same signal."""

    def __init__(self, signum):
        super().__init__("stopped by %s, no checkpoint" % signal.Signals(signum).name)
        self.signum = signum


def on_signal(signum, _frame):
    raise Stopped(signum)


# ---- main --------------------------------------------------------------------

def parse_args(argv):
    p = Usage(prog=PROG, description=__doc__.split("\n", 2)[2],
              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=200, help="total steps (default 200)")
    p.add_argument("--step-seconds", type=float, default=0.02,
                   help="seconds to sleep per step, to look like work (default 0.02)")
    p.add_argument("--log", default="-", help="step log, one line per step (default: stdout)")
    p.add_argument("--checkpoint-dir", default="./checkpoints",
                   help="where the state is saved on a pause (default ./checkpoints)")
    p.add_argument("--result", help="final result (JSON), written atomically at the end")
    p.add_argument("--seed", type=int, default=0, help="data and generator seed (default 0)")
    p.add_argument("--lr", type=float, default=0.05, help="learning rate (default 0.05)")
    p.add_argument("--batch", type=int, default=5, help="minibatch size (default 5)")
    a = p.parse_args(argv)
    if a.steps < 0 or a.batch < 1 or not a.step_seconds >= 0:
        p.error("--steps must be >= 0, --batch >= 1, --step-seconds >= 0")
    return a


def run(a):
    trainer = Trainer(a.seed, a.lr, a.batch)
    ck = cardbaton.resume_path()
    if ck:
        try:
            with open(ck, encoding="utf-8") as f:
                st = json.load(f)
        except FileNotFoundError:
            raise Fatal(EX_NOINPUT, "checkpoint %s: no such file" % ck)
        except OSError as e:
            raise Fatal(EX_NOINPUT, "checkpoint %s: %s" % (ck, e.strerror))
        except ValueError as e:
            raise Fatal(EX_DATAERR, "checkpoint %s: not JSON: %s" % (ck, e))
        trainer.load(st)
        if trainer.step > a.steps:
            raise Fatal(EX_DATAERR, "checkpoint %s is at step %d, beyond --steps %d"
                        % (ck, trainer.step, a.steps))
        warn("resuming after step %d from %s" % (trainer.step, ck))
    log = StepLog(a.log, trainer.log_bytes)

    while trainer.step < a.steps:
        loss = trainer.train_step()
        if a.step_seconds:
            time.sleep(a.step_seconds)
        log.write("step %d loss %r" % (trainer.step, loss))
        trainer.log_bytes = log.length()
        # The safe point.  After the last step there is nothing left to save:
        # the job simply finishes.
        if trainer.step < a.steps and cardbaton.pause_requested():
            pause(trainer, log, a.checkpoint_dir)

    if a.result:
        try:
            atomic_write(a.result, dumps(trainer.result()))
        except OSError as e:
            raise Fatal(EX_IOERR, "%s: %s" % (e.filename, e.strerror))
    return EX_OK


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        return run(a)
    except Fatal as e:
        warn(str(e))
        return e.status
    except Stopped as e:
        warn(str(e))
        sys.stdout.flush()
        # Die of the signal itself, so that the worker reports "killed by
        # signal 15" (exit status 143 to a shell).
        signal.signal(e.signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {e.signum})
        os.kill(os.getpid(), e.signum)
        return 128 + e.signum


if __name__ == "__main__":
    sys.exit(main())
