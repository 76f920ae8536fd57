"""Matmul kernels on the shapes a training step really runs: every tile x every shape vs cuBLAS.

    python bench/gemm_shapes.py                        # the LM step's GEMM shapes + 2048 and 4096 squares
    python bench/gemm_shapes.py --tiles 128x128x16x8x8 128x128x16x8x8/db/w8 --shapes 16x256x512x512

A shape is ``BxMxNxK:XY`` where X and Y say whether A and B are read transposed in place (``N`` or
``T``), with a ``w`` after them when B is one matrix broadcast over the batch (a ``Linear``
layer's weight). The default list is one training step's GEMMs, each with its count per step,
and the sums at the end weigh each shape by that count (one step's GEMM time).
Each (tile, shape) pair is a one-matmul plan, checked against numpy (float64) before it is
timed by ``matmul_gpu.wgpu_seconds_per_matmul`` (two batch sizes differenced). The tile is
forced through ``ASGTEACH_WGPU_MATMUL_TILE`` and the plan's automatic tile choice is timed
too (``auto``). cuBLAS (PyTorch, TF32 off) runs the same batched product with the same
transposes and broadcast. The table gives TFLOP/s; the last column is the best tile's share
of cuBLAS.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

import asgteach as at
from asgteach.backends import wgpu_backend, wgpu_device
from asgteach.backends.wgpu_matmul import Tile
from _gpu_timing import cuda_seconds  # bench/ is on sys.path when a script runs
from matmul_gpu import wgpu_seconds_per_matmul

#: the LM step's GEMMs and how many of each one step runs (bench/lm_step_gpu.py, base size: batch 16,
#: seq 256, d 512, 8 heads, FFN 2048; ``python /tmp/gemms.py``-style listing of the plan's matmul dispatches)
LM_SHAPES = {"16x256x512x512:NNw": 16, "16x256x512x512:NTw": 16, "16x256x2048x512:NNw": 4,
             "16x256x2048x512:NTw": 4, "16x256x512x2048:NNw": 4, "16x256x512x2048:NTw": 4,
             "4x2048x512x1024:TN": 4, "4x512x2048x1024:TN": 4, "16x512x512x256:TN": 16,
             "128x256x256x64:NT": 8, "128x256x64x256:NN": 8, "128x256x64x256:TN": 8,
             "16x256x256x512:NNw": 1, "16x256x512x256:NTw": 1, "16x512x256x256:TN": 1}
SQUARES = {"1x2048x2048x2048:NN": 0, "1x4096x4096x4096:NN": 0}
TILES = ["auto", "128x128x16x8x8", "128x128x32x8x8", "64x128x16x8x8", "128x64x16x8x8", "128x64x16x8x4",
         "64x64x16x8x8", "64x64x16x4x4", "256x128x16x16x8"]


def parse(spec: str) -> tuple[int, int, int, int, bool, bool, bool]:
    dims, _, flags = spec.partition(":")
    nb, m, n, k = (int(v) for v in dims.split("x"))
    return nb, m, n, k, flags[:1] == "T", flags[1:2] == "T", flags.endswith("w")


def operands(nb: int, m: int, n: int, k: int, ta: bool, tb: bool, w: bool) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    a = rng.random((nb, k, m) if ta else (nb, m, k), dtype=np.float32) - 0.5
    bshape = (n, k) if tb else (k, n)
    b = rng.random(bshape if w else (nb, *bshape), dtype=np.float32) - 0.5
    return a, b


def product(a, b, ta: bool, tb: bool):
    """(A or A^T) @ (B or B^T) with the transposes as views: works on numpy, asgteach and torch."""
    sw = (lambda x: x.swapaxes(-1, -2)) if hasattr(a, "swapaxes") else (lambda x: x.transpose(-1, -2))
    return (sw(a) if ta else a) @ (sw(b) if tb else b)


def ours(spec: str, tile: str, a: np.ndarray, b: np.ndarray, ref: np.ndarray, limit: int) -> tuple[float, str]:
    nb, m, n, k, ta, tb, w = parse(spec)
    if tile == "auto":
        os.environ.pop("ASGTEACH_WGPU_MATMUL_TILE", None)
    else:
        t = Tile.parse(tile)
        if t.bk * (t.bm + t.bn) * 4 > limit:
            return float("nan"), "too much shared memory"
        os.environ["ASGTEACH_WGPU_MATMUL_TILE"] = tile
    with at.Graph():
        x, y = at.input("a", a.shape), at.input("b", b.shape)
        c = at.transpose(x, (0, 2, 1)) if ta else x
        d = (at.transpose(y, (0, 2, 1)) if y.ndim == 3 else y.T) if tb else y
        out = c @ d
        plan = wgpu_backend.compile(out.graph, [out.node_id])
    (got,) = plan.run({x: a, y: b})
    err = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
    used = [d.key[2] for d in plan.dispatches if d.entry == "matmul"]
    if err > 1e-4:
        return float("nan"), f"WRONG (err {err:.1e})"
    return wgpu_seconds_per_matmul(plan), used[0]


def cublas(a: np.ndarray, b: np.ndarray, ta: bool, tb: bool, reps: int = 20) -> float:
    import torch

    ta_, tb_ = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    return cuda_seconds(lambda: product(ta_, tb_, ta, tb), reps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", nargs="+", default=[*LM_SHAPES, *SQUARES])
    ap.add_argument("--tiles", nargs="+", default=TILES)
    args = ap.parse_args()
    info = wgpu_device.describe()
    limit = int(wgpu_device.gpu().limits["max-compute-workgroup-storage-size"])
    print(f"wgpu adapter: {info['adapter']} ({info['backend_type']}), workgroup storage {limit} bytes")
    try:
        import torch

        have_torch = torch.cuda.is_available()
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
    except ImportError:
        have_torch = False
    total = {t: 0.0 for t in args.tiles}
    total_best = total_cublas = 0.0
    for spec in args.shapes:
        count = {**LM_SHAPES, **SQUARES}.get(spec, 1)
        nb, m, n, k, ta, tb, w = parse(spec)
        flops = 2.0 * nb * m * n * k
        a, b = operands(nb, m, n, k, ta, tb, w)
        ref = product(a.astype(np.float64), b.astype(np.float64), ta, tb)
        t_cu = cublas(a, b, ta, tb) if have_torch else float("nan")
        total_cublas += count * t_cu
        row = []
        for tile in args.tiles:
            t, used = ours(spec, tile, a, b, ref, limit)
            total[tile] += count * t
            row.append((t, tile, used))
            shown = f"{flops / t / 1e12:6.2f}" if t == t else "     -"
            print(f"  {spec:>22} {tile:>22} {shown} TFLOP/s  {t * 1e3:7.3f} ms  ({used})", flush=True)
        best = min((r for r in row if r[0] == r[0]), default=(float("nan"), "-", "-"))
        total_best += count * best[0]
        print(f"{spec:>22}: best {best[1]} {flops / best[0] / 1e12:.2f} TFLOP/s; cuBLAS "
              f"{flops / t_cu / 1e12:.2f} TFLOP/s; best/cuBLAS {t_cu / best[0]:.1%}", flush=True)
    os.environ.pop("ASGTEACH_WGPU_MATMUL_TILE", None)
    print("\nSUM over the shapes, each times its count per step, ms:")
    for tile, t in total.items():
        print(f"  {tile:>22} {t * 1e3:8.3f}")
    print(f"  {'best per shape':>22} {total_best * 1e3:8.3f}\n  {'cuBLAS':>22} {total_cublas * 1e3:8.3f}")


if __name__ == "__main__":
    main()
