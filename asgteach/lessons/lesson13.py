"""Lesson 13's checks (graph engineering): memory planning, on plans of the check's own.

The references the checks compare with (peak bytes, last uses, fusible values) are the answer keys'
(``instructor/answer_keys.py``, loaded by :func:`asgteach.grading.keys.load` only inside a check: a
student's install has none, and neither has a graded submission's sandbox). Each check builds three plans
the lesson never printed (another MLP with its gradients, a chain with a fan-out, a tiny one) and calls the
student's function on them:

* Exercise 1: :func:`alive_check` (``bytes_alive(plan, itemsize)``, the bytes alive after each step, at two item
  sizes; ``RULES[1]`` refuses the plan's own ``liveness()``, and in practice mode the check refuses a call into it);
* Exercise 2: :func:`kept_check` (``kept_for_backward(plan)``, on :func:`backward_plans`: another MLP, a deep
  chain with its gradient, the same chain's forward pass alone);
* Exercise 3: :func:`fusible_check` (``my_fusible(plan)``); a value one step reads twice (``d * d``) may
  count as read once or twice, as the exercise's words allow both.

An answer that reaches for the keys itself (``asgteach.grading.keys.load()``, by an import or an attribute
path built from strings) fails either way: in a student's own kernel the check watches what the function
runs (:func:`asgteach.grading.calls.refusing_calls`) and refuses a call into the keys (or into this module's
:func:`show_fusion`); in a graded course the answer runs in the sandbox, where there are no keys to load, and
the :class:`~asgteach.grading.keys.KeysMissing` it meets there is reported as that reach. The lesson's
answers need no source rule beyond the judge's hands-off one and the two below.

:func:`show_fusion` prints the fusion chains of the lesson's plan for section 6. It runs in the lesson's
own cells, where a student's code runs, so it needs no keys: it asks the numpy plan for them
(``Plan.fusion_chains``, the library's own analysis by the rule the section states). Exercise 3 asks for
that rule written out: ``RULES[3]`` refuses the plan's method, and in practice mode the check also
refuses a call into it however the answer holds it.
"""

from __future__ import annotations

from typing import Any, Callable

from ..backends.numpy_plan import Plan as NumpyPlan
from ..grading.calls import refusing_calls
from ..grading.checks import check_equal
from ..grading.exercises import ExerciseError
from ..grading.keys import KeysMissing
from ..grading.keys import load as load_keys
from ..grading.rules import Rule

__all__ = ["LESSON", "RULES", "show_fusion", "check_plans", "backward_plans", "alive_check", "kept_check",
           "fusible_check"]

LESSON = "13-graph-engineering"

#: exercise -> what its answer may not use (the checks also watch what the answer calls, in practice mode)
RULES: dict[int, Rule] = {
    1: Rule(why="replay the plan yourself, from plan.steps: the plan's own liveness() is section 4's display, not the "
                "exercise", attrs=frozenset({"liveness"})),
    3: Rule(why="find the fusible values yourself from plan.steps, by the rule section 6 states: the plan's own "
                "fusion_chains() is the lesson's display, not the exercise",
            attrs=frozenset({"fusion_chains", "show_fusion"})),
}


_ELEMENTWISE = ("arithmetic", "activation", "comparison")   # op categories whose kernels are elementwise


def show_fusion(plan: Any) -> None:
    """Print the fusion chains of ``plan`` and what they would save (lesson 13's section 6), without the keys."""
    from ..ops.registry import spec

    g = plan.graph
    chains = plan.fusion_chains()    # the numpy plan's own analysis (the rule section 6 states)
    for chain in chains:
        print(" -> ".join(f"#{i} {g.nodes[i].op}" for i in chain), f"  (shape {g.nodes[chain[-1]].shape})")
    saved = sum(g.nodes[i].size for chain in chains for i in chain[:-1]) * 4
    elementwise = [s for s in plan.steps
                   if spec(s.node.op).category in _ELEMENTWISE and s.node.id not in plan.folded]
    print(f"{len(elementwise)} elementwise kernels -> {len(elementwise) - sum(len(c) - 1 for c in chains)} after "
          f"fusion; {saved} bytes never written (and never read back) per run")


def check_plans() -> list[Any]:
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


def _reached_for_keys(e: BaseException) -> bool:
    """Whether the error an answer raised is its reach for the answer keys where there are none: the loader's
    :class:`~asgteach.grading.keys.KeysMissing` (an ExerciseError with its words once it crossed from the sandbox),
    or the keys' file not found where a checkout keeps it."""
    text = str(e)
    return (isinstance(e, KeysMissing) or "KeysMissing" in text or "course's answer keys" in text
            or "answer_keys" in text)


def _answer(fn: Any, name: str) -> Any:
    """``fn`` as the check calls it: an answer that reaches for the answer keys where it runs without them (a
    graded submission's sandbox) fails the exercise for what it did, not as an error of the student's code."""
    if not callable(fn):
        return fn   # the check says what it should be

    def call(*args: Any) -> Any:
        try:
            return fn(*args)
        except NotImplementedError:
            raise   # the stub of an unfinished exercise: "not done yet"
        except Exception as e:
            if _reached_for_keys(e):
                raise ExerciseError(
                    f"{name} reaches for the check's own reference (the answer keys, instructor/answer_keys.py, that "
                    "asgteach.grading.keys loads): the exercise is to write it yourself, and where your answer runs "
                    "there are no keys") from None
            raise
    return call


