"""How the cost of building, differentiating, compiling and running grows with the graph.

    /work/main/.venv/bin/python bench/compile_scale.py                 # chains of 1k, 2k, 4k, 8k, 16k tanh
    /work/main/.venv/bin/python bench/compile_scale.py --sizes 1000 2000 --repeats 5
    /work/main/.venv/bin/python bench/compile_scale.py --case jvp      # forward mode through N mul
    /work/main/.venv/bin/python bench/compile_scale.py --case wgpu     # the GPU compile of N tanh + gradient
    /work/main/.venv/bin/python bench/compile_scale.py --case trainer  # Trainers over N parameter tensors

``--case numpy`` (the default; issue 11) times a chain of N ``tanh`` nodes,
``y = sum(tanh(tanh(...tanh(x))))``, and its gradient ``at.grad(y, x)`` (another 3N nodes, whose
running gradient flows through ONE buffer, written in place N times: the worst case for a memory
planner that rescans), in a fresh graph each repeat:

* **build**: the N ``at.tanh`` calls and the sum;
* **grad**: ``at.grad(y, x)``, which appends the backward graph;
* **compile**: the numpy backend's ``compile`` (prune, order, bind, fold constants, plan
  memory and in-place writes, generate the straight-line program and compile it as Python);
* **run**: the first ``plan.run`` (later runs are faster: the feed check takes a short path).

The other cases are issue 22's:

* ``--case jvp``: ``at.jvp`` of ``x * x * ... * x`` (N ``mul``, an op with no JVP rule of its own: its
  tangent is derived from its VJP rule). Before the fix, each node's derived rule walked every
  ancestor of the model: the issue measured 500 in 0.36 s, 2,000 in 5.8 s, 4,000 in 104 s.
* ``--case wgpu``: the same tanh chain and its gradient, compiled by the wgpu backend (``compile``: the
  fusion plan, the lowering, the device's pipelines and bind groups; ``run``: the first run). Before,
  the fusion planner regrouped the whole chain for every member it cut from the too-wide backward
  chain: the issue measured 150 in 0.6 s, 600 in 23 s, 2,000 in over 10 minutes.
* ``--case trainer``: building an ``at.Trainer`` (Adam) over N parameter tensors, on numpy and on wgpu,
  and its first step on wgpu. ``--model linears`` (the default) is N/2 ``Linear(2, 2)`` layers in
  sequence; ``--model sum`` is ``sum_i sum(p_i * x)`` over N parameters of shape (2,).

After a warm-up (a graph of N = 10: the device opens, the first kernels compile), it prints the
median of ``--repeats`` samples (each a fresh graph) and, for each step of N, how
much each phase grew: ~b/a is linear; ~(b/a)^2 quadratic. Before the fix of issue 11, numpy's
compile grew ~4x per doubling (8k: ~6 s, 16k: ~22 s).

Not a test: timings on a shared machine are noisy. tests/test_compile_scale.py proves the
linearity by counting work instead.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import numpy as np

import asgteach as at
from asgteach.backends import numpy_backend


def _tanh_chain(n: int) -> tuple[at.Graph, at.Tensor, at.Tensor, float]:
    """(graph, x, y, seconds to build it): ``y = sum(tanh(tanh(...tanh(x))))`` with n tanh."""
    t0 = time.perf_counter()
    with at.Graph() as g:
        x = at.input("x", (4,))
        h = x
        for _ in range(n):
            h = at.tanh(h)
        y = at.sum(h)
    return g, x, y, time.perf_counter() - t0


def measure_numpy(n: int) -> dict[str, float]:
    """Seconds per phase for one fresh chain of ``n`` tanh nodes and its gradient, on numpy."""
    g, x, y, build = _tanh_chain(n)
    t1 = time.perf_counter()
    with g:
        dx = at.grad(y, x)
    t2 = time.perf_counter()
    plan = numpy_backend.compile(g, [y.node_id, dx.node_id])
    t3 = time.perf_counter()
    plan.run({x: np.full(4, 0.5)})
    t4 = time.perf_counter()
    return {"build": build, "grad": t2 - t1, "compile": t3 - t2, "run": t4 - t3, "size": len(plan.steps)}


def measure_jvp(n: int) -> dict[str, float]:
    """Seconds to build ``x * x * ... * x`` (n mul), to append its JVP, and to run both on numpy."""
    t0 = time.perf_counter()
    with at.Graph():
        x = at.input("x", (4,))
        h = x
        for _ in range(n):
            h = h * x
        t1 = time.perf_counter()
        tangent = at.jvp(h, x, np.ones(4))
    t2 = time.perf_counter()
    at.run([h, tangent], {x: np.full(4, 0.999)}, backend="numpy")
    t3 = time.perf_counter()
    return {"build": t1 - t0, "jvp": t2 - t1, "run": t3 - t2, "size": len(x.graph.nodes)}


def measure_wgpu(n: int) -> dict[str, float]:
    """Seconds per phase for one fresh chain of ``n`` tanh nodes and its gradient, on wgpu."""
    from asgteach.backends import wgpu_backend
    g, x, y, build = _tanh_chain(n)
    t1 = time.perf_counter()
    with g:
        dx = at.grad(y, x)
    t2 = time.perf_counter()
    plan = wgpu_backend.compile(g, [y.node_id, dx.node_id])
    t3 = time.perf_counter()
    plan.run({x: np.full(4, 0.5, np.float32)})
    t4 = time.perf_counter()
    return {"build": build, "grad": t2 - t1, "compile": t3 - t2, "run": t4 - t3, "size": len(plan.dispatches)}


def _many_parameters(n: int, model: str) -> tuple[at.Tensor, at.Tensor]:
    """(loss, x) of a model with ``n`` parameter tensors (see the module docstring's ``--model``)."""
    with at.Graph():
        x = at.input("x", (4, 2))
        if model == "sum":
            loss = None
            for i in range(n):
                term = at.sum(at.parameter(f"p{i}", (2,), init="zeros") * x)
                loss = term if loss is None else loss + term
        else:
            h = x
            for i in range(n // 2):
                h = at.nn.Linear(2, 2, name=f"l{i}")(h)
            loss = at.mean(h * h)
    return loss, x


def measure_trainer(n: int, model: str) -> dict[str, float]:
    """Seconds to build a Trainer over ``n`` parameter tensors on numpy and on wgpu, and wgpu's first step."""
    out: dict[str, float] = {}
    for backend in ("numpy", "wgpu"):
        loss, x = _many_parameters(n, model)
        t0 = time.perf_counter()
        tr = at.Trainer(loss, optimizer=at.optim.Adam(lr=0.01), backend=backend, seed=0)
        t1 = time.perf_counter()
        tr.train_step({x: np.ones((4, 2), np.float32)})
        out[f"{backend} build"], out[f"{backend} step"] = t1 - t0, time.perf_counter() - t1
        out["size"] = len(tr.param_tensors)
    return {k: out[k] for k in ("numpy build", "wgpu build", "wgpu step", "size")}


CASES: dict[str, tuple[str, list[int], str]] = {   # case -> (what is timed, default sizes, the size column)
    "numpy": ("chain of N tanh + at.grad, numpy backend", [1000, 2000, 4000, 8000, 16000], "kernels"),
    "jvp": ("at.jvp through N mul (derived from the VJP rule), run on numpy", [500, 1000, 2000, 4000], "nodes"),
    "wgpu": ("chain of N tanh + at.grad, wgpu backend", [150, 300, 600, 1200, 2000], "dispatches"),
    "trainer": ("Trainer (Adam) over N parameter tensors", [1000, 2000, 4000, 10000], "params"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=sorted(CASES), default="numpy")
    parser.add_argument("--sizes", type=int, nargs="+", help="N values (default: the case's own)")
    parser.add_argument("--repeats", type=int, default=3, help="fresh graphs per size; the median is shown")
    parser.add_argument("--model", choices=("linears", "sum"), default="linears", help="--case trainer's model")
    args = parser.parse_args()
    title, default_sizes, size_name = CASES[args.case]
    sizes = args.sizes or default_sizes
    measure: Callable[[int], dict[str, float]] = {
        "numpy": measure_numpy, "jvp": measure_jvp, "wgpu": measure_wgpu,
        "trainer": lambda n: measure_trainer(n, args.model),
    }[args.case]
    if args.case == "trainer":
        title += f", model {args.model!r}"
    print(f"{title}; median of {args.repeats} fresh graphs, seconds")
    measure(10)   # warm-up: opens the device, compiles the first kernels, fills first-use caches
    medians: dict[int, dict[str, float]] = {}
    phases: list[str] = []
    for n in sizes:
        samples = [measure(n) for _ in range(args.repeats)]
        if not phases:
            phases = [p for p in samples[0] if p != "size"]
            print(f"{'N':>7} {size_name:>10} " + " ".join(f"{p:>12}" for p in phases))
        med = {p: statistics.median(s[p] for s in samples) for p in phases}
        medians[n] = med
        print(f"{n:>7} {int(samples[0]['size']):>10} " + " ".join(f"{med[p]:>12.3f}" for p in phases), flush=True)
    pairs = list(zip(sizes, sizes[1:]))
    if pairs:
        print("\ngrowth per step of N (time(b) / time(a), with b / a shown): ~b/a is linear, ~(b/a)^2 quadratic")
        for a, b in pairs:
            print(f"{a:>6} -> {b:<6} (x{b / a:g}) " + " ".join(
                f"{p} {medians[b][p] / max(medians[a][p], 1e-9):5.2f}" for p in phases))


if __name__ == "__main__":
    main()
