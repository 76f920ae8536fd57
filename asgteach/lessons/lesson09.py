"""Lesson 9 (attention and a transformer block): its checks are in the notebook, here and in ``suspects``.

``causal_weights`` is compared with asgteach's masked softmax on the lesson's q, k and fresh ones, with the
softmax switched off; ``count_block_params`` by :func:`block_count_check` with the parameters of real blocks, whose
constructors are switched off while it runs (practice mode); and the verdict of exercise 3 by
:func:`asgteach.lessons.suspects.check_verdict` on attention implementations built afresh and handed over in a
random order. ``RULES[1]`` keeps the weights in numpy; ``RULES[2]`` keeps the count by hand, read from the answer's
source in both modes (in graded mode the function runs in the sandbox, where switching the judge's constructors off
does nothing).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..grading.checks import check_function, without
from ..grading.rules import STAND_INS, Rule, enforce, no_asgteach

__all__ = ["LESSON", "RULES", "block_count_check", "BLOCK_CONFIGS"]

LESSON = "09-attention-and-a-transformer-block"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {
    1: no_asgteach("with numpy only"),
    # a block (or its layers) can be built without the name `at`, from the lesson's own objects: type(block)(...),
    # block.__class__, block.__init__(...) on an existing one; counting its parameters reads .parameters()
    2: Rule(why="count by hand, from the description: not by building asgteach's blocks or layers and counting "
                "theirs (no at, no asgteach, no type(...), .__class__, .__init__ or .parameters() of the lesson's "
                "objects)",
            imports=STAND_INS | {"asgteach"}, names=frozenset({"at", "asgteach", "type", "examples"}),
            attrs=frozenset({"__class__", "__init__", "__new__", "parameters"})),
}

#: (d_model, n_heads, d_hidden) of the blocks exercise 2's check builds
BLOCK_CONFIGS = [(8, 2, 32), (8, 4, 32), (16, 1, 16), (64, 8, 256), (12, 3, 20), (24, 6, 40)]


def _real_count(d_model: int, n_heads: int, d_hidden: int) -> int:
    import asgteach as at

    with at.Graph(name="check: a block's parameters"):
        blk = at.nn.TransformerBlock(d_model, n_heads, d_hidden=d_hidden)
    return sum(int(np.prod(p.shape)) for p in blk.parameters())


def block_count_check(fn: Callable[[int, int, int], Any]) -> None:
    """``fn(d_model, n_heads, d_hidden)``: the number of learned numbers in ``at.nn.TransformerBlock``.

    Compared with the parameters of real blocks of several sizes (built first); the exercise's rule (by hand: no
    asgteach, no block or layer built another way) is read from ``fn``'s source, and in practice mode the
    constructors are also switched off while ``fn`` runs.
    """
    import asgteach as at

    enforce(fn, RULES[2], "count_block_params")
    cases = [(c, _real_count(*c)) for c in BLOCK_CONFIGS]
    with without(attrs=[(cls, "__init__") for cls in (at.nn.TransformerBlock, at.nn.MultiHeadAttention, at.nn.Linear,
                                                      at.nn.LayerNorm)], why="count from the description"):
        check_function(fn, cases, name="count_block_params")
