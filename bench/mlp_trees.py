"""bench/mlp_step.py's step for several source trees side by side: which tree's step is faster?

    git archive bbf1722 | (mkdir -p /tmp/mlp_base && tar -x -C /tmp/mlp_base)
    /work/main/.venv/bin/python bench/mlp_trees.py /tmp/mlp_base /work/main --rounds 80

Two versions of asgteach cannot be imported into one process, so each tree gets a worker process
(its own ``bench/mlp_step.py`` and package). The workers take turns, one at a time, round after
round, so load from elsewhere falls on all of them alike. In a round a worker times its
hand-numpy, ``AsgteachStep`` and ``TrainerStep`` (``--steps`` steps each, process CPU time, the order
turning by one each round) and reports. Printed: per tree the medians, asgteach / hand-numpy and
trainer / hand-numpy as the median of the rounds' ratios (with the quartiles of asgteach's), and for
every tree after the first, its asgteach time over the first tree's in the same round (median).

A percent between trees is about what separates copies of the same code here (buffers at other
addresses): read the ratios to the first tree over many rounds, and repeat the run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def worker(tree: str, steps: int) -> None:
    """Time one tree's contenders each time a line arrives on stdin; answer with one JSON line."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    sys.path[:0] = [tree, os.path.join(tree, "bench")]
    import asgteach
    import mlp_step as m

    for mod in (asgteach, m):   # the tree's own code, not an installed copy
        if not os.path.abspath(mod.__file__).startswith(os.path.abspath(tree)):
            raise SystemExit(f"{mod.__name__} came from {mod.__file__}, not from {tree}")
    params, (x, labels, onehot) = m.init_params(), m.make_batch()
    a, b, tr = m.AsgteachStep(params), m.NumpyStep(params), m.TrainerStep(params)
    contenders = {"hand": lambda: b.step(x, labels), "asgteach": lambda: a.step(x, onehot),
                  "trainer": lambda: tr.step(x, onehot)}
    for fn in contenders.values():
        for _ in range(30):
            fn()
    names = list(contenders)
    for r, _ in enumerate(sys.stdin):
        out = {}
        for name in names[r % 3:] + names[:r % 3]:
            fn, start = contenders[name], time.process_time()
            for _ in range(steps):
                fn()
            out[name] = (time.process_time() - start) / steps
        print(json.dumps(out), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trees", nargs="+", help="checkouts (directories holding asgteach/ and bench/)")
    ap.add_argument("--rounds", type=int, default=40, help="rounds (default 40)")
    ap.add_argument("--steps", type=int, default=100, help="steps per contender per round (default 100)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.trees[0], args.steps)
        return 0
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", tree, "--steps", str(args.steps)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for tree in args.trees]
    samples: list[list[dict[str, float]]] = [[] for _ in procs]
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    for r in range(args.rounds):
        order = list(range(len(procs)))
        for i in order[r % len(order):] + order[:r % len(order)]:
            procs[i].stdin.write("go\n")
            procs[i].stdin.flush()
            samples[i].append(json.loads(procs[i].stdout.readline()))
    print(f"load average after: {os.getloadavg()[0]:.1f}; {args.rounds} rounds of {args.steps} steps")
    for p in procs:
        p.stdin.close()
        p.wait()
    first = samples[0]
    for tree, s in zip(args.trees, samples):
        med = {k: statistics.median(d[k] for d in s) * 1e6 for k in ("hand", "asgteach", "trainer")}
        ra = [d["asgteach"] / d["hand"] for d in s]
        q1, q2, q3 = statistics.quantiles(ra, n=4)
        rt = statistics.median(d["trainer"] / d["hand"] for d in s)
        line = (f"{tree}: hand {med['hand']:.1f} us, asgteach {med['asgteach']:.1f}, trainer {med['trainer']:.1f};"
                f" asgteach / hand {q2:.4f} (quartiles {q1:.3f}-{q3:.3f}), trainer / hand {rt:.4f}")
        if s is not first:
            vs_first = statistics.median(d["asgteach"] / e["asgteach"] for d, e in zip(s, first))
            line += f"; asgteach / first tree's {vs_first:.4f}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
