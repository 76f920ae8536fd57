"""Matmul kernels on the shapes a training step really runs: every tile x every shape vs cuBLAS.

    python bench/gemm_shapes.py                        # the LM step's GEMM shapes + 2048 and 4096 squares
    python bench/gemm_shapes.py --tiles 128x128x16x8x8 128x128x16x8x8/db/w8 --shapes 16x256x512x512

A shape is ``BxMxNxK:XY`` where X and Y say whether A and B are read transposed in place (``N`` or
``T``), with a ``w`` after them when B is one matrix broadcast over the batch (a ``Linear``
layer's weight). The default list is one training step's GEMMs, each with its count per step,
and the sums at the end weigh each shape by that count (one step's GEMM time).
Each (tile, shape) pair is a one-matmul plan, checked against numpy (float64) before it is
timed by ``matmul_gpu.wgpu_matmul_timing``. The tile is forced through
``ASGTEACH_WGPU_MATMUL_TILE`` and the plan's automatic tile choice is timed too (``auto``).
cuBLAS (PyTorch, TF32 off) runs the same batched product with the same transposes and
broadcast. The table gives TFLOP/s; the last column is the best tile's share of cuBLAS.

How a time is taken (issue 37, item 5: an earlier version printed 237 TFLOP/s for a 1-GFLOP
shape on an H200, four times its float32 peak). The kernel is dispatched n times in one pass,
recorded before the clock starts; n grows until one batch lasts ``--target-ms`` (20 ms); the
figure is the difference of a batch of n and one of n/4 over 3n/4 calls (median of
``--pairs``). Every row also shows the plain time of the long batch per call over that figure
(``1-batch``: 1.00 when the fixed cost of a submission is nothing against the batch; a row
outside 0.90-1.10 is marked ``!``) and, where the device offers ``timestamp-query``, the GPU's
own clock at the pass's start and end per call over that figure (``gpu-ts``). cuBLAS is timed
the same way, each batch one CUDA graph of n products between two CUDA events (launched one
by one from Python, a small product's launch takes about as long as the product, and the
events would time Python). No rate above the device's float32 peak is printed: such a rate is
replaced by ``>peak`` and a line says the timing was below resolution. The peak is ``--peak``
if given, else ``_gpu_timing.FP32_PEAK_TFLOPS`` by device name, else SMs x FP32 lanes x the
highest SM clock (PyTorch and nvidia-smi); with none known, rates are printed unchecked and
the header says so.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

import asgteach as at
from asgteach.backends import wgpu_backend, wgpu_device
from asgteach.backends.wgpu_matmul import Tile
from _gpu_timing import (  # bench/ is on sys.path when a script runs
    Timing, computed_peak_tflops, cuda_measure, enable_timestamps, max_sm_clock_mhz, shown_rate, table_peak_tflops)
from matmul_gpu import wgpu_matmul_timing

#: a figure stands when its long batch's plain time per call is within this of it (issue 37's done-when: 10 %)
AGREE = 0.10

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


def ours(spec: str, tile: str, a: np.ndarray, b: np.ndarray, ref: np.ndarray, limit: int,
         target_s: float, pairs: int) -> tuple[Timing | None, str]:
    nb, m, n, k, ta, tb, w = parse(spec)
    if tile == "auto":
        os.environ.pop("ASGTEACH_WGPU_MATMUL_TILE", None)
    else:
        t = Tile.parse(tile)
        if t.bk * (t.bm + t.bn) * 4 > limit:
            return None, "too much shared memory"
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
        return None, f"WRONG (err {err:.1e})"
    return wgpu_matmul_timing(plan, target_s, pairs), used[0]


def cublas(a: np.ndarray, b: np.ndarray, ta: bool, tb: bool, target_s: float, pairs: int) -> Timing:
    import torch

    ta_, tb_ = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    return cuda_measure(lambda: product(ta_, tb_, ta, tb), target_s, pairs)


def device_peak(adapter_name: str, have_torch: bool, given: float | None) -> tuple[float | None, str]:
    """(float32 peak in TFLOP/s, where it came from): ``--peak``, else the datasheet table by name (the CUDA
    name first, then the adapter's), else SMs x lanes x the highest clock; the computed figure is shown beside
    a listed one."""
    names = [adapter_name]
    computed, computed_how = None, ""
    if have_torch:
        import torch

        prop = torch.cuda.get_device_properties(0)
        names.insert(0, prop.name)
        mhz = max_sm_clock_mhz(0)
        if mhz:
            computed = computed_peak_tflops(prop.multi_processor_count, (prop.major, prop.minor), mhz)
            if computed is not None:
                computed_how = (f"{prop.multi_processor_count} SMs x FP32 lanes of sm_{prop.major}{prop.minor} x 2 "
                                f"x {mhz:.0f} MHz = {computed:.1f}")
    if given is not None:
        return given, "--peak"
    for name in names:
        listed = table_peak_tflops(name)
        if listed is not None:
            how = f"datasheet figure for {name!r} (_gpu_timing.FP32_PEAK_TFLOPS)"
            return listed, how + (f"; computed: {computed_how}" if computed is not None else "")
    if computed is not None:
        return computed, f"computed: {computed_how}"
    return None, f"unknown for {names[0]!r}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", nargs="+", default=[*LM_SHAPES, *SQUARES])
    ap.add_argument("--tiles", nargs="+", default=TILES)
    ap.add_argument("--target-ms", type=float, default=20.0, help="one long batch lasts at least this (default 20)")
    ap.add_argument("--pairs", type=int, default=5, help="short/long batch pairs per figure (median; default 5)")
    ap.add_argument("--peak", type=float, help="the device's float32 peak in TFLOP/s, when the table lacks it")
    ap.add_argument("--no-timestamps", action="store_true", help="do not ask the device for timestamp-query")
    args = ap.parse_args()
    target_s = args.target_ms / 1e3
    if not args.no_timestamps:
        enable_timestamps()
    info = wgpu_device.describe()
    g = wgpu_device.gpu()
    limit = int(g.limits["max-compute-workgroup-storage-size"])
    stamps = "timestamp-query" in g.device.features
    print(f"wgpu adapter: {info['adapter']} ({info['backend_type']}), workgroup storage {limit} bytes, "
          f"GPU timestamps {'on' if stamps else 'off'}")
    try:
        import torch

        have_torch = torch.cuda.is_available()
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
    except ImportError:
        have_torch = False
    peak, peak_how = device_peak(info["adapter"], have_torch, args.peak)
    if peak is None:
        print(f"float32 peak: {peak_how}: rates are printed UNCHECKED (pass --peak TFLOPS)")
    else:
        print(f"float32 peak: {peak:.3g} TFLOP/s ({peak_how}); a rate above it is not printed")
    print(f"timing: one kernel n times per pass, recorded first; n grows until a batch lasts {args.target_ms:g} ms; "
          f"figure = (t(n) - t(n/4)) / (3n/4), median of {args.pairs}; 1-batch = t(n)/n over the figure"
          + ("; gpu-ts = the GPU's clock over the pass / n over the figure" if stamps else ""))
    total = {t: 0.0 for t in args.tiles}
    total_best = total_cublas = 0.0
    refused: list[str] = []
    agreement: list[tuple[float, str]] = []
    cublas_best = 0.0
    for spec in args.shapes:
        count = {**LM_SHAPES, **SQUARES}.get(spec, 1)
        nb, m, n, k, ta, tb, w = parse(spec)
        flops = 2.0 * nb * m * n * k
        a, b = operands(nb, m, n, k, ta, tb, w)
        ref = product(a.astype(np.float64), b.astype(np.float64), ta, tb)
        cu = None
        if have_torch:
            try:
                cu = cublas(a, b, ta, tb, target_s, args.pairs)
            except Exception as e:   # a product that a CUDA graph cannot capture: say so, keep our side
                print(f"{spec:>22}: cuBLAS not timed ({type(e).__name__}: {e})", flush=True)
        t_cu = cu.seconds if cu is not None else float("nan")
        cu_shown, cu_refused = shown_rate(flops, t_cu, peak)
        if cu_refused:
            refused.append(f"{spec} cuBLAS")
            t_cu = float("nan")
        elif t_cu == t_cu:
            cublas_best = max(cublas_best, flops / t_cu / 1e12)
        total_cublas += count * t_cu
        row = []
        for tile in args.tiles:
            timing, used = ours(spec, tile, a, b, ref, limit, target_s, args.pairs)
            t = timing.seconds if timing is not None else float("nan")
            shown, bad = shown_rate(flops, t, peak)
            extra = ""
            if timing is not None:
                agree = timing.agreement
                agreement.append((agree, f"{spec} {tile}"))
                flag = "!" if abs(agree - 1) > AGREE else " "
                extra = f"  1-batch {agree:5.3f}{flag}"
                if timing.gpu is not None:
                    extra += f"  gpu-ts {timing.gpu / t:5.3f}"
                extra += f"  n={timing.reps}"
            if bad:
                refused.append(f"{spec} {tile}")
                claim = f"would be {flops / t / 1e12:.3g} TFLOP/s, above the peak" if t > 0 else "is no time at all"
                print(f"  {spec:>22} {tile:>22} {shown} TFLOP/s  ({used}): {t * 1e6:.2f} us per call {claim}: "
                      f"the timing was below resolution", flush=True)
                t = float("nan")
            else:
                print(f"  {spec:>22} {tile:>22} {shown} TFLOP/s  {t * 1e3:7.4f} ms{extra}  ({used})", flush=True)
            total[tile] += count * t
            row.append((t, tile, used))
        best = min((r for r in row if r[0] == r[0]), default=(float("nan"), "-", "-"))
        total_best += count * best[0]
        share = f"{t_cu / best[0]:.1%}" if t_cu == t_cu and best[0] == best[0] else "-"
        print(f"{spec:>22}: best {best[1]} {shown_rate(flops, best[0], peak)[0].strip()} TFLOP/s; cuBLAS "
              f"{cu_shown.strip()} TFLOP/s" + (f" (1-batch {cu.agreement:.3f})" if cu is not None else "")
              + f"; best/cuBLAS {share}", flush=True)
    os.environ.pop("ASGTEACH_WGPU_MATMUL_TILE", None)
    print("\nSUM over the shapes, each times its count per step, ms:")
    for tile, t in total.items():
        print(f"  {tile:>22} {t * 1e3:8.3f}")
    print(f"  {'best per shape':>22} {total_best * 1e3:8.3f}\n  {'cuBLAS':>22} {total_cublas * 1e3:8.3f}")
    if agreement:
        lo, hi = min(agreement), max(agreement)
        off = [name for v, name in agreement if abs(v - 1) > AGREE]
        print(f"\n1-batch / figure over {len(agreement)} timings: {lo[0]:.3f} ({lo[1]}) .. {hi[0]:.3f} ({hi[1]}); "
              f"outside {1 - AGREE:.2f}-{1 + AGREE:.2f}: {len(off)}" + (f" ({', '.join(off)})" if off else ""))
    if have_torch and peak is not None:
        print(f"cuBLAS's best rate in this run: {cublas_best:.2f} TFLOP/s (what the chip reaches at least; peak "
              f"{peak:.3g})")
    if refused:
        print(f"REFUSED {len(refused)} rate(s) above the float32 peak (timing below resolution; left out of the "
              f"sums, which then print nan): {', '.join(refused)}")
    else:
        print("no rate above the float32 peak" + ("" if peak is not None else " checked (peak unknown)"))


if __name__ == "__main__":
    main()
