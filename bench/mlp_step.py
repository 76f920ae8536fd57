"""One SGD training step of a 784-128-64-10 MLP, three ways, one thread each.

    /work/main/.venv/bin/python bench/mlp_step.py            # default: 200 steps x 11 repeats
    /work/main/.venv/bin/python bench/mlp_step.py --quick    # a fast smoke run
    /work/main/.venv/bin/python bench/mlp_step.py --steps 50 --repeats 41 --clock cpu

(a) asgteach's numpy backend: forward, ``at.grad`` and the SGD update ``w - lr * dw`` are
    all graph ops, compiled once into a Plan; each step is one ``plan.run`` that feeds the
    current parameters and the batch and returns the loss and the new parameters.
    ``asgteach-trainer`` is the same model through the public training API
    (``at.Trainer(loss, at.optim.SGD(lr))``, one ``train_step`` per step), which adds the
    Trainer's own work: feeds cast and merged, every output checked finite.
(b) the same step written by hand in numpy (forward, manual backward, in-place update).
(c) PyTorch eager on CPU, the leanest way: raw tensors, ``addmm``, fused cross-entropy,
    ``backward()``, in-place update. The target is checked against this one.
    For information it also times the way most PyTorch code is written (``nn.Sequential``
    of ``nn.Linear``, ``torch.optim.SGD``), which is slower (module and optimizer overhead).

The script first checks that all three compute the same loss and the same updated
weights from the same initial weights and batch (float32, rtol 1e-4), and stops if not.
Then it times them interleaved and prints the medians and issue 27's two target ratios:
asgteach / hand-numpy <= 1.05, and asgteach / torch-eager <= 0.75 (paired medians).

``--clock cpu`` (the default) times each sample by the process's CPU time
(``time.process_time``): every contender runs on one thread, so that is its work, without
the time the machine gave to other processes in between. On a shared, loaded machine wall
time mostly measures the queue (``--clock wall`` for it). Either way the load average is
printed before and after, next to the figures.
"""

from __future__ import annotations

import os

# One thread for everyone: set before numpy (and its BLAS) is imported.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Callable  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing
sys.path.insert(0, str(Path(__file__).resolve().parent))

import asgteach as at  # noqa: E402
from _timing import paired_ratio, summary, time_interleaved  # noqa: E402

SIZES = (784, 128, 64, 10)
BATCH = 64
LR = 0.05
TARGET_VS_NUMPY = 1.05   # asgteach / hand-numpy must be at most this (issue 27)
TARGET_VS_TORCH = 0.75   # asgteach / torch-eager must be at most this (issue 27)


def init_params(seed: int = 0) -> list[np.ndarray]:
    """[w1, b1, w2, b2, w3, b3], float32, Kaiming-uniform-like weights, small biases."""
    rng = np.random.default_rng(seed)
    params = []
    for din, dout in zip(SIZES[:-1], SIZES[1:]):
        bound = np.sqrt(6.0 / din)
        params.append(rng.uniform(-bound, bound, (din, dout)).astype(np.float32))
        params.append(rng.uniform(-0.1, 0.1, (dout,)).astype(np.float32))
    return params


def make_batch(seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, integer labels, one-hot targets), float32."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    labels = rng.integers(0, SIZES[-1], BATCH)
    onehot = np.zeros((BATCH, SIZES[-1]), dtype=np.float32)
    onehot[np.arange(BATCH), labels] = 1.0
    return x, labels, onehot


# --- (a) asgteach ---------------------------------------------------------------------------
class AsgteachStep:
    """The whole step as one graph: loss and new parameters are its outputs."""

    def __init__(self, params: list[np.ndarray]) -> None:
        with at.Graph(name="mlp_step") as g:
            self.x = at.input("x", (BATCH, SIZES[0]))
            self.t = at.input("t", (BATCH, SIZES[-1]))   # one-hot targets
            self.p = []
            for i, (din, dout) in enumerate(zip(SIZES[:-1], SIZES[1:]), start=1):
                self.p.append(at.parameter(f"w{i}", (din, dout), init="kaiming_uniform", layer=f"fc{i}", role="weight"))
                self.p.append(at.parameter(f"b{i}", (dout,), init="zeros", layer=f"fc{i}", role="bias"))
            h = self.x
            for i in range(0, len(self.p), 2):
                h = h @ self.p[i] + self.p[i + 1]
                if i + 2 < len(self.p):
                    h = at.relu(h)
            # softmax cross-entropy from logits, mean over the batch
            self.loss = -at.mean(at.sum(at.log_softmax(h, axis=-1) * self.t, axis=-1))
            grads = at.grad(self.loss, self.p)
            self.new = [p - LR * d for p, d in zip(self.p, grads)]
        self.graph = g
        self.plan = at.compile([self.loss, *self.new])
        self.values = list(params)

    def step(self, x: np.ndarray, onehot: np.ndarray) -> float:
        outs = self.plan.run({self.x: x, self.t: onehot}, params=dict(zip(self.p, self.values)))
        self.values = outs[1:]
        return float(outs[0])


