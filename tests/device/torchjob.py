#!/usr/bin/env python3
"""tests/device/torchjob.py - the PyTorch jobs of tests/device/run.

  hold --mib M --ready FILE --stop FILE [--max SECS]
        allocate M MiB on the (one visible) card, create FILE --ready, hold
        it until FILE --stop exists (or --max seconds), exit 0
  cvd --out FILE
        write what the job sees: CUDA_VISIBLE_DEVICES, torch.cuda's device
        count, device 0's name and UUID (JSON)
  train --dir DIR [--steps N] [--step-seconds S] [--seed K]
        a small deterministic training loop (fixed seeds,
        torch.use_deterministic_algorithms, CUBLAS_WORKSPACE_CONFIG) that
        keeps the checkpoint contract (SPEC section 9): after each step it
        looks for SSHGPU_PAUSE_FILE; when it is there it saves model,
        optimizer and every RNG state with torch.save, publishes
        {"checkpoint": PATH} at SSHGPU_CHECKPOINT_READY and exits 75.  Run
        with SSHGPU_CHECKPOINT set, it loads that and goes on.  DIR/progress
        holds the last step done; at the end DIR/result.json has the
        SHA-256 of the final weights (each tensor's name, dtype, shape and
        bytes) and the final loss, and DIR/final.pt the weights.

DEVICE_STANDIN=1: no torch; the same files from a stand-in (the fake GPU
fixtures for hold, CUDA_VISIBLE_DEVICES for cvd, random.Random for train),
so that tests/device/run's own steps can be tried on a machine without a
GPU.  Never used on a real one.
"""
import argparse
import hashlib
import json
import os
import sys
import time

STANDIN = os.environ.get("DEVICE_STANDIN") == "1"
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def env(name):
    return os.environ.get("SSHGPU_" + name) or os.environ.get("CARDBATON_" + name) or None


def atomic_write(path, text):
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# ---- hold ---------------------------------------------------------------------

def fixture_edit(uuid, mib, pid):
    """Stand-in: the card's memory.used and a compute process in the fake
    fixtures (gpus.csv, apps.csv in FAKE_GPU_DIR); mib None restores."""
    d = os.environ["FAKE_GPU_DIR"]
    lines = []
    for line in open(os.path.join(d, "gpus.csv")):
        f = line.rstrip("\n").split(", ")
        if len(f) >= 6 and f[1] == uuid:
            f[-3] = str(mib or 0)
        lines.append(", ".join(f) + "\n")
    atomic_write(os.path.join(d, "gpus.csv"), "".join(lines))
    atomic_write(os.path.join(d, "apps.csv"), "%s, %d, %d\n" % (uuid, pid, mib) if mib else "")


def hold(a):
    if STANDIN:
        uuid = os.environ["CUDA_VISIBLE_DEVICES"]
        fixture_edit(uuid, a.mib, os.getpid())
    else:
        import torch
        x = torch.empty(a.mib << 20, dtype=torch.uint8, device="cuda")
        x.fill_(1)
        torch.cuda.synchronize()
    open(a.ready, "w").close()
    end = time.monotonic() + a.max
    while not os.path.exists(a.stop) and time.monotonic() < end:
        time.sleep(0.05)
    if STANDIN:
        fixture_edit(uuid, None, 0)
    return 0


# ---- cvd ----------------------------------------------------------------------

