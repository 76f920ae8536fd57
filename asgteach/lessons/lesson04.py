"""Lesson 4's checks (broadcasting), with the bug hunt's truth kept inside them.

* Exercise 1, ``my_sum_to(g, shape)``: checked in the notebook (``check_function`` on shapes of every
  kind); ``RULES[1]`` keeps it numpy only, since the reduction is the exercise.
* Exercise 2, the bug hunt: the diagnosis as a function, ``div_culprits(graph)``: the ``(node id, input)``
  pairs whose backward rule the planted bug breaks. :func:`div_culprits_check` calls it on graphs of its own,
  made afresh of divisions of every kind (a copied divisor or dividend, same shapes, a constant, a new leading
  axis with a single copy, a backward pass already in the graph), in random sizes and a random order, and
  compares with what gradcheck itself blames on each inside ``bugs.mystery(4)``: pairs read off the lesson's
  printouts cannot pass. ``RULES[2]`` keeps gradcheck and the planted bug out of the answer (they would be the
  tool's diagnosis, not the student's). A wrong list is told which of its pairs are right after all or how
  many are missing, with the graph's divisions listed, never the answer.
* Exercise 3, ``fixed_div_vjp``: :func:`div_vjp_check` reads its source first (``RULES[3]``: no rule taken from
  the library, none derived by ``at.grad``), then ``check_vjp_rule`` gradient-checks it on broadcast shapes.
  ``check_vjp_rule`` also refuses the library's own rule by identity, which only works where the answer runs
  in the check's process (a student's kernel): in a graded course the rule is a handle into the sandbox, and
  ``RULES[3]``, read by the judge from the answer cell, refuses a borrowed rule; so does :func:`div_vjp_check`'s
  own identity test, against the rules of the library where the answer runs (:func:`submission_library_rules`,
  handles in a graded course, one handle per sandbox object: ``is`` works), which also sees a rule taken in
  another cell (``lib = at.ops.REGISTRY["div"].vjp`` in exercise 2's answer, which ``RULES[3]`` does not read).

This file gives the answers away: try the lesson first.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..grading import rules
from ..grading.checks import check_vjp_rule
from ..grading.exercises import ExerciseError, on_submission_side
from ..grading.rules import Rule, no_asgteach
from ..ops import REGISTRY
from .common import mystery_report

__all__ = ["LESSON", "RULES", "div_culprits_check", "div_vjp_check", "submission_library_rules"]

LESSON = "04-broadcasting"

#: where the library keeps its backward rules, and the doors to them: the op registry (``at.ops.spec("div").vjp``,
#: ``REGISTRY``, what ``lookup``/``patched``/``unregister`` hand back), the modules that define the rules, each rule
#: function by its own name (``_div_vjp``...), and ``at.grad`` (a rule derived from the other ops' rules)
_LIBRARY_RULES = frozenset({
    "vjp", "REGISTRY", "spec", "lookup", "patched", "registered", "register", "unregister", "registry", "elementwise",
    "autograd", "grad", "jvp", "hvp", "astuple", "asdict",
    *(getattr(entry.vjp, "__name__", "") for entry in REGISTRY.values() if getattr(entry, "vjp", None) is not None),
} - {"", "<lambda>"})

#: exercise -> what its answer may not use (the notebook's text states each one)
#: what would hand exercise 2's diagnosis to the tool: gradcheck, the planted bug, the hunt's answer
_HUNT_TOOLS = frozenset({"gradcheck", "bugs", "mystery", "mystery_report", "PLANTED", "reveal", "check_diagnosis",
                         "div_forgets_broadcast_sum", "_div_vjp_without_sum", "culprits"})

RULES: dict[int, Rule] = {
    1: no_asgteach("numpy only: the reduction is the exercise"),
    2: Rule(why="answer from the graph itself (its div nodes, the shapes of their inputs and output, where the inputs "
                "come from): gradcheck or the planted bug run by the answer would be the tool's diagnosis, not yours",
            imports=frozenset({"asgteach.gradcheck", "asgteach.lessons"}), names=_HUNT_TOOLS, attrs=_HUNT_TOOLS),
    3: Rule(why="write division's backward rule yourself, in graph ops from c.inputs, c.out and g: the library's own "
                "backward rule (at.ops.spec(...).vjp, REGISTRY) is what the exercise asks you to write, and at.grad "
                "would derive it from the other ops' rules",
            imports=frozenset({"asgteach.ops.registry", "asgteach.ops.elementwise", "asgteach.autograd",
                               "asgteach.grad", "asgteach.vjp", "asgteach.jvp", "asgteach.hvp", "asgteach.ops.spec",
                               "asgteach.ops.REGISTRY", "asgteach.ops.lookup", "asgteach.ops.patched"}),
            names=_LIBRARY_RULES - {"grad"}, attrs=_LIBRARY_RULES),
}


#: the kinds of division exercise 2's check builds its graphs from (each one once at least)
_KINDS = ("row over its sum", "same shapes", "constant", "scalar and vector", "column over row", "one copy",
          "leading axis")


def _division(kind: str, k: int, rng: np.random.Generator) -> Any:
    """One division of ``kind`` in the graph being built, with inputs of its own (named by ``k``), as a scalar."""
    import asgteach as at

    n, m = (int(v) for v in rng.integers(2, 5, size=2))
    name = f"x{k}"
    if kind == "row over its sum":
        x = at.input(name, (n, m))
        y = x / at.sum(x, axis=1, keepdims=True)
    elif kind == "same shapes":
        y = at.input(name, (n, m)) / at.input(f"y{k}", (n, m))
    elif kind == "constant":
        x = at.input(name, (n, m))
        y = x / 2.0 + 1.0 / x if rng.random() < 0.5 else 3.0 / x
    elif kind == "scalar and vector":
        s, v = at.input(f"s{k}", ()), at.input(name, (m,))
        y = s / v if rng.random() < 0.5 else v / s
    elif kind == "column over row":
        y = at.input(name, (n, 1)) / at.input(f"y{k}", (1, m))
    elif kind == "one copy":
        y = at.input(name, (1, m)) / at.input(f"y{k}", (m,))
    else:   # a leading axis added: w is copied once per batch element
        y = at.input(name, (2, n, m)) / at.input(f"w{k}", (n, m))
    return at.sum(at.tanh(y))


def _hunt_graphs(rng: np.random.Generator) -> list[tuple[Any, Any]]:
    """Four graphs of three divisions each, every kind at least once, in a random order; one has a backward pass."""
    import asgteach as at

    kinds = list(_KINDS) + [str(k) for k in rng.choice(_KINDS, size=12 - len(_KINDS))]
    rng.shuffle(kinds)
    backward = int(rng.integers(0, 4))
    out = []
    for g in range(4):
        with at.Graph(name=f"the check's graph {g + 1} of 4") as graph:
            parts = [_division(kind, 3 * g + j, rng) for j, kind in enumerate(kinds[3 * g: 3 * g + 3])]
            loss = parts[0] + parts[1] * parts[2]
            if g == backward:   # backward nodes divide too: they are not what gradcheck checks
                at.grad(loss, [at.Tensor(graph, n.id) for n in graph.nodes if n.op == "input"])
        out.append((graph, loss))
    return out


def _divisions(graph: Any) -> str:
    """The forward div nodes of ``graph``, with their inputs' shapes and ops: what a wrong answer is shown."""
    lines = []
    for node in graph.nodes:
        if node.op == "div" and node.phase == "forward":
            ins = ", ".join(f"#{i} {graph.nodes[i].op} {graph.nodes[i].shape}" for i in node.inputs)
            lines.append(f"#{node.id} div of ({ins}) -> {node.shape}")
    return "; ".join(lines)