class TrainerStep:
    """The same MLP through the public training API: ``at.Trainer`` with ``at.optim.SGD``."""

    def __init__(self, params: list[np.ndarray]) -> None:
        with at.Graph(name="mlp_trainer"):
            self.x = at.input("x", (BATCH, SIZES[0]))
            self.t = at.input("t", (BATCH, SIZES[-1]))
            names, h = [], self.x
            for i, (din, dout) in enumerate(zip(SIZES[:-1], SIZES[1:]), start=1):
                w, b = at.parameter(f"w{i}", (din, dout)), at.parameter(f"b{i}", (dout,))
                names += [w.name, b.name]
                h = h @ w + b
                if i < len(SIZES) - 1:
                    h = at.relu(h)
            loss = -at.mean(at.sum(at.log_softmax(h, axis=-1) * self.t, axis=-1))
        self.names = names
        self.trainer = at.Trainer(loss, at.optim.SGD(lr=LR), initial=dict(zip(names, params)))

    def step(self, x: np.ndarray, onehot: np.ndarray) -> float:
        return self.trainer.train_step({self.x: x, self.t: onehot})

    @property
    def values(self) -> list[np.ndarray]:
        params = self.trainer.params
        return [params[n] for n in self.names]


# --- (b) hand-written numpy -----------------------------------------------------------------
class NumpyStep:
    """What a competent person writes: forward, manual backward, in-place SGD."""

    def __init__(self, params: list[np.ndarray]) -> None:
        self.values = [p.copy() for p in params]

    def step(self, x: np.ndarray, labels: np.ndarray) -> float:
        w1, b1, w2, b2, w3, b3 = self.values
        n = x.shape[0]
        h1 = x @ w1
        h1 += b1
        a1 = np.maximum(h1, 0)
        h2 = a1 @ w2
        h2 += b2
        a2 = np.maximum(h2, 0)
        z = a2 @ w3
        z += b3
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        s = e.sum(axis=1, keepdims=True)
        rows = np.arange(n)
        loss = float(np.log(s).sum() - z[rows, labels].sum()) / n
        dz = e
        dz /= s
        dz[rows, labels] -= 1.0
        dz *= np.float32(1.0 / n)
        dw3 = a2.T @ dz
        db3 = dz.sum(axis=0)
        da2 = dz @ w3.T
        da2 *= h2 > 0
        dw2 = a1.T @ da2
        db2 = da2.sum(axis=0)
        da1 = da2 @ w2.T
        da1 *= h1 > 0
        dw1 = x.T @ da1
        db1 = da1.sum(axis=0)
        lr = np.float32(LR)
        for p, d in zip(self.values, (dw1, db1, dw2, db2, dw3, db3)):
            d *= lr
            p -= d
        return loss


# --- (c) PyTorch eager ----------------------------------------------------------------------
class TorchStep:
    """Eager PyTorch: autograd for the backward, in-place update without tracking."""

    def __init__(self, params: list[np.ndarray]) -> None:
        import torch

        self.torch = torch
        self.values = [torch.tensor(p, requires_grad=True) for p in params]

    def step(self, x, labels) -> float:  # torch tensors
        torch = self.torch
        w1, b1, w2, b2, w3, b3 = self.values
        h = torch.relu(torch.addmm(b1, x, w1))
        h = torch.relu(torch.addmm(b2, h, w2))
        z = torch.addmm(b3, h, w3)
        loss = torch.nn.functional.cross_entropy(z, labels)
        loss.backward()
        with torch.no_grad():
            for p in self.values:
                p.add_(p.grad, alpha=-LR)
                p.grad = None
        return loss.item()

    def numpy_values(self) -> list[np.ndarray]:
        return [p.detach().numpy().copy() for p in self.values]