def cvd(a):
    out = {"cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    if STANDIN:
        v = out["cuda_visible_devices"] or ""
        out.update(count=len([x for x in v.split(",") if x]), name=None,
                   uuid=v.split(",")[0] if v else None, torch=None)
    else:
        import torch
        out["torch"] = torch.__version__
        out["count"] = torch.cuda.device_count()
        if out["count"] > 0:
            p = torch.cuda.get_device_properties(0)
            out["name"] = p.name
            u = getattr(p, "uuid", None)
            # torch prints the UUID without nvidia-smi's "GPU-" prefix.
            out["uuid"] = None if u is None else ("GPU-%s" % u if not str(u).startswith("GPU-") else str(u))
    atomic_write(a.out, json.dumps(out) + "\n")
    return 0


# ---- train --------------------------------------------------------------------

class StandinTrainer:
    """Stand-in for the torch loop: the same files, random.Random state."""

    def __init__(self, seed):
        import random
        self.rng = random.Random(seed)
        self.w = [0.0] * 8
        self.step = 0
        self.loss = None

    def train_step(self):
        x = [self.rng.gauss(0, 1) for _ in self.w]
        y = sum(xi * (i + 1) for i, xi in enumerate(x))
        err = sum(w * xi for w, xi in zip(self.w, x)) - y
        self.w = [w - 0.01 * 2 * err * xi for w, xi in zip(self.w, x)]
        self.loss = err * err
        self.step += 1

    def save(self, path):
        atomic_write(path, json.dumps({"step": self.step, "w": self.w, "loss": self.loss,
                                       "rng": [self.rng.getstate()[0], list(self.rng.getstate()[1]),
                                               self.rng.getstate()[2]]}))

    def load(self, path):
        st = json.load(open(path))
        self.step, self.w, self.loss = st["step"], st["w"], st["loss"]
        v, internal, g = st["rng"]
        self.rng.setstate((v, tuple(internal), g))

    def digest(self):
        return hashlib.sha256(json.dumps(self.w).encode()).hexdigest()

    def save_final(self, path):
        atomic_write(path, json.dumps(self.w))


class TorchTrainer:
    def __init__(self, seed):
        import torch
        self.torch = torch
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.manual_seed(seed)
        self.dev = torch.device("cuda")
        self.model = torch.nn.Sequential(
            torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Dropout(0.1),
            torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8)).to(self.dev)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.data = torch.Generator(device=self.dev)
        self.data.manual_seed(seed + 1)
        self.target = torch.randn(64, 8, device=self.dev, generator=self.data)
        self.step = 0
        self.loss = None

    def train_step(self):
        torch = self.torch
        x = torch.randn(128, 64, device=self.dev, generator=self.data)
        y = torch.tanh(x @ self.target) + 0.01 * torch.randn(128, 8, device=self.dev, generator=self.data)
        self.opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        self.opt.step()
        self.loss = float(loss.item())       # a sync point: the step is done
        self.step += 1

    def save(self, path):
        torch = self.torch
        st = {"step": self.step, "loss": self.loss,
              "model": self.model.state_dict(), "opt": self.opt.state_dict(),
              "rng_cpu": torch.get_rng_state(), "rng_cuda": torch.cuda.get_rng_state(self.dev),
              "rng_data": self.data.get_state(), "target": self.target}
        tmp = "%s.%d.tmp" % (path, os.getpid())
        torch.save(st, tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def load(self, path):
        torch = self.torch
        try:
            st = torch.load(path, map_location="cpu", weights_only=False)
        except TypeError:           # a torch without weights_only
            st = torch.load(path, map_location="cpu")
        self.model.load_state_dict(st["model"])
        self.opt.load_state_dict(st["opt"])
        torch.set_rng_state(st["rng_cpu"])
        torch.cuda.set_rng_state(st["rng_cuda"], self.dev)
        self.data.set_state(st["rng_data"])
        self.target = st["target"].to(self.dev)
        self.step, self.loss = st["step"], st["loss"]

    def digest(self):
        torch = self.torch
        h = hashlib.sha256()
        for k, t in sorted(self.model.state_dict().items()):
            t = t.detach().cpu().contiguous()
            h.update(("%s %s %s\n" % (k, t.dtype, tuple(t.shape))).encode())
            h.update(bytes(t.view(-1).view(torch.uint8).tolist()))
        return h.hexdigest()

    def save_final(self, path):
        self.torch.save(self.model.state_dict(), path)


def train(a):
    os.makedirs(a.dir, exist_ok=True)
    tr = StandinTrainer(a.seed) if STANDIN else TorchTrainer(a.seed)
    ck = env("CHECKPOINT")
    resumed_at = None
    if ck:
        tr.load(ck)
        resumed_at = tr.step
        print("resumed after step %d from %s" % (tr.step, ck), flush=True)
    pause_file = env("PAUSE_FILE")
    progress = os.path.join(a.dir, "progress")
    while tr.step < a.steps:
        tr.train_step()
        if a.step_seconds:
            time.sleep(a.step_seconds)
        atomic_write(progress, "%d\n" % tr.step)
        if pause_file and tr.step < a.steps and os.path.exists(pause_file):
            path = os.path.abspath(os.path.join(a.dir, "checkpoint.pt"))
            tr.save(path)
            ready = env("CHECKPOINT_READY")
            atomic_write(ready, json.dumps({"checkpoint": path}) + "\n")
            atomic_write(os.path.join(a.dir, "paused-at"), "%d\n" % tr.step)
            print("paused after step %d: %s" % (tr.step, path), flush=True)
            return 75
    tr.save_final(os.path.join(a.dir, "final.pt"))
    atomic_write(os.path.join(a.dir, "result.json"),
                 json.dumps({"steps": tr.step, "sha256": tr.digest(), "loss": repr(tr.loss),
                             "resumed_at": resumed_at}) + "\n")
    return 0


def main():
    p = argparse.ArgumentParser(prog="torchjob.py")
    sub = p.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("hold")
    h.add_argument("--mib", type=int, default=2048)
    h.add_argument("--ready", required=True)
    h.add_argument("--stop", required=True)
    h.add_argument("--max", type=float, default=120)
    c = sub.add_parser("cvd")
    c.add_argument("--out", required=True)
    t = sub.add_parser("train")
    t.add_argument("--dir", required=True)
    t.add_argument("--steps", type=int, default=400)
    t.add_argument("--step-seconds", type=float, default=0.02)
    t.add_argument("--seed", type=int, default=1234)
    a = p.parse_args()
    return {"hold": hold, "cvd": cvd, "train": train}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