def _pairs(got: Any, call: str) -> list[tuple[int, int]]:
    if not isinstance(got, (list, tuple, set)):
        raise ExerciseError(f"{call} should return a list of (node id, input index) pairs, got {got!r:.80}")
    pairs = []
    for p in got:
        if (not isinstance(p, (list, tuple)) or len(p) != 2
                or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in p)):
            raise ExerciseError(f"{call} should return (node id, input index) pairs of ints, got the element "
                                f"{p!r:.60}")
        pairs.append((int(p[0]), int(p[1])))
    return sorted(set(pairs))


def div_culprits_check(fn: Any) -> None:
    """Exercise 2: ``div_culprits(graph)`` names the (node, input) pairs the planted bug breaks, on graphs of the
    check's own (:func:`_hunt_graphs`), compared with what gradcheck blames inside ``bugs.mystery(4)``."""
    rules.enforce(fn, RULES[2], "div_culprits")
    if not callable(fn):
        raise ExerciseError(f"div_culprits should be a function div_culprits(graph), got {type(fn).__name__}")
    import asgteach as at

    rng = np.random.default_rng()
    for graph, loss in _hunt_graphs(rng):
        inputs = [at.Tensor(graph, n.id) for n in graph.nodes if n.op == "input"]
        feeds = {t: rng.uniform(0.5, 2.0, t.shape) for t in inputs}
        truth = sorted((c.node_id, c.input_index) for c in mystery_report(4, loss, inputs, feeds).culprits)
        call = f"div_culprits(<{graph.name}>)"
        try:
            got = fn(graph)
        except (ExerciseError, NotImplementedError):
            raise
        except Exception as e:  # noqa: BLE001 - the student's function failing is a finding
            raise ExerciseError(f"{call} raised {type(e).__name__}: {e}") from e
        pairs = _pairs(got, call)
        if pairs != truth:
            right = [p for p in pairs if p not in truth]
            parts = []
            if right:
                parts.append(f"it does not blame {', '.join(map(str, right))}")
            missing = len(set(truth) - set(pairs))
            if missing:
                parts.append(f"{missing} pair(s) whose gradient is wrong are missing")
            raise ExerciseError(
                f"{call} returned {pairs}, but gradcheck, checking every input of that graph inside bugs.mystery(4), "
                f"disagrees: {'; '.join(parts)}. Its divisions: {_divisions(graph)}. What does the bug lose, and "
                "which of these inputs have anything to lose? (Compare each input's size with the output's, and ask "
                "whether a gradient reaches it at all.)")


