"""Three attention implementations, two of them wrong, for lesson 9's bug hunt.

Unlike :mod:`asgteach.lessons.bugs`, these bugs are in the *forward* computation: the
graph is built wrongly, so its gradients are the right gradients of the wrong function and
``gradcheck`` passes. What finds them is a reference (attention computed by hand in numpy)
and two properties every attention must have: each query's weights sum to 1, and a masked
key gets weight 0. The graph view helps too: compare the suspects' nodes with the formula.

The lesson calls ``attention(k, q, key, v, mask)`` without saying which suspect is which;
:func:`check_diagnosis` checks the student's verdicts. (Reading this file gives the answer
away: try the lesson first.)

* one suspect forgets the ``1/sqrt(d)`` scale of the scores: its weights still sum to 1 and
  respect the mask, but they are too sharp (the softmax of scores ``sqrt(d)`` times too large);
* one applies the mask *after* the softmax (multiplying the weights by 0/1): masked keys get
  weight 0, but the rows no longer sum to 1 — the weight the masked keys had is lost;
* one is correct.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import ops
from ..ops.leaves import constant
from ..tensor import Tensor
from .exercises import ExerciseError

__all__ = ["VERDICTS", "attention", "check_diagnosis"]

#: the verdicts a student can give a suspect
VERDICTS = ("correct", "no scale", "mask after softmax")

#: suspect number -> what is wrong with it
_TRUTH = {1: "mask after softmax", 2: "correct", 3: "no scale"}


def _scores(q: Tensor, k: Tensor, scaled: bool) -> Tensor:
    axes = tuple(range(k.ndim - 2)) + (k.ndim - 1, k.ndim - 2)
    scores = q @ ops.transpose(k, axes)
    return scores * (1.0 / math.sqrt(q.shape[-1])) if scaled else scores


def attention(suspect: int, q: Tensor, k: Tensor, v: Tensor, mask: np.ndarray | None = None) -> Tensor:
    """Suspect ``suspect`` (1, 2 or 3): softmax(q k^T / sqrt(d) + mask) v, or a wrong version of it.

    ``q``, ``k``, ``v`` have shape (..., T, d); ``mask`` is an additive (T, T) array
    (0 where a query may look, -1e9 where it may not), as ``at.nn.causal_mask(T)`` makes.
    """
    if suspect not in _TRUTH:
        raise ValueError(f"there are three suspects: 1, 2 and 3, not {suspect!r}")
    verdict = _TRUTH[suspect]
    scores = _scores(q, k, scaled=verdict != "no scale")
    if mask is not None and verdict != "mask after softmax":
        scores = scores + constant(np.asarray(mask, dtype=np.float64), name="mask")
    weights = ops.softmax(scores, axis=-1)
    if mask is not None and verdict == "mask after softmax":
        keep = (np.asarray(mask) == 0).astype(np.float64)
        weights = weights * constant(keep, name="keep")
    return weights @ v


def check_diagnosis(diagnosis: Any) -> None:
    """Check the verdicts ``{1: ..., 2: ..., 3: ...}`` (each one of :data:`VERDICTS`)."""
    if not isinstance(diagnosis, dict):
        raise ExerciseError(f"diagnosis should be a dict {{1: verdict, 2: verdict, 3: verdict}}, "
                            f"got {type(diagnosis).__name__}")
    if sorted(diagnosis) != [1, 2, 3]:
        raise ExerciseError(f"diagnosis should have the keys 1, 2 and 3 (one verdict per suspect), "
                            f"got {sorted(diagnosis, key=str)}")
    for k in (1, 2, 3):
        got = diagnosis[k]
        if got not in VERDICTS:
            raise ExerciseError(f"the verdict for suspect {k} should be one of {VERDICTS}, got {got!r}")
    # what the verdict the student GAVE predicts: a test that refutes it, never the true verdict
    predicts = {
        "correct": "a correct attention matches the numpy reference (with the scale and the mask) to round-off: "
                   "does this one?",
        "no scale": "a missing 1/sqrt(d) gives rows that sum to 1 and 0 on masked keys, and matches the reference "
                    "computed WITHOUT the scale: does this one?",
        "mask after softmax": "a mask applied after the softmax leaves 0 on masked keys but rows that no longer sum "
                              "to 1: do this one's rows?",
    }
    for k in (1, 2, 3):
        if diagnosis[k] != _TRUTH[k]:
            raise ExerciseError(f"suspect {k} is not {diagnosis[k]!r}. Test the verdict you gave: "
                                f"{predicts[diagnosis[k]]} (run it on the same q, k, v = identity and mask as the "
                                "reference, and compare)")
