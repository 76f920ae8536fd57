"""f32 matmul through the wgpu backend vs PyTorch's cuBLAS SGEMM, on the same GPU, same run.

    python bench/matmul_gpu.py [--sizes 1024 2048 4096] [--layouts nn,nt,tn] [--rounds 3]
                               [--tiles 128x128x8x8x8 64x64x8x4x4 ...]

What is timed: the matmul kernel of a compiled asgteach Plan, dispatched R times in ONE
command encoder / ONE submit (recorded before the clock starts), then one tiny buffer map
to wait for the GPU. R is grown until one batch lasts 20 ms; a batch of R/4 and one of R
are run and the difference is divided by the difference of R, so the fixed costs (submit,
map) cancel and what remains is GPU time per matmul (``wgpu_matmul_timing``).
PyTorch is timed with CUDA events over the same number of products, TF32 OFF (plain
FP32 SGEMM, the same arithmetic as ours). Every configuration's result is checked
against PyTorch's before it is timed.

Layouts (``--layouts``, default ``nn``): ``nn`` is ``a @ b``; ``nt`` is ``a @ b.T`` and ``tn``
``a.T @ b``, written as a matmul of a transposed view, as a training step's gradients are
(dX = dY W^T, dW = X^T dY). The plan's ``transposes`` pass folds the transpose into the
matmul's strides: ONE kernel (variant ``...:NT`` / ``...:TN``) reads the stored operand in
place, and that kernel is what is timed (the script checks that the plan has no other
dispatch). Before timing, it also compiles a Linear layer's training step at each size and
checks that its dX and dW products run the very kernels timed here. cuBLAS runs the same
layouts (``a @ b.T``, ``a.T @ b``: transposed operands, no copies).

Rounds (``--rounds``): ours and cuBLAS take turns, every layout and tile once per round;
each row's ratio is the MEDIAN of the per-round ratios (cuBLAS time / ours, so 100 % = as
fast as cuBLAS), and its time the median of the rounds.

Tile sizes (BMxBNxBKxTMxTN, options after ``-``: see ``asgteach/backends/wgpu_matmul.py``)
are swept at every size; the best per size and layout is reported, and the table shows all
of them, since the best tile is a property of the GPU.
"""

from __future__ import annotations

import argparse
import os
import statistics

import numpy as np

import asgteach as at
from asgteach.backends import wgpu_backend, wgpu_device
from asgteach.backends.wgpu_matmul import tile_from_env
from _gpu_timing import KernelClock, Timing, cuda_seconds, measure  # bench/ is on sys.path when a script runs

TILES = ["128x128x16x8x8", "128x128x8x8x8", "128x128x32x8x8", "128x64x16x8x4", "64x128x16x4x8",
         "256x128x16x16x8"]
LAYOUTS = ("nn", "nt", "tn")


def wgpu_matmul_timing(plan: wgpu_backend.Plan, target_s: float = 0.02, pairs: int = 3) -> Timing:
    """GPU time of one dispatch of the plan's matmul (``_gpu_timing.measure``): the dispatch repeated in one
    pass recorded before the clock starts, the long batch lasting ``target_s``; the difference of a long and a
    short batch per call, the long batch's plain time per call, and the GPU's timestamps where the device has
    ``timestamp-query`` (``_gpu_timing.enable_timestamps`` before the first plan)."""
    encoded = plan.encoded if hasattr(plan, "encoded") else plan._encoded   # (pipeline, bind group, groups) each
    (dispatch,) = [e for e, d in zip(encoded, plan.dispatches) if d.node.op == "matmul"]
    clock = KernelClock(plan.gpu, dispatch, plan.buffers[plan.outputs[0]])
    clock(2)  # warm up
    return measure(clock, target_s, pairs, gpu_of_last=clock.gpu_of_last)


def wgpu_seconds_per_matmul(plan: wgpu_backend.Plan, target_s: float = 0.02, pairs: int = 3) -> float:
    """Seconds per dispatch of the plan's matmul: ``wgpu_matmul_timing``'s difference of two batches."""
    return wgpu_matmul_timing(plan, target_s, pairs).seconds