def submission_library_rules() -> list[tuple[str, Any]]:
    """``(op, backward rule)`` of every op of the library where the student's code runs; the check fetches this
    function with ``on_submission_side`` and compares the student's rule with each by identity."""
    return [(name, entry.vjp) for name, entry in REGISTRY.items() if getattr(entry, "vjp", None) is not None]


def div_vjp_check(rule: Any, cases: Sequence[Sequence[tuple[int, ...]]]) -> None:
    """Exercise 3: ``fixed_div_vjp(c, g)``, division's backward rule written in graph ops.

    Its source first (``RULES[3]``: neither the library's rule nor ``at.grad``), then the rule itself: not one of
    the library's where it runs (by identity), and ``check_vjp_rule``: patched in for ``div``, it must give the
    gradients of central differences on each case's broadcast shapes.
    """
    rules.enforce(rule, RULES[3], "fixed_div_vjp")
    library = on_submission_side(f"{__name__}.submission_library_rules")()
    borrowed = [entry[0] for entry in library if isinstance(entry, (list, tuple)) and len(entry) == 2
                and entry[1] is rule]
    if borrowed:
        raise ExerciseError(f"your rule is the library's own backward rule of {borrowed[0]!r}: the exercise asks you "
                            "to write it (in graph ops, from c.inputs, c.out and g)")
    check_vjp_rule("div", rule, cases=cases)
