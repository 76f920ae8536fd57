"""Lesson 5's checks (matrix calculus), with the bug hunt's truth kept inside them.

* Exercises 1 and 2, ``matmul_vjp`` and ``batched_matmul_vjp``: checked in the notebook
  (``check_function`` on fresh matrices); ``RULES`` keeps them numpy only, the two products by hand.
* Exercise 3, the bug hunt: :func:`sub_diagnosis` asks gradcheck itself, inside ``bugs.mystery(5)``,
  which inputs get a wrong gradient and which nodes' rules it blames, and compares the student's lists
  with that; a wrong list is told how many are missing or which are right after all, never the answer.

This file gives the answers away: try the lesson first.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..grading.exercises import ExerciseError
from ..grading.rules import Rule, no_asgteach
from .common import mystery_report

__all__ = ["LESSON", "RULES", "sub_diagnosis"]

LESSON = "05-matrix-calculus"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {
    1: no_asgteach("the two products by hand, in numpy"),
    2: no_asgteach("the two products by hand, in numpy"),
}


def sub_diagnosis(wrong_gradients: Any, culprit_ids: Any, loss: Any, inputs: Sequence[Any],
                  feeds: Mapping[Any, Any]) -> None:
    """Lesson 5: which inputs get a wrong gradient under the planted bug, and which nodes' rules gradcheck blames."""
    report = mystery_report(5, loss, inputs, feeds)
    wrong = sorted(c.name for c in report.inputs if not c.ok)
    if not isinstance(wrong_gradients, (list, tuple, set)) or not all(isinstance(w, str) for w in wrong_gradients):
        raise ExerciseError(f"wrong_gradients should be a list of input names, got {wrong_gradients!r:.80}")
    got = sorted(wrong_gradients)
    if got != wrong:
        missing, extra = sorted(set(wrong) - set(got)), sorted(set(got) - set(wrong))
        parts = []
        if missing:
            parts.append(f"{len(missing)} input(s) with a wrong gradient are missing")
        if extra:
            parts.append(f"{', '.join(extra)} {'gets' if len(extra) == 1 else 'get'} a right gradient")
        raise ExerciseError(f"wrong_gradients is not right: {'; '.join(parts)}. Gradient-check every input of the "
                            "graph inside bugs.mystery(5) and read report.inputs")
    blamed = sorted(c.node_id for c in report.culprits)
    if not isinstance(culprit_ids, (list, tuple, set)):
        raise ExerciseError(f"culprit_ids should be a list of node ids, got {culprit_ids!r:.80}")
    ids = sorted(int(i) for i in culprit_ids)
    if ids != blamed:
        ops = sorted({loss.graph.nodes[i].op for i in ids if 0 <= i < len(loss.graph.nodes)})
        raise ExerciseError(f"culprit_ids {ids} are not the nodes whose rule is wrong ({len(blamed)} node(s) are; "
                            f"you named {', '.join(ops) or 'no'} node(s)). Read report.culprits")
