"""What the GPU waits for between two LM training steps: the host's part of ``train_step``, piece by piece.

    python bench/host_timeline.py [--size base] [--steps 40]

A run records its commands ahead (while the GPU works on the previous run), so the GPU idles only
between the moment the loss of step n can be read and the submit of step n + 1: reading back (map,
copy, unmap), returning through the Trainer, and the next step's feeds (id checks, uploads) and
submit. This wraps the Plan's methods with timers and prints the median of each piece; "map wait"
is the GPU's own time not hidden behind recording the next run.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import time
from typing import Any

import numpy as np

import asgteach as at
from asgteach.backends import wgpu_backend
from lm_step_gpu import SIZES, build   # bench/ is on sys.path when a script runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="base", choices=sorted(SIZES))
    ap.add_argument("--steps", type=int, default=40)
    args = ap.parse_args()
    cfg = SIZES[args.size]
    tokens, targets, loss, _ = build(cfg)
    tr = at.Trainer(loss, optimizer=at.optim.AdamW(lr=3e-4), backend="wgpu", seed=0)
    rng = np.random.default_rng(0)
    batches = [{tokens: rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["seq"])),
                targets: rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["seq"]))} for _ in range(4)]
    plan = tr.plan
    at_: dict[str, float] = {}

    def wrap(owner: Any, name: str, label: str) -> None:
        inner = getattr(owner, name)

        def timed(*a: Any, **k: Any) -> Any:
            at_[label + ">"] = time.perf_counter()
            try:
                return inner(*a, **k)
            finally:
                at_[label + "<"] = time.perf_counter()
        setattr(owner, name, timed)

    for name in ("run", "_record", "_upload", "_check_ids", "_copy_outputs"):
        wrap(plan, name, name)
    wrap(wgpu_backend, "map_for_reading", "map")
    for k in range(5):
        tr.train_step(batches[k % 4])
    pieces: dict[str, list[float]] = collections.defaultdict(list)
    end = None
    for k in range(args.steps):
        t0 = time.perf_counter()
        tr.train_step(batches[k % 4])
        t1 = time.perf_counter()
        a = at_
        for label, span in (("between two train_step calls", (t0 - end) if end is not None else None),
                            ("Trainer, then run() up to the id checks", a["_check_ids>"] - t0),
                            ("id checks", a["_check_ids<"] - a["_check_ids>"]),
                            ("uploads of the feeds", a["_upload<"] - a["_upload>"]),
                            ("then the submit", a["_record>"] - a["_upload<"]),
                            ("recording the next run (GPU busy)", a["_record<"] - a["_record>"]),
                            ("map wait (GPU time not hidden)", a["map<"] - a["map>"]),
                            ("reading the outputs", a["_copy_outputs<"] - a["map<"]),
                            ("unmap, NaN check, back to the caller", t1 - a["_copy_outputs<"]),
                            ("whole train_step", t1 - t0)):
            if span is not None:
                pieces[label].append(span)
        end = t1
    for label, spans in pieces.items():
        print(f"  {label:<42s} {statistics.median(spans) * 1e3:7.3f} ms")


if __name__ == "__main__":
    main()