def _swap(t):
    return at.ops.transpose(t, (1, 0))


def layout_plan(layout: str, n: int) -> tuple[wgpu_backend.Plan, object, object]:
    """One n x n product in ``layout`` as a training step writes it; (plan, input a, input b)."""
    with at.Graph():
        a, b = at.input("a", (n, n)), at.input("b", (n, n))
        c = (_swap(a) if layout[0] == "t" else a) @ (_swap(b) if layout[1] == "t" else b)
        plan = wgpu_backend.compile(c.graph, [c.node_id])
    return plan, a, b


def kernel_of(plan: wgpu_backend.Plan) -> str:
    """The variant of the plan's one matmul kernel (e.g. ``128x128x16x8x8:fast:NT``); refuses other kernels."""
    keys = [d.key[2] for d in plan.dispatches]
    assert len(keys) == 1 and plan.dispatches[0].entry == "matmul", f"expected one matmul kernel, got {keys}"
    return keys[0]


def training_step_kernels(n: int) -> list[str]:
    """The GEMM kernels of a Linear(n, n) layer's training step on an (n, n) input: the forward
    product (with its bias epilogue), dX = dY W^T and dW = X^T dY. Compiled, not run."""
    with at.Graph() as g:
        x = at.input("x", (n, n))
        y = at.nn.Linear(n, n, name="lin")(x)
        loss = at.mean(y * y)
        params = [p for p in g.nodes if p.op == "parameter"]
        grads = at.grad(loss, [at.Tensor(g, p.id) for p in params] + [x])
        plan = wgpu_backend.compile(g, [t.node_id for t in [loss, *grads]])
    return [d.key[2] for d in plan.dispatches if d.entry == "matmul"]


def torch_operands(n: int):
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.rand(n, n, device="cuda", generator=gen) - 0.5
    b = torch.rand(n, n, device="cuda", generator=gen) - 0.5
    return a, b


