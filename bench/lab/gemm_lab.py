"""Times the CUDA transcriptions of the wgpu GEMM (gemm_lab.cu) against cuBLAS, with nvcc's register report.

    python3 bench/lab/gemm_lab.py [--sizes 2048 4096] [--kernels v0 db ...] [--out DIR]

Needs a CUDA machine with nvcc, cuobjdump and PyTorch (the device machine of bench/README.md); not a test
and not part of the package. It compiles gemm_lab.cu once for sm_90
(``nvcc -cubin -Xptxas -v``: registers, spills and shared bytes per kernel), loads the cubin through CuPy,
checks every kernel's product against cuBLAS's, and times them with CUDA events, cuBLAS (TF32 off) taking
turns with each kernel. The cubin and the SASS of every kernel (``cuobjdump -sass``) go to ``--out``.

Why a CUDA copy: the WGSL kernel reaches 85-87 % of cuBLAS and every variant tried through WGSL was slower.
The CUDA copy says whether the algorithm or the way to the GPU (WGSL -> naga -> SPIR-V -> driver) loses the
rest: nvcc's report and the SASS are what WebGPU does not show.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))   # bench/: the shared timing helper

from _gpu_timing import cuda_seconds  # noqa: E402

KERNELS = ["v0", "v0_minb2", "db", "db_minb2", "db8", "db8_minb2", "v0_bk32", "np", "np_minb2", "w8x16", "t16x8",
           "s64", "m128x64", "ca3_8", "ca3_16", "ca4_8", "ca2_16", "ca3_8_minb1"]
#: (BM, BN, threads along N, threads along M) where a kernel's tile is not 128 x 128 with 8 x 8 per thread
SHAPE = {"w8x16": (128, 256, 16, 16), "t16x8": (256, 128, 16, 16), "s64": (64, 64, 16, 16), "m128x64": (128, 64, 8, 16)}


def build(out: Path) -> tuple[Path, str]:
    cubin = out / "gemm_lab.cubin"
    nvcc = os.environ.get("NVCC", "nvcc")
    cmd = [nvcc, "-arch=sm_90", "-O3", "-cubin", "-Xptxas", "-v", "-o", str(cubin), str(HERE / "gemm_lab.cu")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(r.stdout + r.stderr)
    return cubin, r.stdout + r.stderr


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2048, 4096])
    ap.add_argument("--kernels", nargs="+", default=KERNELS)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="/tmp/gemm_lab")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cubin, report = build(out)
    print("nvcc -Xptxas -v:")
    for line in report.splitlines():
        if "registers" in line or "spill" in line or "Compiling entry" in line:
            print("   ", line.strip())
    sass = subprocess.run(["cuobjdump", "-sass", str(cubin)], capture_output=True, text=True).stdout
    (out / "gemm_lab.sass").write_text(sass)

    import cupy
    import numpy as np
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    module = cupy.RawModule(path=str(cubin))
    funcs = {k: module.get_function(k) for k in args.kernels}
    for k, f in funcs.items():
        print(f"    {k}: {f.num_regs} registers, {f.local_size_bytes} local bytes, {f.shared_size_bytes} shared bytes")
    print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, cupy {cupy.__version__}, TF32 off")
    for n in args.sizes:
        gen = torch.Generator(device="cuda").manual_seed(0)
        a = torch.rand(n, n, device="cuda", generator=gen) - 0.5
        b = torch.rand(n, n, device="cuda", generator=gen) - 0.5
        c = torch.empty(n, n, device="cuda")
        ref = a @ b
        ca, cb, cc = (cupy.asarray(t) for t in (a, b, c))   # the same memory, seen by cupy

        def launcher(k):
            bm, bn, tx, ty = SHAPE.get(k, (128, 128, 16, 16))
            f = funcs[k]

            def go():
                f((n // bn, n // bm, 1), (tx, ty, 1), (ca, cb, cc, np.int32(n), np.int32(n), np.int32(n)))
            return go

        runs = {k: launcher(k) for k in args.kernels}
        for k, go in runs.items():
            c.zero_()
            go()
            torch.cuda.synchronize()
            err = float((c - ref).abs().max() / ref.abs().max())
            if err > 1e-4:
                print(f"{n} {k}: WRONG (max rel err {err:.2e})")
                return 1
        mine = {k: [] for k in runs}
        ratio = {k: [] for k in runs}
        for _ in range(args.rounds):
            for k, go in runs.items():
                tb = cuda_seconds(lambda: torch.mm(a, b, out=c))
                tk = cuda_seconds(go)
                mine[k].append(tk)
                ratio[k].append(tb / tk)
        flops = 2.0 * n ** 3
        for k in runs:
            t = statistics.median(mine[k])
            print(f"{n:>5} {k:>10} {t * 1e3:8.3f} ms {flops / t / 1e12:7.2f} TFLOP/s "
                  f"{statistics.median(ratio[k]):7.1%} of cuBLAS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
