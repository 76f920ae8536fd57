"""One training step of a transformer-style block: asgteach on wgpu vs PyTorch CUDA eager vs asgteach on numpy.

    python bench/train_step_gpu.py [--batch 32 --seq 256 --d-model 512 --heads 8 --steps 20 --numpy-steps 2]

The block is built from registry ops only: layer_norm, matmul, causal softmax attention
(the mask is a constant used through ``where``), an exact-GELU MLP, residuals, an MSE
loss, ``at.grad`` for the backward graph, and the SGD update ``p - lr * g`` as graph
ops. On wgpu the updated parameters are bound back to the parameter buffers
(``wgpu_backend.resident_training(plan).bind_updates``), so a step uploads nothing (the batch is the same
array object every step), records every dispatch into one encoder, submits once, and reads back
only the loss — one host sync. The script prints those counts from ``plan.stats``.
``--profile`` times every dispatch alone; a fused elementwise chain shows as ``fused``
with its ops joined by ``+``.

PyTorch runs the same model (same initial weights, FP32, TF32 off) in eager mode with
autograd and an in-place SGD update; its per-step time is total/steps with a single
synchronisation at the end (its best case: no per-step sync, while ours includes one).
Losses of the first steps are compared across the three implementations.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

import asgteach as at
from asgteach.backends import wgpu_backend, wgpu_device
from _gpu_timing import probe_buffer, time_dispatches  # bench/ is on sys.path when a script runs
from asgteach.backends import numpy_backend


def init_params(d: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    def w(n_in: int, n_out: int) -> np.ndarray:
        return (rng.standard_normal((n_in, n_out)) / math.sqrt(n_in)).astype(np.float32)

    return {
        "ln1_w": np.ones(d, np.float32), "ln1_b": np.zeros(d, np.float32),
        "wq": w(d, d), "wk": w(d, d), "wv": w(d, d), "wo": w(d, d),
        "ln2_w": np.ones(d, np.float32), "ln2_b": np.zeros(d, np.float32),
        "w1": w(d, 4 * d), "b1": np.zeros(4 * d, np.float32), "w2": w(4 * d, d), "b2": np.zeros(d, np.float32),
    }


def build_graph(b: int, t: int, d: int, heads: int, lr: float, shapes: dict[str, tuple]):
    """The block, its loss, the gradients and the SGD update — all one ASG."""
    dh = d // heads
    with at.Graph("transformer step") as g:
        x, target = at.input("x", (b, t, d)), at.input("target", (b, t, d))
        p = {name: at.parameter(name, shape) for name, shape in shapes.items()}

        def split(z):   # (b, t, d) -> (b, heads, t, dh)
            return at.transpose(z.reshape(b, t, heads, dh), (0, 2, 1, 3))

        h = at.layer_norm(x, p["ln1_w"], p["ln1_b"])
        q, k, v = split(h @ p["wq"]), split(h @ p["wk"]), split(h @ p["wv"])
        scores = (q @ at.transpose(k, (0, 1, 3, 2))) * (1.0 / math.sqrt(dh))
        causal = at.constant(np.tril(np.ones((t, t))), name="causal mask")
        att = at.softmax(at.where(causal, scores, -1e9), axis=-1)
        o = at.transpose(att @ v, (0, 2, 1, 3)).reshape(b, t, d) @ p["wo"]
        x1 = x + o
        h2 = at.layer_norm(x1, p["ln2_w"], p["ln2_b"])
        y = x1 + (at.gelu(h2 @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"])
        loss = at.mean((y - target) ** 2)
        grads = at.grad(loss, list(p.values()))
        new = {name: p[name] - lr * gr for name, gr in zip(p, grads)}
    return g, x, target, p, loss, new


def torch_step_time(params: dict, X: np.ndarray, T: np.ndarray, heads: int, lr: float, steps: int):
    import torch
    import torch.nn.functional as F

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dev = "cuda"
    p = {k: torch.tensor(v, device=dev, requires_grad=True) for k, v in params.items()}
    x, tgt = torch.tensor(X, device=dev), torch.tensor(T, device=dev)
    b, t, d = X.shape
    dh = d // heads
    mask = torch.tril(torch.ones(t, t, device=dev, dtype=torch.bool))

    def step() -> torch.Tensor:
        h = F.layer_norm(x, (d,), p["ln1_w"], p["ln1_b"])

        def split(z):
            return z.reshape(b, t, heads, dh).transpose(1, 2)

        q, k, v = split(h @ p["wq"]), split(h @ p["wk"]), split(h @ p["wv"])
        s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(dh))
        att = torch.softmax(s.masked_fill(~mask, -1e9), dim=-1)
        o = (att @ v).transpose(1, 2).reshape(b, t, d) @ p["wo"]
        x1 = x + o
        h2 = F.layer_norm(x1, (d,), p["ln2_w"], p["ln2_b"])
        y = x1 + (F.gelu(h2 @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"])
        loss = ((y - tgt) ** 2).mean()
        for v_ in p.values():
            v_.grad = None
        loss.backward()
        with torch.no_grad():
            for v_ in p.values():
                v_ -= lr * v_.grad
        return loss

    losses = [float(step().item()) for _ in range(3)]   # warm-up, and the first losses to compare
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / steps, losses


def profile(plan: wgpu_backend.Plan, launched: list, reps: tuple[int, int] = (1, 11)) -> None:
    """GPU time of each dispatch alone (difference of two repetition counts), summed per op."""
    g = plan.gpu
    probe = probe_buffer(g)
    out = plan.buffers[plan.outputs[0]]

    def batch(k: int, r: int) -> float:
        return time_dispatches(g, [plan.encoded[k]], r, out, probe)

    rows = []
    for k, d in enumerate(plan.dispatches):
        batch(k, 1)
        t = min((batch(k, reps[1]) - batch(k, reps[0])) / (reps[1] - reps[0]) for _ in range(2))
        ins = ", ".join(str(plan.graph.nodes[i].shape) for i in d.node.inputs)
        op, variant = d.node.op, d.key[2]
        if d.key[0] == "fused":   # a chain of elementwise nodes in one kernel: name its ops, not the hash
            op, variant = "fused", variant.split(":")[0]
        rows.append((t, f"{op:<14} {d.entry:<14} {variant:<24} {ins} -> {d.node.shape}"))
    t0 = time.perf_counter()
    for _ in range(10):
        enc = g.device.create_command_encoder()
        cp = enc.begin_compute_pass()
        for pipe, bg, groups, *_ in launched:
            cp.set_pipeline(pipe)
            cp.set_bind_group(0, bg)
            cp.dispatch_workgroups(*groups)
        cp.end()
        enc.finish()
    enc_ms = (time.perf_counter() - t0) / 10 * 1e3

    def whole(r: int) -> float:
        return time_dispatches(g, launched, r, out, probe)

    whole(1)
    gpu_step = min((whole(4) - whole(1)) / 3 for _ in range(3))
    print(f"profile: GPU time of one whole step (all dispatches back to back, barriers included) "
          f"{gpu_step * 1e3:.2f} ms")
    total = sum(t for t, _ in rows)
    print(f"profile: sum of isolated dispatch times {total * 1e3:.2f} ms; recording one step in Python {enc_ms:.2f} ms")
    by_op: dict[str, float] = {}
    for t, what in rows:
        by_op[what.split()[0]] = by_op.get(what.split()[0], 0.0) + t
    print("  per op: " + ", ".join(f"{k} {v * 1e3:.2f}" for k, v in sorted(by_op.items(), key=lambda kv: -kv[1])))
    by_kind: dict[str, list[float]] = {}   # the same kernel on any shapes: how many, and their time together
    for t, what in rows:
        by_kind.setdefault(" ".join(what.split()[:3]), []).append(t)
    print("  per kernel (count, ms together, us each):")
    for kind, ts in sorted(by_kind.items(), key=lambda kv: -sum(kv[1])):
        print(f"    {len(ts):4d} {sum(ts) * 1e3:7.3f} {sum(ts) / len(ts) * 1e6:8.1f}  {kind}")
    for t, what in sorted(rows, reverse=True)[:25]:
        print(f"  {t * 1e3:7.3f} ms  {what}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--numpy-steps", type=int, default=2)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--profile", action="store_true", help="time every dispatch alone and list the slowest")
    args = ap.parse_args()
    b, t, d = args.batch, args.seq, args.d_model

    rng = np.random.default_rng(0)
    params = init_params(d, rng)
    X = rng.standard_normal((b, t, d)).astype(np.float32)
    T = rng.standard_normal((b, t, d)).astype(np.float32)
    X.setflags(write=False)   # a frozen batch: the plan trusts it is unchanged without comparing 2 x 16 MB
    T.setflags(write=False)
    g, x, target, p, loss, new = build_graph(b, t, d, args.heads, args.lr, {k: v.shape for k, v in params.items()})
    n_params = sum(v.size for v in params.values())
    print(f"block: batch {b}, seq {t}, d_model {d}, heads {args.heads}; {n_params / 1e6:.2f} M parameters; "
          f"graph of {len(g.nodes)} nodes")

    # --- wgpu -------------------------------------------------------------------------------
    info = wgpu_device.describe()
    print(f"wgpu adapter: {info['adapter']} ({info['device_type']}, {info['backend_type']})")
    outputs = [loss] + list(new.values())
    t0 = time.perf_counter()
    plan = wgpu_backend.compile(g, [o.node_id for o in outputs])
    print(f"wgpu compile: {time.perf_counter() - t0:.2f} s; {len(plan.dispatches)} dispatches per step; "
          f"{(plan.bytes_owned + plan.bytes_pooled) / 2**20:.0f} MiB of device buffers")
    step = wgpu_backend.resident_training(plan)   # parameters kept on the GPU between steps
    step.bind_updates({p[name]: new[name] for name in p})
    feeds = {x: X, target: T}
    first = step.run(feeds, params={p[k]: v for k, v in params.items()})
    wgpu_losses = [float(first[0])]
    print(f"wgpu first step (uploads everything): {plan.stats}")
    for _ in range(2):
        wgpu_losses.append(float(step.run(feeds)[0]))
    t0 = time.perf_counter()
    per_step = []
    for _ in range(args.steps):
        step.run(feeds)
        per_step.append(dict(plan.stats))
    t_wgpu = (time.perf_counter() - t0) / args.steps
    subs = sorted({s["submits"] for s in per_step})
    syncs = sorted({s["host_syncs"] for s in per_step})
    ups = sorted({s["uploads"] for s in per_step})
    print(f"wgpu: {t_wgpu * 1e3:.2f} ms/step; per step: submits {subs}, host syncs {syncs}, uploads {ups}; "
          f"first 3 losses {np.round(wgpu_losses, 5).tolist()}")

    if args.profile:
        profile(plan, step.recording.launched)

    # --- PyTorch CUDA eager --------------------------------------------------------------------
    t_torch = None
    try:
        import torch

        if torch.cuda.is_available():
            t_torch, torch_losses = torch_step_time(params, X, T, args.heads, args.lr, args.steps)
            print(f"torch CUDA eager ({torch.cuda.get_device_name(0)}): {t_torch * 1e3:.2f} ms/step")
            print(f"first 3 losses: torch {np.round(torch_losses, 5).tolist()}")
    except ImportError:
        print("torch not installed: no PyTorch comparison")

    # --- numpy backend ---------------------------------------------------------------------------
    ref = numpy_backend.compile(g, [o.node_id for o in outputs])
    cur = {p[k]: v for k, v in params.items()}
    np_losses, times = [], []
    for _ in range(args.numpy_steps):
        t0 = time.perf_counter()
        vals = ref.run(feeds, params=cur)
        times.append(time.perf_counter() - t0)
        np_losses.append(float(vals[0]))
        cur = {p[k]: v for k, v in zip(p, vals[1:])}
    t_np = float(np.mean(times))
    print(f"numpy backend: {t_np * 1e3:.1f} ms/step ({args.numpy_steps} steps); "
          f"first losses {np.round(np_losses, 5).tolist()}")

    print("\nSUMMARY")
    line = f"wgpu {t_wgpu * 1e3:.2f} ms/step (submits/step {subs}, host syncs/step {syncs}, uploads/step {ups})"
    if t_torch:
        line += f"; torch eager {t_torch * 1e3:.2f} ms/step; wgpu/torch = {t_wgpu / t_torch:.2f}x"
    line += f"; numpy {t_np * 1e3:.0f} ms/step ({t_np / t_wgpu:.0f}x wgpu)"
    print(line)


if __name__ == "__main__":
    main()
