"""Lesson 13's checks (graph engineering): memory planning, on plans of the check's own.

The references (peak bytes, last uses, fusible values, fusion chains) are the answer keys'
(``instructor/answer_keys.py``, loaded by :func:`asgteach.grading.keys.load` only when a check runs).
Each check builds three plans the lesson never printed (another MLP with its gradients, a chain with a
fan-out, a tiny one) and calls the student's function on them, while the function is watched
(:func:`asgteach.grading.calls.refusing_calls`) so that a call into the keys fails:

* Exercise 1: :func:`memory_check` (``memory_bytes(plan, itemsize)``, at two item sizes);
* Exercise 2: :func:`last_use_check` (``my_last_use(plan)``);
* Exercise 3: :func:`fusible_check` (``my_fusible(plan)``); a value one step reads twice (``d * d``) may
  count as read once or twice, as the exercise's words allow both.

:func:`show_fusion` prints the fusion chains of the lesson's plan for section 6. The lesson's answers
need no source rule: ``RULES`` is empty.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ..grading.calls import refusing_calls
from ..grading.checks import check_equal, check_function
from ..grading.exercises import ExerciseError
from ..grading.keys import load as load_keys
from ..grading.rules import Rule

__all__ = ["LESSON", "RULES", "show_fusion", "memory_check", "last_use_check", "fusible_check"]

LESSON = "13-graph-engineering"

#: exercise -> what its answer may not use: none (the checks watch what the answer calls)
RULES: dict[int, Rule] = {}


def show_fusion(plan: Any) -> None:
    """Print the fusion chains of ``plan`` and what they would save (lesson 13's section 6)."""
    keys = load_keys()   # the references, loaded only when a check runs
    from ..ops.registry import spec

    g = plan.graph
    chains = keys.fusion_chains(plan)
    for chain in chains:
        print(" -> ".join(f"#{i} {g.nodes[i].op}" for i in chain), f"  (shape {g.nodes[chain[-1]].shape})")
    saved = sum(g.nodes[i].size for i in keys.fusible_values(plan)) * 4
    elementwise = [s for s in plan.steps
                   if spec(s.node.op).category in keys.ELEMENTWISE and s.node.id not in plan.folded]
    print(f"{len(elementwise)} elementwise kernels -> {len(elementwise) - sum(len(c) - 1 for c in chains)} after "
          f"fusion; {saved} bytes never written (and never read back) per run")


def _check_plans() -> list[Any]:
    """Three plans the lesson never showed: another MLP with its gradients, a chain with a fan-out, a tiny one."""
    import asgteach as at

    plans = []
    with at.Graph(name="check: mlp"):
        x, t = at.input("x", (8, 5)), at.input("t", (8, 3))
        w1, w2 = at.parameter("w1", (5, 7)), at.parameter("w2", (7, 3))
        h = at.sigmoid(x @ w1) * 2.0 - 1.0
        loss = at.mean(at.abs(h @ w2 - t))
        plans.append(at.compile([loss, *at.grad(loss, [w1, w2])]))
    with at.Graph(name="check: fan-out"):
        a, b = at.input("a", (6,)), at.input("b", (6,))
        c = at.exp(a) + b
        d = at.tanh(c) * c
        plans.append(at.compile([at.sum(d * d), at.relu(b - a)]))
    with at.Graph(name="check: tiny"):
        u = at.input("u", (3, 4))
        plans.append(at.compile([at.sum(at.sqrt(u * u + 1.0), axis=0)]))
    return plans


def memory_check(fn: Callable[..., Any]) -> None:
    """``fn(plan, itemsize) -> (peak bytes alive, bytes if nothing were freed)``, on other plans and item sizes."""
    keys = load_keys()   # the references, loaded only when a check runs
    cases = [(p, itemsize, (keys.peak_bytes(p, itemsize), keys.no_reuse_bytes(p, itemsize)))
             for p in _check_plans() for itemsize in (8, 2)]
    with refusing_calls("memory_bytes"):            # the answer runs after the references, which it may not call
        for p, itemsize, want in cases:
            check_function(fn, [((p, itemsize), want)], name=f"memory_bytes(<plan of {p.graph.name!r}>, {itemsize})")


def last_use_check(fn: Callable[..., Any]) -> None:
    """``fn(plan) -> {node id: index of the last step reading it}``, on plans the lesson never printed."""
    keys = load_keys()   # the references, loaded only when a check runs
    for p in _check_plans():
        expected = keys.last_use(p)
        with refusing_calls("my_last_use"):
            mine = fn(p)
        if not isinstance(mine, Mapping):
            raise ExerciseError(f"my_last_use(plan) should return a dict {{node id: step index}}, got "
                                f"{type(mine).__name__}")
        check_equal(sorted(mine), sorted(expected), name=f"the nodes in my_last_use(<plan of {p.graph.name!r}>)")
        for node_id, k in expected.items():
            check_equal(mine[node_id], k, name=f"my_last_use(<plan of {p.graph.name!r}>)[{node_id}] "
                                               f"(node #{node_id} {p.graph.nodes[node_id].op})")


def _fusible_readings(p: Any) -> list[list[int]]:
    """The fusible values of plan ``p`` by both readings of "read by exactly one step" (the first: the reference's).

    The reference counts reads: ``d * d`` reads ``d`` twice, so ``d`` is written. Counted by steps, ``d * d`` is
    one elementwise step of ``d``'s shape, and ``d`` need not be written: the GPU's pass ``chains``, which counts
    the nodes reading a value, fuses it. The exercise's words allow both, so the check accepts both.
    """
    keys = load_keys()   # the references, loaded only when a check runs
    from ..ops.registry import spec

    by_reads, users = keys.fusible_values(p), keys.consumers(p)
    by_steps = []
    for step in p.steps:
        node = step.node
        readers = list({n.id: n for n in users.get(node.id, [])}.values())   # each reading step once
        if (spec(node.op).category in keys.ELEMENTWISE and node.id not in p.outputs and node.id not in p.folded
                and len(readers) == 1 and spec(readers[0].op).category in keys.ELEMENTWISE
                and readers[0].shape == node.shape):
            by_steps.append(node.id)
    return [by_reads] if by_steps == by_reads else [by_reads, by_steps]


def fusible_check(fn: Callable[..., Any]) -> None:
    """``fn(plan) -> [node ids a fusing compiler would never write]`` in plan order, on plans of the check's own.

    A value that one step reads twice (``d * d``) may count as read once or twice (:func:`_fusible_readings`).
    """
    for p in _check_plans():
        readings = _fusible_readings(p)
        with refusing_calls("my_fusible"):
            got = fn(p)
        if not isinstance(got, (list, tuple)):
            raise ExerciseError(f"my_fusible(plan) should return a list of node ids, got {type(got).__name__}")
        mine = [int(i) for i in got]
        if mine in readings[1:]:
            continue
        check_equal(mine, readings[0], name=f"my_fusible(<plan of {p.graph.name!r}>)",
                    hint="in plan order: elementwise, not an output, not folded, read by exactly one elementwise "
                         "step of the same shape" + (" (a value that one step reads twice, as d * d does, may count "
                                                     "as read once or twice)" if len(readings) > 1 else ""))
