"""Lesson 1 (derivatives, numerically): its exercises are checked in the notebook itself.

``central_difference`` and ``numerical_gradient`` are called by ``check_function`` on functions and points
of every kind, ``numerical_gradient`` also on a function and a fresh point of the check's own (a gradient
written out for the lesson's ``f_test`` cannot pass) and must leave its input unchanged; the float32 step
of exercise 3 is compared with the one the check measures. The expected values are expressions anyone may
read, so the checks stay in view; the exercises ask for plain numpy anyway and need no source rule:
``RULES`` is empty.
"""

from __future__ import annotations

from ..grading.rules import Rule

__all__ = ["LESSON", "RULES"]

LESSON = "01-derivatives-numerically"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {}