class MatmulsOnly:
    """Not a contender: just the step's 8 matrix products (3 forward, 5 backward) in numpy.

    Every implementation has to do these; their time is the floor under any of them.
    """

    def __init__(self, params: list[np.ndarray], x: np.ndarray) -> None:
        rng = np.random.default_rng(2)
        self.w = params[0::2]
        self.x = x
        self.a = [rng.standard_normal((BATCH, n)).astype(np.float32) for n in SIZES[1:]]  # stand-in values

    def step(self) -> None:
        (w1, w2, w3), x, (a1, a2, dz) = self.w, self.x, self.a
        x @ w1, a1 @ w2, a2 @ w3                       # forward
        a2.T @ dz, dz @ w3.T, a1.T @ a2, a2 @ w2.T, x.T @ a1   # backward (dW3, dA2, dW2, dA1, dW1)


class TorchModuleStep:
    """Idiomatic PyTorch: nn.Sequential of nn.Linear, F.cross_entropy, torch.optim.SGD."""

    def __init__(self, params: list[np.ndarray]) -> None:
        import torch

        layers: list = []
        for i in range(0, len(params), 2):
            lin = torch.nn.Linear(*params[i].shape)
            with torch.no_grad():  # nn.Linear keeps its weight as (out, in)
                lin.weight.copy_(torch.from_numpy(params[i].T.copy()))
                lin.bias.copy_(torch.from_numpy(params[i + 1]))
            layers += [lin, torch.nn.ReLU()]
        self.torch = torch
        self.net = torch.nn.Sequential(*layers[:-1])
        self.opt = torch.optim.SGD(self.net.parameters(), lr=LR)

    def step(self, x, labels) -> float:
        self.opt.zero_grad(set_to_none=True)
        loss = self.torch.nn.functional.cross_entropy(self.net(x), labels)
        loss.backward()
        self.opt.step()
        return loss.item()

    def numpy_values(self) -> list[np.ndarray]:
        out = []
        for lin in self.net[::2]:
            out += [lin.weight.detach().numpy().T.copy(), lin.bias.detach().numpy().copy()]
        return out


def check_agreement(params: list[np.ndarray], batch, torch_ok: bool, rtol: float = 1e-4) -> None:
    """Same init, same batch -> same loss and same updated weights, or stop loudly."""
    x, labels, onehot = batch
    a, b, tr = AsgteachStep(params), NumpyStep(params), TrainerStep(params)
    results = {"asgteach": (a.step(x, onehot), a.values), "numpy": (b.step(x, labels), b.values),
               "asgteach-trainer": (tr.step(x, onehot), tr.values)}
    if torch_ok:
        import torch

        for name, cls in (("torch", TorchStep), ("torch-nn", TorchModuleStep)):
            c = cls(params)
            loss_c = c.step(torch.from_numpy(x), torch.from_numpy(labels))
            results[name] = (loss_c, c.numpy_values())
    ref_loss, ref_vals = results["numpy"]
    names = ["w1", "b1", "w2", "b2", "w3", "b3"]
    for who, (loss, vals) in results.items():
        if not np.isclose(loss, ref_loss, rtol=rtol, atol=0):
            raise SystemExit(f"MISMATCH: {who} loss {loss!r} vs hand-numpy {ref_loss!r}")
        for name, v, r in zip(names, vals, ref_vals):
            if v.dtype != np.float32:
                raise SystemExit(f"MISMATCH: {who} returned {name} as {v.dtype}, expected float32")
            # atol: an updated weight can sit near 0, where a relative test alone is meaningless
            if not np.allclose(v, r, rtol=rtol, atol=1e-6):
                err = np.max(np.abs(v - r))
                raise SystemExit(f"MISMATCH: {who} updated {name} differs from hand-numpy by up to {err:.3g}")
    print(f"agreement: loss {ref_loss:.6f}; asgteach, asgteach-trainer, hand-numpy"
          + (", torch, torch-nn" if torch_ok else "")
          + f" agree on the loss and all 6 updated parameters (rtol {rtol:g})")


