"""Lesson 6 (nonlinearities and softmax): its exercises are checked in the notebook, its rules are here.

``my_log_softmax`` and ``cross_entropy_grad`` are compared with asgteach's own results on the lesson's
inputs and fresh ones (logits of 1000 included: a naive log-softmax's ``-inf`` gets the hint "subtract the
max first"), while asgteach's softmax is switched off (``without``); the dead units of exercise 3 are
recomputed from the batch. ``RULES`` says what the two numpy answers may not use: asgteach, or another
library's log-softmax or gradient.
"""

from __future__ import annotations

from ..grading.rules import Rule, no_asgteach

__all__ = ["LESSON", "RULES"]

LESSON = "06-nonlinearities-and-softmax"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {
    1: no_asgteach("with numpy only (no other library's log_softmax)"),
    2: no_asgteach("with numpy only (no other library's gradient)"),
}
