"""Lesson 9 (attention and a transformer block): its checks are in the notebook and in ``suspects``.

``causal_weights`` is compared with asgteach's masked softmax on the lesson's q, k and fresh ones, with the
softmax switched off; ``count_block_params`` with the parameters of real blocks, whose constructors are
switched off while it runs; and the verdict of exercise 3 by :func:`asgteach.lessons.suspects.check_verdict`
on attention implementations built afresh and handed over in a random order. ``RULES[1]`` keeps the
weights in numpy.
"""

from __future__ import annotations

from ..grading.rules import Rule, no_asgteach

__all__ = ["LESSON", "RULES"]

LESSON = "09-attention-and-a-transformer-block"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {
    1: no_asgteach("with numpy only"),
}
