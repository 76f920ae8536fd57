"""Three attention implementations, two of them wrong, for lesson 9's bug hunt.

Unlike :mod:`asgteach.lessons.bugs`, these bugs are in the *forward* computation: the
graph is built wrongly, so its gradients are the right gradients of the wrong function and
``gradcheck`` passes. What finds them is a reference (attention computed by hand in numpy)
and two properties every attention must have: each query's weights sum to 1, and a masked
key gets weight 0. The graph view helps too: compare the suspects' nodes with the formula.

The lesson calls ``attention(n, q, k, v, mask)`` without saying which suspect is which. Its
exercise asks for that evidence as a function, ``verdict(attention, q, k, mask)``, and
:func:`check_verdict` calls it on implementations of its own, built afresh here (each kind
of :data:`VERDICTS`, in a random order, on inputs the lesson never used), so a verdict read
off section 7's output and typed in cannot pass. (Reading this file gives the answer away:
try the lesson first.)

* one suspect forgets the ``1/sqrt(d)`` scale of the scores: its weights still sum to 1 and
  respect the mask, but they are too sharp (the softmax of scores ``sqrt(d)`` times too large);
* one applies the mask *after* the softmax (multiplying the weights by 0/1): masked keys get
  weight 0, but the rows no longer sum to 1 — the weight the masked keys had is lost;
* one is correct.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from .. import ops
from ..ops.leaves import constant
from ..tensor import Tensor
from ..grading.exercises import ExerciseError

__all__ = ["VERDICTS", "attention", "check_verdict"]

#: the verdicts a student can give an attention implementation
VERDICTS = ("correct", "no scale", "mask after softmax")

#: suspect number -> what is wrong with it
_TRUTH = {1: "mask after softmax", 2: "correct", 3: "no scale"}


def _attention(kind: str, q: Tensor, k: Tensor, v: Tensor, mask: np.ndarray | None, style: int = 0,
               named: bool = True) -> Tensor:
    """Attention of one ``kind`` of :data:`VERDICTS`; ``style`` is where the scale sits (the same numbers):
    0 multiplies the scores, 1 multiplies q before the product, 2 divides the scores."""
    d = q.shape[-1]
    k_t = ops.transpose(k, tuple(range(k.ndim - 2)) + (k.ndim - 1, k.ndim - 2))
    if kind == "no scale":
        scores = q @ k_t
    elif style == 1:
        scores = (q * (1.0 / math.sqrt(d))) @ k_t
    elif style == 2:
        scores = (q @ k_t) / math.sqrt(d)
    else:
        scores = (q @ k_t) * (1.0 / math.sqrt(d))
    if mask is not None and kind != "mask after softmax":
        scores = scores + constant(np.asarray(mask, dtype=np.float64), name="mask" if named else None)
    weights = ops.softmax(scores, axis=-1)
    if mask is not None and kind == "mask after softmax":
        keep = (np.asarray(mask) == 0).astype(np.float64)
        weights = weights * constant(keep, name="keep" if named else None)
    return weights @ v


def attention(suspect: int, q: Tensor, k: Tensor, v: Tensor, mask: np.ndarray | None = None) -> Tensor:
    """Suspect ``suspect`` (1, 2 or 3): softmax(q k^T / sqrt(d) + mask) v, or a wrong version of it.

    ``q``, ``k``, ``v`` have shape (..., T, d); ``mask`` is an additive (T, T) array
    (0 where a query may look, -1e9 where it may not), as ``at.nn.causal_mask(T)`` makes.
    """
    if suspect not in _TRUTH:
        raise ValueError(f"there are three suspects: 1, 2 and 3, not {suspect!r}")
    return _attention(_TRUTH[suspect], q, k, v, mask)


def _implementation(kind: str, style: int) -> Callable[..., Tensor]:
    """A fresh attention of ``kind``, called as the lesson's suspects are: ``attention(q, k, v, mask)``."""
    def attention(q: Tensor, k: Tensor, v: Tensor, mask: np.ndarray | None = None) -> Tensor:
        return _attention(kind, q, k, v, mask, style=style, named=False)
    return attention


def _weights_np(kind: str, q: np.ndarray, k: np.ndarray, mask: np.ndarray) -> np.ndarray:
    scores = q @ np.swapaxes(k, -1, -2)
    if kind != "no scale":
        scores = scores / math.sqrt(q.shape[-1])
    if kind != "mask after softmax":
        scores = scores + mask
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    return w * (mask == 0) if kind == "mask after softmax" else w


