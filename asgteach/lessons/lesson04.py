"""Lesson 4's checks (broadcasting), with the bug hunt's truth kept inside them.

* Exercise 1, ``my_sum_to(g, shape)``: checked in the notebook (``check_function`` on shapes of every
  kind); ``RULES[1]`` keeps it numpy only, since the reduction is the exercise.
* Exercise 2, the bug hunt: :func:`div_culprit` asks gradcheck itself, inside ``bugs.mystery(4)``, which
  node's rule the planted bug breaks and which input gets the wrong gradient, and compares the student's
  ``culprit_id`` and ``culprit_input`` with that; a wrong node gets a hint that narrows the search (what
  to run, what to compare), never the answer.
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

from typing import Any, Mapping, Sequence

import numpy as np

from ..grading import rules
from ..grading.checks import check_vjp_rule
from ..grading.exercises import ExerciseError, on_submission_side
from ..grading.rules import Rule, no_asgteach
from ..ops import REGISTRY
from .common import mystery_report

__all__ = ["LESSON", "RULES", "div_culprit", "div_vjp_check", "submission_library_rules"]

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
RULES: dict[int, Rule] = {
    1: no_asgteach("numpy only: the reduction is the exercise"),
    3: Rule(why="write division's backward rule yourself, in graph ops from c.inputs, c.out and g: the library's own "
                "backward rule (at.ops.spec(...).vjp, REGISTRY) is what the exercise asks you to write, and at.grad "
                "would derive it from the other ops' rules",
            imports=frozenset({"asgteach.ops.registry", "asgteach.ops.elementwise", "asgteach.autograd",
                               "asgteach.grad", "asgteach.vjp", "asgteach.jvp", "asgteach.hvp", "asgteach.ops.spec",
                               "asgteach.ops.REGISTRY", "asgteach.ops.lookup", "asgteach.ops.patched"}),
            names=_LIBRARY_RULES - {"grad"}, attrs=_LIBRARY_RULES),
}


def div_culprit(culprit_id: Any, culprit_input: Any, loss: Any, inputs: Sequence[Any],
                feeds: Mapping[Any, Any]) -> None:
    """Lesson 4: the node of ``loss``'s graph whose rule the planted bug breaks, and its input; a miss narrows."""
    graph = loss.graph
    (truth,) = mystery_report(4, loss, inputs, feeds).culprits
    if not isinstance(culprit_id, (int, np.integer)) or not 0 <= int(culprit_id) < len(graph.nodes):
        raise ExerciseError(f"culprit_id should be the id of a node of {graph.name!r} (0 to {len(graph.nodes) - 1}), "
                            f"got {culprit_id!r}")
    node = graph.nodes[int(culprit_id)]
    if node.id != truth.node_id:
        if node.op != truth.op:
            hint = (f"node #{node.id} is a {node.op}: run at.gradcheck on this graph inside bugs.mystery(4) and "
                    "read report.culprits")
        else:
            hint = (f"node #{node.id} is a {node.op} too, but its rule checks out here: what does the planted bug "
                    "need that this node's inputs do not have? (compare their shapes with its output's)")
        raise ExerciseError(f"culprit_id {node.id} is not the node whose rule is wrong. {hint}")
    if culprit_input != truth.input_index:
        raise ExerciseError(f"node #{node.id} is the culprit, but input {culprit_input!r} is not the one whose "
                            "gradient is off: which of its inputs was broadcast?")


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