def cpu_interleaved(contenders: dict[str, Callable[[], None]], steps: int, repeats: int,
                    warmup: int) -> dict[str, list[float]]:
    """As ``_timing.time_interleaved``, but each sample is process CPU seconds per call, and the
    order turns by one each round: a contender does not always start where the same other one
    left the caches (the one that ran before it can cost it a few microseconds a step)."""
    for fn in contenders.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    clock = time.process_time
    names = list(contenders)
    for r in range(repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn = contenders[name]
            start = clock()
            for _ in range(steps):
                fn()
            samples[name].append((clock() - start) / steps)
    return samples


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=200, help="training steps per timing sample (default 200)")
    ap.add_argument("--repeats", type=int, default=11, help="timing samples per contender (default 11)")
    ap.add_argument("--warmup", type=int, default=30, help="untimed steps first (default 30)")
    ap.add_argument("--quick", action="store_true", help="a fast smoke run: 50 steps x 3 repeats")
    ap.add_argument("--no-torch", action="store_true", help="skip PyTorch (e.g. not installed)")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                    help="time samples by the process's CPU time (default) or by wall time")
    args = ap.parse_args(argv)
    if args.quick:
        args.steps, args.repeats, args.warmup = 50, 3, 10

    torch_ok = not args.no_torch
    if torch_ok:
        try:
            import torch
        except ImportError:
            print("PyTorch is not installed: pip install torch==2.13.0 (or pass --no-torch)")
            return 2
        torch.set_num_threads(1)
        torch.set_num_interop_threads(1)
        torch_version = torch.__version__
    print(f"MLP {'-'.join(map(str, SIZES))}, batch {BATCH}, float32, SGD lr {LR}; one thread each")
    print(f"numpy {np.__version__}" + (f", torch {torch_version}" if torch_ok else "")
          + f"; {args.steps} steps x {args.repeats} repeats (interleaved), {args.warmup} warm-up steps;"
          + f" clock: {'process CPU time' if args.clock == 'cpu' else 'wall time'}")

    params, batch = init_params(), make_batch()
    check_agreement(params, batch, torch_ok)

    x, labels, onehot = batch
    a, b, tr = AsgteachStep(params), NumpyStep(params), TrainerStep(params)
    contenders: dict[str, Callable[[], None]] = {
        "asgteach": lambda: a.step(x, onehot),
        "asgteach-trainer": lambda: tr.step(x, onehot),
        "hand-numpy": lambda: b.step(x, labels),
    }
    floor = MatmulsOnly(params, x)
    contenders["matmuls-only"] = floor.step
    if torch_ok:
        c, d = TorchStep(params), TorchModuleStep(params)
        tx, tl = torch.from_numpy(x), torch.from_numpy(labels)
        contenders["torch-eager"] = lambda: c.step(tx, tl)
        contenders["torch-nn"] = lambda: d.step(tx, tl)
    load_before = os.getloadavg()
    if args.clock == "wall":
        samples = time_interleaved(contenders, args.steps, args.repeats, args.warmup)
    else:
        samples = cpu_interleaved(contenders, args.steps, args.repeats, args.warmup)
    load_after = os.getloadavg()
    print(f"load average (1, 5, 15 min): before {', '.join(f'{v:.1f}' for v in load_before)};"
          f" after {', '.join(f'{v:.1f}' for v in load_after)}; {os.cpu_count()} CPUs")

    med = {}
    for name, s in samples.items():
        m, lo, hi = summary(s)
        med[name] = m
        print(f"  {name:16s} median {m * 1e6:8.1f} us/step   (min {lo * 1e6:8.1f}, max {hi * 1e6:8.1f})")
    # Two statistics, both printed: the ratio of the medians, and the median of the paired
    # ratios (sample i of one over sample i of the other, taken back to back, so both saw
    # the same load). On a shared machine the load moves the first more; the verdict uses
    # the paired median.
    ok = True
    pairs = [("asgteach", "hand-numpy", TARGET_VS_NUMPY, "<="),
             ("asgteach-trainer", "hand-numpy", TARGET_VS_NUMPY, "<=")]
    if torch_ok:
        pairs.append(("asgteach", "torch-eager", TARGET_VS_TORCH, "<="))
        pairs.append(("asgteach-trainer", "torch-eager", TARGET_VS_TORCH, "<="))
        pairs.append(("hand-numpy", "torch-eager", None, "info"))
        pairs.append(("asgteach", "torch-nn", None, "info"))
    for num, den, target, sense in pairs:
        r = med[num] / med[den]
        pm, plo, phi = paired_ratio(samples[num], samples[den])
        best = min(samples[num]) / min(samples[den])  # the least disturbed samples
        line = (f"{num + ' / ' + den:31s} = {r:.3f}   (paired: median {pm:.3f}, range {plo:.3f}-{phi:.3f};"
                f" min/min {best:.3f})")
        if target is None:
            print(line + "   (information only)")
            continue
        met = pm <= target if sense == "<=" else pm >= target
        ok = ok and met
        print(line + f"   target {sense} {target:.2f}: {'MET' if met else 'NOT MET'}")
    if torch_ok:
        fm, _, _ = paired_ratio(samples["matmuls-only"], samples["torch-eager"])
        print(f"context: the 8 matmuls alone take {med['matmuls-only'] * 1e6:.1f} us/step in numpy, "
              f"{fm:.3f}x torch-eager's whole step (paired median); hand-numpy / torch-eager above is what the "
              f"same arithmetic costs in numpy without any framework")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
