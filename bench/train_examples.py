"""Run the training examples at their full budgets and print what they reach.

    .venv/bin/python bench/train_examples.py [--backend numpy|wgpu|auto]

The examples live in ``asgteach/examples.py`` (the lessons and tests call the same
functions, the tests on small budgets). Targets: XOR loss < 1e-3, digits test accuracy
>= 95 %, the character model's loss falling clearly below its first steps.
"""

from __future__ import annotations

import argparse
import time

from asgteach import examples


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="numpy", help="numpy (default), wgpu or auto")
    args = ap.parse_args()
    runs = [
        (examples.xor, {}, lambda m: m["final_loss"] < 1e-3),
        (examples.linear_regression, {}, lambda m: m["weight_error"] < 0.02),
        (examples.digits, {}, lambda m: m["test_accuracy"] >= 0.95),
        (examples.char_transformer, {}, lambda m: m["final_loss"] < 0.75 * m["first_loss"]),
    ]
    for fn, kw, target in runs:
        t0 = time.perf_counter()
        r = fn(backend=args.backend, **kw)
        secs = time.perf_counter() - t0
        metrics = ", ".join(f"{k} {v:.4g}" for k, v in r.metrics.items())
        print(f"{r.name:18s} {secs:6.2f} s  {metrics}  target {'MET' if target(r.metrics) else 'NOT MET'}")


if __name__ == "__main__":
    main()
