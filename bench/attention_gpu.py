"""The fused attention kernels alone on the GPU: one attention layer's forward and backward, fused vs unfused.

    python bench/attention_gpu.py                            # seq 256 and 1024, batch 16, d 512, 8 heads
    python bench/attention_gpu.py --seqs 512,2048 --batch 8

For each sequence length: ``nn.MultiHeadAttention(d, heads, causal=True)`` on x (B, T, d), the loss
sum(y * r) and its gradients w.r.t. x and every parameter (what a training step computes for one
layer), compiled twice on the wgpu backend: with the ``attention`` pass fusing it at any size, and
without the pass (the (T, T) scores as tensors, two tiled GEMMs and a softmax kernel each way). Both
plans run once on the same feeds (their results are compared), then:

* the GPU time of each whole plan: every dispatch back to back in one compute pass, repeated, the
  difference of two repetition counts (no upload, no readback: ``_gpu_timing``);
* each fused kernel alone, with its rate in TFLOP/s of useful work: the (T, T, dh) products it computes
  (the forward 2, dq 3, dkv 4) counted on the causal half of the scores, over its time.

The projections around attention are in both plans and take the same time; the difference of the two
totals is what the pass changes.

``--trusted`` (a measurement, not something the backend does): every shader module is created without
naga's runtime checks (bounds checks on every array index, and the counter that bounds every loop) through
wgpu-native's ``wgpuDeviceCreateShaderModuleTrusted``, which wgpu-py 0.32 does not wrap: it is called through
wgpu-py's cffi library here. Both plans are then compiled that way.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import asgteach as at
from asgteach.backends import wgpu_backend, wgpu_plan_cache
from asgteach.backends.wgpu_passes import NAMES, attention
from asgteach.nn.attention import MultiHeadAttention
from _gpu_timing import probe_buffer, time_dispatches  # bench/ is on sys.path when a script runs

#: (T, T, dh) products per fused kernel: the forward S and P V; dq S, dP and dS K; dkv S, dP, P^T dO and dS^T Q
#: (an older tree's separate dk and dv kernels: S, dP, dS^T Q and S, P^T dO)
PRODUCTS = {"attention_fwd": 2, "attention_dq": 3, "attention_dkv": 4, "attention_dk": 3, "attention_dv": 2}


def build(b: int, t: int, d: int, h: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    with at.Graph() as gr:
        x = at.input("x", (b, t, d))
        att = MultiHeadAttention(d, h, causal=True)
        y = att(x)
        r = at.input("r", (b, t, d))
        params = list(att.parameters())
        grads = at.grad(at.sum(y * r), [x] + params)
    feeds = {x: rng.standard_normal((b, t, d)).astype(np.float32), r: rng.standard_normal((b, t, d)).astype(np.float32)}
    for p in params:
        feeds[p] = (rng.standard_normal(p.shape) * (0.5 / np.sqrt(p.shape[0]))).astype(np.float32)
    return gr, [y] + grads, feeds


def launches(plan) -> list:
    """(pipeline, bind group, workgroups) of each of the plan's own launches (a plan's own run has no indirect
    ones: only a training layer's gate dispatches from arguments)."""
    return [(pipe, bg, groups) for pipe, bg, groups, _ in plan.own.launched]


def gpu_seconds(plan, launches, probe, reps: tuple[int, int] = (2, 12)) -> float:
    out = plan.buffers[plan.outputs[0]]
    g = plan.gpu
    time_dispatches(g, launches, 1, out, probe)
    return min((time_dispatches(g, launches, reps[1], out, probe) - time_dispatches(g, launches, reps[0], out, probe))
               / (reps[1] - reps[0]) for _ in range(3))


