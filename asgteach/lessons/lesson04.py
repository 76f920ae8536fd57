"""Lesson 4's checks (broadcasting), with the bug hunt's truth kept inside them.

* Exercise 1, ``my_sum_to(g, shape)``: checked in the notebook (``check_function`` on shapes of every
  kind); ``RULES[1]`` keeps it numpy only, since the reduction is the exercise.
* Exercise 2, the bug hunt: :func:`div_culprit` asks gradcheck itself, inside ``bugs.mystery(4)``, which
  node's rule the planted bug breaks and which input gets the wrong gradient, and compares the student's
  ``culprit_id`` and ``culprit_input`` with that; a wrong node gets a hint that narrows the search (what
  to run, what to compare), never the answer.
* Exercise 3, ``fixed_div_vjp``: checked in the notebook by ``check_vjp_rule`` on broadcast shapes.

This file gives the answers away: try the lesson first.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ..grading.exercises import ExerciseError
from ..grading.rules import Rule, no_asgteach
from .common import mystery_report

__all__ = ["LESSON", "RULES", "div_culprit"]

LESSON = "04-broadcasting"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {
    1: no_asgteach("numpy only: the reduction is the exercise"),
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