def torch_product(layout: str, a, b):
    """cuBLAS on the same layout: ``.T`` is a view, so cuBLAS gets a transposed operand (no copy)."""
    return lambda: (a.T if layout[0] == "t" else a) @ (b.T if layout[1] == "t" else b)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096])
    ap.add_argument("--tiles", nargs="+", default=TILES)
    ap.add_argument("--layouts", default="nn", help="comma-separated, of nn, nt, tn (default nn)")
    ap.add_argument("--rounds", type=int, default=3, help="ours and cuBLAS take turns this many times")
    ap.add_argument("--best-out", help="write the best NN tile at the largest size to this file")
    args = ap.parse_args()
    layouts = [v.strip().lower() for v in args.layouts.split(",") if v.strip()]
    bad = [v for v in layouts if v not in LAYOUTS]
    if bad:
        ap.error(f"--layouts: {bad} not among {LAYOUTS}")

    info = wgpu_device.describe()
    print(f"wgpu adapter: {info['adapter']} ({info['device_type']}, {info['backend_type']}), wgpu {info['wgpu']}")
    try:
        import torch

        have_torch = torch.cuda.is_available()
        if have_torch:
            print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}, TF32 off")
    except ImportError:
        have_torch = False
    summary = []
    tile_best = None
    for n in args.sizes:
        flops = 2.0 * n**3
        if have_torch:
            ta, tb = torch_operands(n)
            A, B = ta.cpu().numpy(), tb.cpu().numpy()
        else:
            rng = np.random.default_rng(0)
            A, B = (rng.random((n, n), dtype=np.float32) - 0.5 for _ in range(2))
        # compile and check every (layout, tile) first; then time them in rounds
        plans: dict[tuple[str, str], tuple[wgpu_backend.Plan, str, float]] = {}
        for tile in args.tiles:
            os.environ["ASGTEACH_WGPU_MATMUL_TILE"] = tile
            try:
                tile_from_env()
            except ValueError as e:   # e.g. two stages of a large tile: more shared memory than allowed
                print(f"{n:>5} {tile:>22}  {e}: skipped")
                continue
            if any(v != "nn" for v in layouts):
                step = training_step_kernels(n)
            for layout in layouts:
                if have_torch:
                    ref = torch_product(layout, ta, tb)().cpu().numpy()
                else:
                    ref = (A.T if layout[0] == "t" else A).astype(np.float64) @ (B.T if layout[1] == "t" else B)
                plan, a, b = layout_plan(layout, n)
                kernel = kernel_of(plan)
                if layout != "nn":   # dX = dY W^T is NT, dW = X^T dY is TN: the step runs this very kernel
                    assert kernel in step, f"n={n} {layout}: timed {kernel}, the training step runs {step}"
                (out,) = plan.run({a: A, b: B})
                err = float(np.max(np.abs(out - ref)) / np.max(np.abs(ref)))
                if err > 1e-4:
                    print(f"{n:>5} {layout:>3} {tile:>22}  WRONG RESULT (max rel err {err:.2e}), skipped")
                    continue
                plans[(layout, tile)] = (plan, kernel, err)
        os.environ.pop("ASGTEACH_WGPU_MATMUL_TILE", None)
        ours: dict[tuple[str, str], list[float]] = {k: [] for k in plans}
        theirs: dict[str, list[float]] = {v: [] for v in layouts}
        ratios: dict[tuple[str, str], list[float]] = {k: [] for k in plans}
        for _ in range(args.rounds):
            for layout in layouts:
                if have_torch:
                    theirs[layout].append(cuda_seconds(torch_product(layout, ta, tb), 20))
                for tile in args.tiles:
                    if (layout, tile) in plans:
                        t = wgpu_seconds_per_matmul(plans[(layout, tile)][0], pairs=2)
                        ours[(layout, tile)].append(t)
                        if have_torch:
                            ratios[(layout, tile)].append(theirs[layout][-1] / t)
        print(f"\n{'n':>5} {'lay':>3} {'tile':>22} {'kernel':>30} {'ms':>8} {'TFLOP/s':>8} {'of cuBLAS':>9} "
              f"{'vs NN':>6} {'max rel err':>11}")
        best: dict[str, tuple[float, str]] = {}
        for (layout, tile), (plan, kernel, err) in plans.items():
            t = statistics.median(ours[(layout, tile)])
            share = f"{statistics.median(ratios[(layout, tile)]):9.1%}" if have_torch else f"{'':>9}"
            # this layout's time over NN's with the same tile (1.05: 5 % slower than NN)
            nn = ("nn", tile)
            vs_nn = f"{t / statistics.median(ours[nn]):6.3f}" if nn in ours and layout != "nn" else f"{'':>6}"
            print(f"{n:>5} {layout:>3} {tile:>22} {kernel:>30} {t * 1e3:8.3f} {flops / t / 1e12:8.2f} {share} "
                  f"{vs_nn} {err:11.2e}")
            if layout not in best or t < best[layout][0]:
                best[layout] = (t, tile)
        for layout in layouts:
            if layout not in best:
                continue
            t_best, tile = best[layout]
            line = f"n={n} {layout.upper()}: wgpu best {tile} {flops / t_best / 1e12:.2f} TFLOP/s"
            if have_torch:
                t_torch = statistics.median(theirs[layout])
                line += (f"; cuBLAS SGEMM {flops / t_torch / 1e12:.2f} TFLOP/s ({t_torch * 1e3:.3f} ms); "
                         f"ratio {statistics.median(ratios[(layout, tile)]):.1%} of cuBLAS "
                         f"(median of {args.rounds} rounds)")
            if layout != "nn" and "nn" in best:
                line += f"; time {t_best / best['nn'][0]:.3f}x NN's best"
            summary.append(line)
            print(line)
        if "nn" in best:
            tile_best = best["nn"][1]
    if args.best_out and tile_best:
        with open(args.best_out, "w") as f:
            f.write(tile_best)
    print("\nSUMMARY")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
