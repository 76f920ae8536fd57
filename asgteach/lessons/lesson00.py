"""Lesson 0 (welcome): its two exercises are checked in the notebook itself.

Both ask for a gradient built with ``at.grad`` and its value. The check cells compare them with
``check_tensor(..., backward=True)``, which runs the student's gradient node at fresh inputs too (not only
at the lesson's ``A``), so a value computed elsewhere and typed in fails, and ``check_array`` on the value.
Nothing here is secret, so the checks stay in view, and the answers may use asgteach: ``RULES`` is empty.
"""

from __future__ import annotations

from ..grading.rules import Rule

__all__ = ["LESSON", "RULES"]

LESSON = "00-welcome"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {}
