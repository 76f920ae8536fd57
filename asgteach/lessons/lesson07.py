"""Lesson 7 (normalisation): its exercises are checked in the notebook, its rules are here.

``my_layer_norm`` and ``my_layer_norm_dx`` are compared with asgteach's ``layer_norm`` and its gradient on
the lesson's inputs and others (another eps, a constant row), with ``at.layer_norm`` switched off while the
student's function runs; exercise 3's ``my_batch_norm`` is a graph of small ops, run and gradient-checked.
``RULES`` keeps exercises 1 and 2 in numpy (the formula of section 3 is the work).
"""

from __future__ import annotations

from ..grading.rules import Rule, no_asgteach

__all__ = ["LESSON", "RULES"]

LESSON = "07-normalisation"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {
    1: no_asgteach("with numpy only"),
    2: no_asgteach("the formula of section 3, with numpy only"),
}
