"""Where an LM training step's GPU time goes, launch by launch: leave each kind of launch out and time the rest.

    python bench/launch_profile.py [--size base]

Builds the model of ``lm_step_gpu.py`` with a Trainer on wgpu, runs a few steps, then records the
plan's launches (``plan.launches``: what a run really records, batches included) back to back, once
and three times in one submit; the difference is the GPU time of one step. Then, for each kind of
launch (same kernel and variant), the same with those launches left out: the time saved is what
that kind costs in place, its barriers and ramp-up included. The results of such a step are wrong,
and that does not matter here. Small kernels measured alone (``--profile`` of ``lm_step_gpu.py``)
mostly show their launch; this shows what removing them would give.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import time
from typing import Any

import numpy as np

import asgteach as at
from asgteach.backends import wgpu_device
from lm_step_gpu import SIZES, build   # bench/ is on sys.path when a script runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="base", choices=sorted(SIZES))
    ap.add_argument("--top", type=int, default=30, help="kinds of launch to list")
    args = ap.parse_args()
    cfg = SIZES[args.size]
    g = wgpu_device.gpu()
    dev = g.device
    tokens, targets, loss, _ = build(cfg)
    tr = at.Trainer(loss, optimizer=at.optim.AdamW(lr=3e-4), backend="wgpu", seed=0)
    rng = np.random.default_rng(0)
    feeds = {tokens: rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["seq"])),
             targets: rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["seq"]))}
    for _ in range(5):
        tr.train_step(feeds)
    plan = tr.plan
    cmds = tr.resident.recording.launched   # what the Trainer's steps record (its layer over the plan)
    probe = dev.create_buffer(size=16, usage=g.wgpu.BufferUsage.MAP_READ | g.wgpu.BufferUsage.COPY_DST)
    src = plan.buffers[plan.outputs[0]]

    def seconds(launches: list[Any], reps: int) -> float:
        enc = dev.create_command_encoder()
        cp = enc.begin_compute_pass()
        for _ in range(reps):
            for pipe, bg, groups, *_ in launches:
                cp.set_pipeline(pipe)
                cp.set_bind_group(0, bg)
                cp.dispatch_workgroups(*groups)
        cp.end()
        enc.copy_buffer_to_buffer(src, 0, probe, 0, 16)
        commands = enc.finish()   # (recorded before the clock starts: only submit and GPU are timed)
        t0 = time.perf_counter()
        dev.queue.submit([commands])
        probe.map_sync(g.wgpu.MapMode.READ)
        probe.unmap()
        return time.perf_counter() - t0

    def step_time(launches: list[Any]) -> float:
        one = statistics.median(seconds(launches, 1) for _ in range(5))
        three = statistics.median(seconds(launches, 3) for _ in range(5))
        return (three - one) / 2

    whole = step_time(cmds)
    print(f"{args.size}: GPU time of one step, launches back to back: {whole * 1e3:.2f} ms, {len(cmds)} launches")
    kinds: dict[str, list[int]] = collections.defaultdict(list)
    for k, la in enumerate(plan.launches):
        d = la.dispatch
        if d.entry in ("fused_batch", "sum_batch"):
            name = f"{d.entry} (batches of {d.key[2].split(':')[0].split()[-1]})"
        elif d.key[0] == "fused":
            name = f"fused {d.key[2].split(':')[0][:48]}"
        else:
            name = f"{d.node.op} {d.entry} {d.key[2][:40]}"
        kinds[name].append(k)
    rows = []
    for name, ks in kinds.items():
        drop = set(ks)
        rows.append((whole - step_time([c for k, c in enumerate(cmds) if k not in drop]), len(ks), name))
    for saved, n, name in sorted(rows, reverse=True)[:args.top]:
        print(f"  {n:3d} x {name:<64s} {saved * 1e3:7.3f} ms  ({saved / n * 1e6:6.1f} us each)")


if __name__ == "__main__":
    main()