def trusted_modules() -> None:
    """Make the backend create its shader modules with no runtime checks (``--trusted``: see above)."""
    from asgteach.backends import wgpu_device
    from wgpu.backends.wgpu_native import _api
    from wgpu.backends.wgpu_native._ffi import ffi, lib

    def compile_trusted(self, source: str, entry: str):
        module = self.modules.get(source)
        if module is None:
            src = _api.new_struct_p("WGPUShaderSourceWGSL *", code=_api.to_c_string_view(source))
            src[0].chain.next = ffi.NULL
            src[0].chain.sType = lib.WGPUSType_ShaderSourceWGSL
            desc = _api.new_struct_p("WGPUShaderModuleDescriptor *", nextInChain=ffi.cast("WGPUChainedStruct *", src),
                                     label=_api.to_c_string_view(""))
            checks = 0   # WGPUShaderRuntimeChecks_None: neither BoundsChecks nor ForceLoopBounding
            mid = lib.wgpuDeviceCreateShaderModuleTrusted(self.device._internal, desc, checks)
            module = self.modules[source] = _api.GPUShaderModule("", mid, self.device)
        return self.device.create_compute_pipeline(
            layout=self.wgpu.AutoLayoutMode.auto, compute={"module": module, "entry_point": entry})

    wgpu_device.Gpu._compile = compile_trusted


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seqs", default="256,1024")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--trusted", action="store_true", help="shader modules without runtime checks (see above)")
    args = ap.parse_args()
    if args.trusted:
        trusted_modules()
    b, d, h = args.batch, args.d_model, args.heads
    dh = d // h
    print(f"device: {at.describe().get('wgpu', {}).get('adapter', '?')}; batch {b}, d {d}, {h} heads (dh {dh}), causal"
          + ("; shader modules without runtime checks (--trusted)" if args.trusted else ""))
    for t in (int(s) for s in args.seqs.split(",")):
        gr, outs, feeds = build(b, t, d, h)
        ids = [o.node_id for o in outs]
        wgpu_plan_cache.clear()
        attention.FUSE_FROM_BYTES = 0
        fused = wgpu_backend.compile(gr, ids)
        got = [a.copy() for a in fused.run(dict(feeds), on_nan="ignore")]
        probe = probe_buffer(fused.gpu)
        row = [f"seq {t}"]
        fused_s = gpu_seconds(fused, launches(fused), probe)
        kernels = []
        for k, disp in enumerate(fused.dispatches):
            if disp.entry in PRODUCTS:
                s = gpu_seconds(fused, [fused.encoded[k]], probe)
                flops = PRODUCTS[disp.entry] * 2 * b * h * (t * (t + 1) / 2) * dh
                kernels.append(f"{disp.entry} {s * 1e3:.3f} ms ({flops / s / 1e12:.1f} TFLOP/s)")
        try:
            unfused = wgpu_backend.compile(gr, ids, passes=[n for n in NAMES if n != "attention"])
            want = [a.copy() for a in unfused.run(dict(feeds), on_nan="ignore")]
            unfused_s = gpu_seconds(unfused, launches(unfused), probe_buffer(unfused.gpu))
            err = max(float(np.max(np.abs(a - w))) / max(1.0, float(np.max(np.abs(w)))) for a, w in zip(got, want))
            mem = (unfused.bytes_owned + unfused.bytes_pooled) / 2**20
            del unfused
            row.append(f"unfused {unfused_s * 1e3:.2f} ms ({mem:.0f} MiB)")
        except Exception as e:  # noqa: BLE001 - e.g. scores over the binding limit: say so
            unfused_s, err = None, None
            row.append(f"unfused fails: {type(e).__name__}: {str(e).splitlines()[0][:100]}")
        row.append(f"fused {fused_s * 1e3:.2f} ms ({(fused.bytes_owned + fused.bytes_pooled) / 2**20:.0f} MiB)")
        if unfused_s:
            row.append(f"fused / unfused {fused_s / unfused_s:.3f}; largest difference {err:.1e} "
                       "(over max(1, |largest|))")
        print("; ".join(row))
        print("   " + "; ".join(kernels))
        del fused
        sys.stdout.flush()


if __name__ == "__main__":
    main()