def backward_plans() -> list[Any]:
    """Plans with a backward pass the lesson never showed: another MLP (:func:`check_plans`' first), a deep chain
    whose activations the backward pass reads, and the same chain's forward pass alone (nothing kept)."""
    import asgteach as at

    plans = [check_plans()[0]]
    with at.Graph(name="check: deep chain"):
        x, w = at.input("x", (4, 6)), at.parameter("w", (6, 6))
        h = x
        for _ in range(3):
            h = at.tanh(h @ w) + h
        loss = at.sum(at.sigmoid(h) * 3.0)
        plans.append(at.compile([loss, at.grad(loss, w)]))
        plans.append(at.compile([loss]))
    return plans


def _never_freed(p: Any, itemsize: int) -> list[int]:
    total = sum(n.size for n in p.leaves + p.constants) * itemsize
    rows = []
    for step in p.steps:
        total += step.node.size * itemsize
        rows.append(total)
    return rows


def alive_check(fn: Callable[..., Any]) -> None:
    """``fn(plan, itemsize) -> [bytes alive after each step of plan.steps]``, on other plans and item sizes.

    Compared with the plan's own liveness replay (the answer keys'); a list that never frees, frees the outputs, or
    leaves out the fed values and constants gets a hint that names that mistake.
    """
    keys = load_keys()   # the references, loaded only when a check runs
    cases = [(p, itemsize, keys.live_bytes(p, itemsize)) for p in check_plans() for itemsize in (8, 2)]
    answer = _answer(fn, "bytes_alive")
    for p, itemsize, want in cases:
        call = f"bytes_alive(<plan of {p.graph.name!r}>, {itemsize})"
        with refusing_calls("bytes_alive", (NumpyPlan.liveness, "the plan's own liveness()")):
            got = answer(p, itemsize)
        if not isinstance(got, (list, tuple)) or len(got) != len(p.steps):
            raise ExerciseError(f"{call} should return a list of {len(p.steps)} numbers, one per step of plan.steps "
                                f"(the bytes alive after it), got {type(got).__name__}"
                                + (f" of length {len(got)}" if isinstance(got, (list, tuple)) else ""))
        mine = [int(v) for v in got]
        if mine == want:
            continue
        hint = "a value is alive from its step until the last step that reads it (then freed), unless it is an output"
        start = sum(n.size for n in p.leaves + p.constants) * itemsize
        if mine == _never_freed(p, itemsize):
            hint = "nothing is ever freed here: a value dies after the last step that reads it"
        elif all(m <= w for m, w in zip(mine, want)) and any(m < w for m, w in zip(mine, want)):
            hint = ("fewer bytes than alive: are the fed values and constants counted from the start "
                    f"({start} bytes here), and do the plan's outputs stay alive to the end?")
        k = next(i for i, (m, w) in enumerate(zip(mine, want)) if m != w)
        node = p.steps[k].node
        raise ExerciseError(f"{call}: after step {k} (#{node.id} {node.op}) {want[k]} bytes are alive, your list says "
                            f"{mine[k]}\n  Hint: {hint}")


def kept_check(fn: Callable[..., Any]) -> None:
    """``fn(plan) -> [ids of forward values a backward step reads]`` in plan order, on plans of the check's own."""
    keys = load_keys()   # the references, loaded only when a check runs
    for p in backward_plans():
        want = keys.kept_for_backward(p)
        with refusing_calls("kept_for_backward"):   # (the answer runs after the reference, which it may not call)
            got = _answer(fn, "kept_for_backward(plan)")(p)
        if not isinstance(got, (list, tuple)):
            raise ExerciseError(f"kept_for_backward(plan) should return a list of node ids, got {type(got).__name__}")
        mine = [int(i) for i in got]
        if mine == want:
            continue
        g = p.graph
        extra = sorted(set(mine) - set(want))
        hint = "values made by forward steps (step.node.phase) that at least one backward step reads, in plan order"
        if any(g.nodes[i].op in ("input", "parameter", "constant") for i in extra):
            hint = "fed inputs, parameters and constants are not made by a step: only steps' values count"
        elif extra and all(g.nodes[i].phase == "forward" for i in extra):
            hint = "a forward value that only forward steps read is freed before the backward pass: it is not kept"
        check_equal(mine, want, name=f"kept_for_backward(<plan of {g.name!r}>)", hint=hint)


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
    for p in check_plans():
        readings = _fusible_readings(p)
        with refusing_calls("my_fusible", (NumpyPlan.fusion_chains, "the numpy plan's own fusion_chains()")):
            got = _answer(fn, "my_fusible(plan)")(p)
        if not isinstance(got, (list, tuple)):
            raise ExerciseError(f"my_fusible(plan) should return a list of node ids, got {type(got).__name__}")
        mine = [int(i) for i in got]
        if mine in readings[1:]:
            continue
        check_equal(mine, readings[0], name=f"my_fusible(<plan of {p.graph.name!r}>)",
                    hint="in plan order: elementwise, not an output, not folded, read by exactly one elementwise "
                         "step of the same shape" + (" (a value that one step reads twice, as d * d does, may count "
                                                     "as read once or twice)" if len(readings) > 1 else ""))