def _cases(rng: np.random.Generator) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
    """Inputs section 7 never used: other sizes and head dimensions, a padding mask, a batch axis in front."""
    def causal(t: int) -> np.ndarray:
        return np.triu(np.full((t, t), -1e9), k=1)

    t1, d1 = int(rng.integers(5, 8)), int(rng.choice([16, 32]))
    t2, d2 = 6, 4
    real = int(rng.integers(3, t2))                       # keys real..t2-1 are padding
    padding = np.where(np.arange(t2)[None, :] < real, 0.0, -1e9) * np.ones((t2, 1))
    b3, t3, d3 = 2, 3, int(rng.choice([8, 12]))
    return [
        ("a causal mask", rng.standard_normal((t1, d1)), rng.standard_normal((t1, d1)), causal(t1)),
        ("a padding mask", rng.standard_normal((t2, d2)), rng.standard_normal((t2, d2)), padding),
        ("a batch axis and a causal mask", rng.standard_normal((b3, t3, d3)), rng.standard_normal((b3, t3, d3)),
         causal(t3)),
    ]


def _separated(q: np.ndarray, k: np.ndarray, mask: np.ndarray) -> bool:
    """Do the three kinds give clearly different weights on this case (rows that clearly lose weight too)?"""
    w = {kind: _weights_np(kind, q, k, mask) for kind in VERDICTS}
    return (np.abs(w["no scale"] - w["correct"]).max() > 1e-2
            and np.abs(w["mask after softmax"].sum(axis=-1) - 1.0).max() > 1e-2)


#: what the verdict a student GAVE predicts: a test that refutes it, never the true verdict
_PREDICTS = {
    "correct": "a correct attention matches the numpy reference (with the scale and the mask) to round-off: "
               "does this one?",
    "no scale": "a missing 1/sqrt(d) gives rows that sum to 1 and 0 on masked keys, and matches the reference "
                "computed WITHOUT the scale: does this one?",
    "mask after softmax": "a mask applied after the softmax leaves 0 on masked keys but rows that no longer sum "
                          "to 1: do this one's rows?",
}


def check_verdict(verdict: Callable[..., Any]) -> None:
    """Lesson 9's bug hunt: ``verdict(attention, q, k, mask)`` names each attention of the check's own.

    Every kind of :data:`VERDICTS` is built afresh (not the lesson's suspects; the scale written in
    one of three places), once for each of three cases the lesson never used (other sizes and head
    dimensions, a padding mask, q and k with a batch axis in front), and the nine are handed to
    ``verdict`` in a random order. ``attention(q, k, v, mask)`` takes Tensors q, k, v of shape
    (..., T, d) and an additive (T, T) numpy mask; ``q``, ``k`` and ``mask`` are numpy arrays. A
    wrong verdict gets a hint that tests the verdict given, never the true one.
    """
    if not callable(verdict):
        raise ExerciseError(f"verdict should be a function verdict(attention, q, k, mask), got "
                            f"{type(verdict).__name__}")
    rng = np.random.default_rng()
    cases = _cases(rng)
    while not all(_separated(q, k, m) for _, q, k, m in cases):   # (random inputs: almost never repeats)
        cases = _cases(rng)
    trials = [(case, kind, int(rng.integers(0, 3))) for case in cases for kind in VERDICTS]
    order = rng.permutation(len(trials))
    for number, i in enumerate(order, start=1):
        (what, q, k, mask), kind, style = trials[int(i)]
        call = (f"verdict(<attention #{number} of {len(trials)}>, q {q.shape}, k {k.shape}, mask {mask.shape}) "
                f"(the check's own implementation, on {what})")
        try:
            got = verdict(_implementation(kind, style), q.copy(), k.copy(), mask.copy())
        except (ExerciseError, NotImplementedError):
            raise
        except Exception as e:  # noqa: BLE001 - the student's function failing is a finding
            hint = (" q and k may have a batch axis in front, (B, T, d): swap their last two axes "
                    "(np.swapaxes(k, -1, -2)) rather than k.T, and take T and d from the end of the shape."
                    if q.ndim > 2 else "")
            raise ExerciseError(f"{call} raised {type(e).__name__}: {e}.{hint}") from e
        if not isinstance(got, str) or got not in VERDICTS:
            raise ExerciseError(f"{call} should return one of {VERDICTS}, got {got!r:.80}")
        if got != kind:
            raise ExerciseError(f"{call} returned {got!r}, but that attention is not {got!r}. Test the verdict "
                                f"you gave: {_PREDICTS[got]} (run it with v = identity on the same q, k and mask as "
                                "the reference, and compare)")
