"""Lesson 2's checks (the ASG): mostly in the notebook itself.

The graph of exercise 1 is compared op by op (``check_equal`` on its forward ops) and run at fresh inputs
(``check_tensor``); exercise 3's fixed graph is run at fresh inputs. Exercise 2's ``evaluate(graph, feeds)``
is checked here, by :func:`evaluate_check`: it runs on the lesson's graph and on one of the check's own, and
``check_node_values`` names the first node whose value is wrong.

What exercise 2 must not do is let the library run the graph for it (``at.run``, ``at.compile``, a backend,
a plan): the numbers would be right, and the exercise skipped. Two guards say so:

* ``RULES[2]``, read from the answer's source (by the judge of a graded course, and by :func:`evaluate_check`
  in a student's kernel): no name or attribute that reaches a whole-graph evaluator;
* ``without`` switches ``at.run`` and ``at.compile`` off, and watches their code, while ``evaluate`` runs: that
  also catches them held under another name (``go = at.run`` in another cell, which the rule of this exercise
  does not read). It runs where ``evaluate`` runs (:func:`submission_evaluate`, fetched with
  ``on_submission_side``): in a graded course in the sandbox, whose library is the one ``evaluate`` would call
  (a ``without`` in the judge would switch off the judge's own library, which the answer never reaches). What
  the sandbox says there can only fail the exercise, never pass it: the values are compared in the check's process.

Exercises 1 and 3 build asgteach graphs: they have no rule.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from ..grading import rules
from ..grading.checks import check_node_values, without
from ..grading.exercises import on_submission_side
from ..grading.rules import Rule

__all__ = ["LESSON", "RULES", "evaluate_check"]

LESSON = "02-the-asg"

#: what runs a whole graph at once: asgteach's run and compile, the backends (their run, compile, interpret,
#: plans), and the tools built on them (a Trainer's run, gradcheck's plans, the widget's values)
_WHOLE_GRAPH = frozenset({
    "run", "compile", "get_backend", "backends", "interpret", "Plan", "cached_plans", "gradcheck", "Trainer",
    "show", "widgets", "opcheck", "demo", "examples", "cells", "nn",
})

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {
    2: Rule(why="evaluate must call each node's kernel itself (at.ops.spec(node.op).numpy, node by node): at.run, "
                "at.compile and the backends run the whole graph for you, and running it is the exercise",
            imports=frozenset(f"asgteach.{m}" for m in ("backends", "nn", "gradcheck", "widgets", "opcheck", "demo",
                                                        "examples", "cells", "session")),
            names=_WHOLE_GRAPH, attrs=_WHOLE_GRAPH),
}


def submission_evaluate(evaluate: Callable[[Any, Mapping[str, Any]], Any], graph: Any,
                        feeds: Mapping[str, Any]) -> Any:
    """``evaluate(graph, feeds)`` where the student's code runs, with ``at.run`` and ``at.compile`` switched off and
    watched (``without``): a call into either fails with ExerciseError. The check fetches this function with
    ``on_submission_side``, and compares what it returns itself."""
    import asgteach as at

    with without(attrs=[(at, "run"), (at, "compile")], why="evaluate must call each node's kernel itself"):
        return evaluate(graph, feeds)


def evaluate_check(evaluate: Callable[[Any, Mapping[str, Any]], Any],
                   cases: Sequence[tuple[Any, Mapping[str, Any]]]) -> None:
    """Exercise 2: ``evaluate(graph, feeds)`` gives every node's value, for each ``(graph, feeds)`` of ``cases``.

    Its source first (``RULES[2]``: no whole-graph evaluator), then each graph, with ``at.run`` and
    ``at.compile`` switched off where ``evaluate`` runs (:func:`submission_evaluate`), and every node's value
    against the numpy backend's (``check_node_values``).
    """
    rules.enforce(evaluate, RULES[2], "evaluate")
    run_there = on_submission_side(f"{__name__}.submission_evaluate")
    for graph, feeds in cases:
        values = run_there(evaluate, graph, feeds)
        check_node_values(values, graph, feeds)
