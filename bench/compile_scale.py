"""How the cost of building, differentiating, compiling and running grows with the graph.

    /work/main/.venv/bin/python bench/compile_scale.py                 # chains of 1k, 2k, 4k, 8k, 16k tanh
    /work/main/.venv/bin/python bench/compile_scale.py --sizes 1000 2000 --repeats 5

The graph is the worst case for a memory planner that rescans: a chain of N ``tanh`` nodes,
``y = sum(tanh(tanh(...tanh(x))))``, and its gradient ``at.grad(y, x)`` (another 3N nodes,
whose running gradient flows through ONE buffer, written in place N times). For each N it
times, in a fresh graph each repeat:

* **build**: the N ``at.tanh`` calls and the sum;
* **grad**: ``at.grad(y, x)``, which appends the backward graph;
* **compile**: the numpy backend's ``compile`` (prune, order, bind, fold constants, plan
  memory and in-place writes, generate the straight-line program and compile it as Python);
* **run**: the first ``plan.run`` (later runs are faster: the feed check takes a short path).

It prints the median of ``--repeats`` samples (each a fresh graph) and, for each doubling of
N, how much each phase grew: ~2x per doubling is linear; ~4x is quadratic. Before the fix
of issue 11, compile grew ~4x per doubling (8k: ~6 s, 16k: ~22 s).

Not a test: timings on a shared machine are noisy. tests/test_compile_scale.py proves the
linearity by counting work instead.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import asgteach as at
from asgteach.backends import numpy_backend

PHASES = ("build", "grad", "compile", "run")


def measure(n: int) -> dict[str, float]:
    """Seconds per phase for one fresh chain of ``n`` tanh nodes and its gradient."""
    t = {}
    t0 = time.perf_counter()
    with at.Graph() as g:
        x = at.input("x", (4,))
        h = x
        for _ in range(n):
            h = at.tanh(h)
        y = at.sum(h)
        t1 = time.perf_counter()
        dx = at.grad(y, x)
    t2 = time.perf_counter()
    plan = numpy_backend.compile(g, [y.node_id, dx.node_id])
    t3 = time.perf_counter()
    plan.run({x: np.full(4, 0.5)})
    t4 = time.perf_counter()
    t.update(build=t1 - t0, grad=t2 - t1, compile=t3 - t2, run=t4 - t3)
    t["steps"] = len(plan.steps)
    return t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 4000, 8000, 16000])
    parser.add_argument("--repeats", type=int, default=3, help="fresh graphs per size; the median is shown")
    args = parser.parse_args()
    print(f"chain of N tanh + at.grad, numpy backend; median of {args.repeats} fresh graphs, seconds")
    print(f"{'N':>7} {'kernels':>8} " + " ".join(f"{p:>9}" for p in PHASES))
    medians: dict[int, dict[str, float]] = {}
    for n in args.sizes:
        samples = [measure(n) for _ in range(args.repeats)]
        med = {p: statistics.median(s[p] for s in samples) for p in PHASES}
        medians[n] = med
        print(f"{n:>7} {int(samples[0]['steps']):>8} " + " ".join(f"{med[p]:>9.3f}" for p in PHASES))
    pairs = [(a, b) for a, b in zip(args.sizes, args.sizes[1:])]
    if pairs:
        print("\ngrowth per step of N (time(b) / time(a), with b / a shown): ~b/a is linear, ~(b/a)^2 quadratic")
        for a, b in pairs:
            print(f"{a:>6} -> {b:<6} (x{b / a:g}) " + " ".join(
                f"{p} {medians[b][p] / max(medians[a][p], 1e-9):5.2f}" for p in PHASES))


if __name__ == "__main__":
    main()
