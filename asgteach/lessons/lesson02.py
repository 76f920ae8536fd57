"""Lesson 2 (the ASG): its exercises are checked in the notebook itself.

The graph of exercise 1 is compared op by op (``check_equal`` on its forward ops) and run at fresh inputs
(``check_tensor``); exercise 2's ``evaluate(graph, feeds)`` runs on a graph of the check's own as well as
the lesson's, with ``at.run`` and ``at.compile`` switched off (``without``) so that it must call each node's
kernel itself, and ``check_node_values`` names the first node whose value is wrong; exercise 3's fixed
graph is run at fresh inputs. The answers build asgteach graphs, so ``RULES`` is empty.
"""

from __future__ import annotations

from ..grading.rules import Rule

__all__ = ["LESSON", "RULES"]

LESSON = "02-the-asg"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {}
