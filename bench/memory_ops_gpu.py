"""Memory-bound kernels of a training step on the wgpu backend vs PyTorch CUDA, in GB/s.

    python bench/memory_ops_gpu.py

Elementwise ops and reductions move bytes, they hardly compute: their speed is the bytes
they read and write per second, against the GPU's memory bandwidth (an H100's HBM3: about
3.35 TB/s). Each case is one node of the shapes bench/lm_step_gpu.py runs (batch 16, seq
256, d_model 512), compiled alone into a plan; every dispatch of that plan is timed on the
GPU (two repetition counts differenced, as matmul_gpu.py does), and PyTorch's equivalent
with CUDA events. Bytes = every input read once + the output written once.
"""

from __future__ import annotations

import argparse

import numpy as np

import asgteach as at
from asgteach.backends import wgpu_backend, wgpu_device
from _gpu_timing import cuda_seconds, probe_buffer, time_dispatches  # bench/ is on sys.path when a script runs

B, T, D = 16, 256, 512


def torch_f():
    """torch.nn.functional, imported only when PyTorch is the peer."""
    import torch.nn.functional

    return torch.nn.functional


CASES = {
    # name: (input shapes, asgteach function, torch function)
    "add (B,T,D)+(B,T,D)": ([(B, T, D), (B, T, D)], lambda a, b: a + b, lambda a, b: a + b),
    "sub (B,T,D)-(B,T,1)": ([(B, T, D), (B, T, 1)], lambda a, b: a - b, lambda a, b: a - b),
    "mul (B,T,D)*(D,)": ([(B, T, D), (D,)], lambda a, b: a * b, lambda a, b: a * b),
    "gelu (B,T,4D)": ([(B, T, 4 * D)], lambda a: at.ops.gelu(a), lambda a: torch_f().gelu(a)),
    "mean over D": ([(B, T, D)], lambda a: at.mean(a, axis=-1, keepdims=True),
                    lambda a: a.mean(dim=-1, keepdim=True)),
    "sum over (B,T): bias grad": ([(B, T, D)], lambda a: at.ops.sum_to(a, (D,)), lambda a: a.sum(dim=(0, 1))),
    "softmax (B,H,T,T)": ([(B, 8, T, T)], lambda a: at.softmax(a, axis=-1), lambda a: a.softmax(dim=-1)),
    "layer_norm (B,T,D)": ([(B, T, D), (D,), (D,)], lambda a, w, b: at.ops.layer_norm(a, w, b, eps=1e-5),
                           lambda a, w, b: torch_f().layer_norm(a, (D,), w, b, 1e-5)),
}


def ours(shapes, fn) -> tuple[float, int, list[str]]:
    with at.Graph():
        xs = [at.input(f"x{k}", s) for k, s in enumerate(shapes)]
        y = fn(*xs)
        plan = wgpu_backend.compile(y.graph, [y.node_id])
    rng = np.random.default_rng(0)
    plan.run({x: rng.standard_normal(x.shape).astype(np.float32) for x in xs})
    g = plan.gpu
    probe = probe_buffer(g)
    out = plan.buffers[plan.outputs[0]]
    time_dispatches(g, plan.encoded, 2, out, probe)
    best = []
    for _ in range(3):
        lo, hi = time_dispatches(g, plan.encoded, 3, out, probe), time_dispatches(g, plan.encoded, 23, out, probe)
        best.append((hi - lo) / 20)
    nbytes = 4 * (sum(int(np.prod(s)) for s in shapes) + y.size)
    return float(np.median(best)), nbytes, [d.entry for d in plan.dispatches]


def theirs(shapes, fn, reps: int = 50) -> float:
    import torch

    xs = [torch.randn(s, device="cuda") for s in shapes]
    return cuda_seconds(lambda: fn(*xs), reps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
    info = wgpu_device.describe()
    print(f"wgpu adapter: {info['adapter']} ({info['backend_type']})")
    print(f"{'case':<28} {'us':>8} {'GB/s':>8} {'torch us':>9} {'torch GB/s':>10}  kernels")
    for name, (shapes, fn, tfn) in CASES.items():
        t, nbytes, kernels = ours(shapes, fn)
        line = f"{name:<28} {t * 1e6:8.1f} {nbytes / t / 1e9:8.0f}"
        if not args.no_torch:
            tt = theirs(shapes, tfn)
            line += f" {tt * 1e6:9.1f} {nbytes / tt / 1e9:10.0f}"
        print(line + "  " + ", ".join(kernels), flush=True)


if __name__ == "__main__":
    main()
