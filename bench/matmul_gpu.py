"""f32 matmul through the wgpu backend vs PyTorch's cuBLAS SGEMM, on the same GPU, same run.

    python bench/matmul_gpu.py [--sizes 1024 2048 4096] [--tiles 128x128x8x8x8 64x64x8x4x4 ...]

What is timed: the matmul kernel of a compiled asgteach Plan, dispatched R times in ONE
command encoder / ONE submit, then one tiny buffer map to wait for the GPU. Two
repetition counts are run and the difference is divided by the difference of R, so the
fixed costs (submit, map, Python) cancel and what remains is GPU time per matmul.
PyTorch is timed with CUDA events over the same number of products, TF32 OFF (plain
FP32 SGEMM, the same arithmetic as ours). Every configuration's result is checked
against PyTorch's before it is timed.

Tile sizes (BMxBNxBKxTMxTN) are swept at every size; the best per size is reported,
and the table shows all of them, since the best tile is a property of the GPU.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

import asgteach as at
from asgteach.backends import wgpu_backend, wgpu_device
from _gpu_timing import cuda_seconds, probe_buffer, time_dispatches  # bench/ is on sys.path when a script runs

TILES = ["128x128x8x8x8", "128x128x16x8x8", "128x128x32x8x8", "64x64x16x4x4", "128x64x16x8x4", "64x128x16x4x8",
         "128x256x16x8x16", "256x128x16x16x8", "128x128x16x8x16"]


def wgpu_seconds_per_matmul(plan: wgpu_backend.Plan, reps: tuple[int, int] = (3, 23)) -> float:
    """GPU time of one dispatch of the plan's matmul, by differencing two batch sizes."""
    g = plan.gpu
    (pipe, bg, groups), = [e for e, d in zip(plan._encoded, plan.dispatches) if d.node.op == "matmul"]
    probe = probe_buffer(g)
    src = plan.buffers[plan.outputs[0]]

    def batch(r: int) -> float:
        return time_dispatches(g, [(pipe, bg, groups)], r, src, probe)

    batch(2)  # warm up
    best = []
    for _ in range(3):
        lo, hi = batch(reps[0]), batch(reps[1])
        best.append((hi - lo) / (reps[1] - reps[0]))
    return float(np.median(best))


def torch_seconds_per_matmul(n: int, reps: int = 20) -> tuple[float, object]:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.rand(n, n, device="cuda", generator=gen) - 0.5
    b = torch.rand(n, n, device="cuda", generator=gen) - 0.5
    return cuda_seconds(lambda: a @ b, reps), (a, b, a @ b)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096])
    ap.add_argument("--tiles", nargs="+", default=TILES)
    ap.add_argument("--best-out", help="write the best tile at the largest size to this file")
    args = ap.parse_args()

    info = wgpu_device.describe()
    print(f"wgpu adapter: {info['adapter']} ({info['device_type']}, {info['backend_type']}), wgpu {info['wgpu']}")
    try:
        import torch

        have_torch = torch.cuda.is_available()
        if have_torch:
            print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}, TF32 off")
    except ImportError:
        have_torch = False
    print(f"{'n':>5} {'tile':>15} {'ms':>8} {'TFLOP/s':>8} {'max rel err':>11}")
    summary = []
    for n in args.sizes:
        flops = 2.0 * n**3
        if have_torch:
            t_torch, (ta, tb, tc) = torch_seconds_per_matmul(n)
            A, B, ref = ta.cpu().numpy(), tb.cpu().numpy(), tc.cpu().numpy()
        else:
            rng = np.random.default_rng(0)
            A, B = (rng.random((n, n), dtype=np.float32) - 0.5 for _ in range(2))
            ref = A.astype(np.float64) @ B
        results = []
        for tile in args.tiles:
            os.environ["ASGTEACH_WGPU_MATMUL_TILE"] = tile
            with at.Graph():
                a, b = at.input("a", (n, n)), at.input("b", (n, n))
                c = a @ b
                plan = wgpu_backend.compile(c.graph, [c.node_id])
            (out,) = plan.run({a: A, b: B})
            err = float(np.max(np.abs(out - ref)) / np.max(np.abs(ref)))
            if err > 1e-4:
                print(f"{n:>5} {tile:>15}  WRONG RESULT (max rel err {err:.2e}), skipped")
                continue
            t = wgpu_seconds_per_matmul(plan)
            results.append((t, tile))
            print(f"{n:>5} {tile:>15} {t * 1e3:8.3f} {flops / t / 1e12:8.2f} {err:11.2e}")
        t_best, tile_best = min(results)
        line = f"n={n}: wgpu best {tile_best} {flops / t_best / 1e12:.2f} TFLOP/s"
        if have_torch:
            line += (f"; cuBLAS SGEMM {flops / t_torch / 1e12:.2f} TFLOP/s ({t_torch * 1e3:.3f} ms); "
                     f"ratio {t_torch / t_best:.1%} of cuBLAS")
        summary.append(line)
        print(line)
    os.environ.pop("ASGTEACH_WGPU_MATMUL_TILE", None)
    if args.best_out:
        with open(args.best_out, "w") as f:
            f.write(tile_best)
    print("\nSUMMARY")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
