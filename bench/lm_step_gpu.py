"""A GPT-style language-model training step through the PUBLIC API: asgteach on wgpu vs PyTorch CUDA eager
and torch.compile.

    python bench/lm_step_gpu.py                      # both sizes of issue 17
    python bench/lm_step_gpu.py --sizes base --steps 30
    python bench/lm_step_gpu.py --sizes base --seq 1024 --steps 10 --rounds 3   # a longer sequence
    python bench/lm_step_gpu.py --sizes base --attention fused   # the fused attention kernels at any size
    python bench/lm_step_gpu.py --sizes base --profile   # where the GPU time goes, per op

asgteach builds the model as a student would: ``nn.Embedding`` + ``nn.LearnedPositionalEmbedding``
+ ``nn.TransformerBlock`` x blocks + ``nn.LayerNorm`` + ``nn.Linear`` + ``nn.cross_entropy``, and
trains it with ``Trainer(loss, optimizer=optim.AdamW(...), backend="wgpu")`` - no bench-only
shortcut. ``Trainer.train_step`` returns the loss as a float, so every step ends with a host sync.

PyTorch runs the same-shaped model in eager mode: ``nn.Embedding``, a learned position table,
``nn.TransformerEncoderLayer(norm_first=True, activation="gelu", dropout=0)`` x blocks with a
causal mask, ``nn.LayerNorm``, ``nn.Linear``, cross-entropy, ``torch.optim.AdamW``; FP32, TF32 off,
``loss.item()`` every step (the same sync as ours). The same model also runs through
``torch.compile(model)`` (default mode; the optimizer step stays eager), compiled once before timing.

The three take turns: ``--rounds`` rounds of ``--steps`` steps each, asgteach, then PyTorch eager, then
compiled, so a GPU clock or a neighbour's load that drifts over the run hits all alike. Printed per size:
the median ms/step of each and the median of the rounds' ratios (asgteach / PyTorch: below 1 means faster),
compile time (constructing the Trainer: backward graph, optimizer graph, plan and pipelines),
a second Trainer on a fresh graph of the same shapes (what cached pipelines save), the
plan's dispatches, submits and host syncs per step, and memory: the bytes of the plan's buffers (all
of a step's values, parameters and optimizer state: the plan allocates them once), the same for the
plan compiled without the ``attention`` pass, and PyTorch's peak bytes allocated during one step.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import asgteach as at

SIZES = {
    "base": dict(blocks=4, d_model=512, heads=8, seq=256, batch=16, vocab=256),
    "wide": dict(blocks=4, d_model=1024, heads=16, seq=256, batch=16, vocab=256),
    "tiny": dict(blocks=1, d_model=32, heads=2, seq=16, batch=2, vocab=16),   # a smoke test (lavapipe)
}


def build(cfg: dict) -> tuple[at.Tensor, at.Tensor, at.Tensor, at.Graph]:
    """The model and its loss, in a graph of their own."""
    b, t, d = cfg["batch"], cfg["seq"], cfg["d_model"]
    with at.Graph("lm") as g:
        tokens = at.input("tokens", (b, t), dtype="int")
        targets = at.input("targets", (b, t), dtype="int")
        h = at.nn.LearnedPositionalEmbedding(t, d, name="pos")(at.nn.Embedding(cfg["vocab"], d, name="embed")(tokens))
        for i in range(cfg["blocks"]):
            h = at.nn.TransformerBlock(d, cfg["heads"], causal=True, name=f"block{i}")(h)
        logits = at.nn.Linear(d, cfg["vocab"], name="head")(at.nn.LayerNorm(d, name="ln_f")(h))
        loss = at.nn.cross_entropy(logits, targets)
    return tokens, targets, loss, g


def asgteach_setup(cfg: dict, batches: list[tuple[np.ndarray, np.ndarray]], warmup: int) -> tuple:
    """The Trainer (its compile timed, and a second one's), warmed up: (step function, facts).

    Opening the GPU (importing wgpu, choosing the adapter, creating the device) happens once per process,
    at the first GPU use, like creating a CUDA context; it is timed on its own (``open_s``), so
    ``compile_s`` is what constructing the Trainer costs once a notebook has used the GPU.
    """
    from asgteach.backends import wgpu_device

    t0 = time.perf_counter()
    wgpu_device.gpu()
    open_s = time.perf_counter() - t0
    tokens, targets, loss, g = build(cfg)
    t0 = time.perf_counter()
    tr = at.Trainer(loss, optimizer=at.optim.AdamW(lr=3e-4), backend="wgpu", seed=0)
    compile_s = time.perf_counter() - t0
    tokens2, targets2, loss2, _ = build(cfg)          # the same shapes again: what is reused
    t0 = time.perf_counter()
    at.Trainer(loss2, optimizer=at.optim.AdamW(lr=3e-4), backend="wgpu", seed=0)
    second_s = time.perf_counter() - t0

    def step(i: int) -> float:
        x, y = batches[i % len(batches)]
        return tr.train_step({tokens: x, targets: y})   # returns the loss as a float: a host sync

    losses = [step(i) for i in range(max(warmup, 3))]
    plan_bytes = tr.plan.bytes_owned + tr.plan.bytes_pooled
    without = None   # the same step's plan without the attention pass (the (T, T) tensors as graph nodes)
    try:
        from asgteach.backends import wgpu_backend
        from asgteach.backends.wgpu_passes import NAMES

        other = wgpu_backend.compile(tr.plan.graph, list(tr.plan.outputs), passes=set(NAMES) - {"attention"})
        without = other.bytes_owned + other.bytes_pooled
        del other
    except (ImportError, TypeError):   # a tree without pass selection
        pass
    except Exception as e:  # noqa: BLE001 - e.g. a (T, T) tensor over the GPU's buffer limits: say so
        without = f"fails: {type(e).__name__}: {str(e).splitlines()[0][:160]}"
    last = getattr(tr.plan, "stats", {})           # the last run's counts
    stats = {"dispatches": last.get("dispatches", 0), "submits": last.get("submits", 0),
             "syncs": last.get("host_syncs", 0), "uploads": last.get("uploads", 0)}
    return step, {"compile_s": compile_s, "second_s": second_s, "open_s": open_s, "nodes": len(g.nodes),
                  "losses": losses[:3], "stats": stats, "plan": tr.plan, "bytes": plan_bytes, "bytes_without": without,
                  "device": at.describe().get("wgpu", {}).get("adapter", "?")}


def torch_setup(cfg: dict, batches: list[tuple[np.ndarray, np.ndarray]], warmup: int, compiled: bool) -> tuple:
    """PyTorch's step, eager, and (``compiled``) the same model through ``torch.compile`` (default mode),
    compiled and warmed up here: (eager step, compiled step or None, facts)."""
    import torch
    from torch import nn

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dev = "cuda"
    t, d = cfg["seq"], cfg["d_model"]

    class LM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(cfg["vocab"], d)
            self.pos = nn.Parameter(torch.randn(t, d) * 0.02)
            self.blocks = nn.ModuleList([
                nn.TransformerEncoderLayer(d, cfg["heads"], 4 * d, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True) for _ in range(cfg["blocks"])])
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, cfg["vocab"])

        def forward(self, x: "torch.Tensor", mask: "torch.Tensor") -> "torch.Tensor":
            h = self.embed(x) + self.pos
            for blk in self.blocks:
                h = blk(h, src_mask=mask, is_causal=True)
            return self.head(self.ln_f(h))

    torch.manual_seed(0)
    model = LM().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    mask = nn.Transformer.generate_square_subsequent_mask(t, device=dev)
    data = [(torch.tensor(x, device=dev), torch.tensor(y, device=dev)) for x, y in batches]

    def make_step(fn):
        def step(i: int) -> float:
            x, y = data[i % len(data)]
            opt.zero_grad(set_to_none=True)
            logits = fn(x, mask)
            loss = nn.functional.cross_entropy(logits.reshape(-1, cfg["vocab"]), y.reshape(-1))
            loss.backward()
            opt.step()
            return loss.item()                          # a host sync every step, as Trainer.train_step
        return step

    def peak(step) -> int:
        """Bytes PyTorch had allocated at most during one step (parameters and optimizer state included)."""
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        step(0)
        torch.cuda.synchronize()
        return int(torch.cuda.max_memory_allocated())

    step = make_step(model)
    losses = [step(i) for i in range(max(warmup, 3))]
    facts = {"losses": losses[:3], "device": torch.cuda.get_device_name(), "torch": torch.__version__,
             "peak": peak(step)}
    cstep = None
    if compiled:
        t0 = time.perf_counter()
        cstep = make_step(torch.compile(model))
        for i in range(max(warmup, 3)):
            cstep(i)
        torch.cuda.synchronize()
        facts["compile_s"] = time.perf_counter() - t0
        facts["peak_compiled"] = peak(cstep)
    return step, cstep, facts


def timed(step, steps: int) -> float:
    """ms per step over ``steps`` steps (each ends with the loss read back)."""
    t0 = time.perf_counter()
    for i in range(steps):
        step(i)
    return (time.perf_counter() - t0) / steps * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="base,wide", help="comma-separated: " + ", ".join(SIZES))
    ap.add_argument("--seq", type=int, default=None, help="sequence length (default: each size's own)")
    ap.add_argument("--batch", type=int, default=None, help="batch size (default: each size's own)")
    ap.add_argument("--steps", type=int, default=20, help="steps per timed round")
    ap.add_argument("--rounds", type=int, default=5, help="rounds, asgteach and PyTorch taking turns")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--no-torch", action="store_true", help="asgteach only (no CUDA peer)")
    ap.add_argument("--no-compile", action="store_true", help="PyTorch eager only (no torch.compile column)")
    ap.add_argument("--attention", choices=("auto", "fused", "unfused"), default="auto",
                    help="the attention pass: its own size rule (auto), or fused / unfused at every size")
    ap.add_argument("--profile", action="store_true", help="time every dispatch alone and list the slowest")
    args = ap.parse_args()
    if args.attention != "auto":
        try:
            from asgteach.backends.wgpu_passes import attention
        except ImportError:   # a tree without the pass: attention is never fused there
            attention = None
        if attention is not None:
            attention.FUSE_FROM_BYTES = 0 if args.attention == "fused" else 2**62
    rows = []
    for name in args.sizes.split(","):
        cfg = dict(SIZES[name])
        cfg.update({k: v for k, v in (("seq", args.seq), ("batch", args.batch)) if v})
        rng = np.random.default_rng(0)
        batches = [(rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["seq"])),
                    rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["seq"]))) for _ in range(4)]
        step, ours = asgteach_setup(cfg, batches, args.warmup)
        peer_step, comp_step, peer = (None, None, None) if args.no_torch else \
            torch_setup(cfg, batches, args.warmup, not args.no_compile)
        # The three take turns, round after round, so a GPU clock or a neighbour's load that changes over
        # the run hits all alike; each ratio reported is the median of the rounds' own ratios.
        ms, peer_ms, comp_ms = [], [], []
        for _ in range(args.rounds):
            ms.append(timed(step, args.steps))
            if peer_step is not None:
                peer_ms.append(timed(peer_step, args.steps))
            if comp_step is not None:
                comp_ms.append(timed(comp_step, args.steps))
        ours["ms"] = float(np.median(ms))
        if peer is not None:
            peer["ms"] = float(np.median(peer_ms))
            ratios = [a / b for a, b in zip(ms, peer_ms)]
            ours["ratio"], ours["ratios"] = float(np.median(ratios)), ratios
        if comp_ms:
            peer["ms_compiled"] = float(np.median(comp_ms))
            cratios = [a / b for a, b in zip(ms, comp_ms)]
            ours["cratio"], ours["cratios"] = float(np.median(cratios)), cratios
        if args.profile:   # GPU time per dispatch, summed per op (train_step_gpu's profiler)
            from train_step_gpu import profile as profile_plan  # bench/ is on sys.path when a script runs

            profile_plan(ours["plan"])
        s = ours["stats"]
        print(f"[{name}] {cfg} attention {args.attention}")
        print(f"  asgteach wgpu ({ours['device']}): {ours['ms']:.2f} ms/step (median of {args.rounds} rounds of "
              f"{args.steps}: {', '.join(f'{v:.2f}' for v in ms)}); graph {ours['nodes']} nodes; "
              f"opening the GPU {ours['open_s']:.2f} s (once per process), then compile {ours['compile_s']:.2f} s, "
              f"second Trainer {ours['second_s']:.2f} s; per step: "
              + ", ".join(f"{k} {v:g}" for k, v in sorted(s.items())))
        print(f"  first losses asgteach {np.round(ours['losses'], 4).tolist()}")
        wo = ours["bytes_without"]
        print(f"  memory: the plan's buffers {ours['bytes'] / 2**20:.1f} MiB"
              + (f" (without the attention pass: {wo / 2**20:.1f} MiB)" if isinstance(wo, int) else
                 f" (without the attention pass: {wo})" if wo else ""))
        if peer:
            rounds = ", ".join(f"{v:.2f}" for v in peer_ms)
            print(f"  PyTorch eager ({peer['device']}): {peer['ms']:.2f} ms/step ({rounds}); "
                  f"first losses {np.round(peer['losses'], 4).tolist()}")
            print(f"  ratio asgteach / PyTorch per round: {', '.join(f'{r:.3f}' for r in ours['ratios'])}; "
                  f"median {ours['ratio']:.3f}x; PyTorch {peer['torch']}, peak {peer['peak'] / 2**20:.1f} MiB")
            if "cratios" in ours:
                print(f"  torch.compile: {peer['ms_compiled']:.2f} ms/step ({', '.join(f'{v:.2f}' for v in comp_ms)}); "
                      f"compiled in {peer['compile_s']:.1f} s; peak {peer['peak_compiled'] / 2**20:.1f} MiB; "
                      f"ratio asgteach / compiled per round: {', '.join(f'{r:.3f}' for r in ours['cratios'])}; "
                      f"median {ours['cratio']:.3f}x")
        rows.append((name, cfg, ours, peer))
    print("\n| size | asgteach wgpu ms/step | PyTorch eager ms/step | torch.compile ms/step | vs eager | "
          "vs compile | compile s | plan MiB (without attention pass) | PyTorch peak MiB eager / compiled |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, cfg, ours, peer in rows:
        pm = f"{peer['ms']:.2f}" if peer else "-"
        cm = f"{peer['ms_compiled']:.2f}" if peer and "ms_compiled" in peer else "-"
        ratio = f"{ours['ratio']:.3f}x" if peer else "-"
        cratio = f"{ours['cratio']:.3f}x" if "cratio" in ours else "-"
        wo = f" ({ours['bytes_without'] / 2**20:.0f})" if isinstance(ours["bytes_without"], int) else \
            " (fails)" if ours["bytes_without"] else ""
        tp = (f"{peer['peak'] / 2**20:.0f} / " + (f"{peer['peak_compiled'] / 2**20:.0f}" if "peak_compiled" in peer
                                                  else "-")) if peer else "-"
        print(f"| {name} (seq {cfg['seq']}, batch {cfg['batch']}) | {ours['ms']:.2f} | {pm} | {cm} | {ratio} | "
              f"{cratio} | {ours['compile_s']:.2f} | {ours['bytes'] / 2**20:.0f}{wo} | {tp} |")


if __name__ == "__main__":
    main()
