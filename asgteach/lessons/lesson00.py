"""Lesson 0 (welcome): its two exercises ask for a function, which the checks here call on cases of their own.

* Exercise 1, ``grad_is_right(candidate)``: is a hand-written ``dy/dw`` of section 2's graph right? A diagnosis:
  :func:`grad_is_right_check` hands it candidates of its own (right ones in two forms; one that forgets the relu,
  right wherever every pre-activation is positive; one without the factor 2; one without the bias; one that
  returns section 4's printed ``dy/dw`` whatever it is given, right at section 3's point only), in a random
  order, and compares each verdict with the truth. A verdict typed in cannot pass (there is none to type: the
  candidates are the check's), and a function that compares at section 3's ``X`` and ``W`` only says True for
  the copied numbers. The candidates are plain functions of numpy arrays, so in graded mode the submission
  calls them through the judge's handle and gets arrays back.
* Exercise 2, ``bias_grad(dz)``: the gradient of a bias broadcast over the rows of a batch, given
  ``dy/dz``. :func:`bias_grad_check` builds ``y = sum(relu(x @ w + c) ** 2)`` at batch sizes and widths the
  lesson never used (one row included), asks ``at.grad`` for ``dy/dc`` and compares.

Nothing here is secret and either answer may use asgteach (exercise 2 can be answered with a graph of its own,
which needs the same idea): ``RULES`` is empty.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..grading.checks import check_array
from ..grading.exercises import ExerciseError
from ..grading.rules import Rule
from .common import call_answer, fresh

__all__ = ["LESSON", "RULES", "grad_is_right_check", "bias_grad_check"]

LESSON = "00-welcome"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {}


# --- exercise 1: is a hand-written dy/dw right? ----------------------------------------------------------

def _lesson_point() -> tuple[np.ndarray, np.ndarray]:
    """Section 3's X (4, 3) and W (3, 2), drawn as the notebook draws them."""
    rng = np.random.default_rng(0)
    return rng.standard_normal((4, 3)), rng.standard_normal((3, 2))


def _dw(X: np.ndarray, W: np.ndarray) -> np.ndarray:
    """dy/dw of y = sum(relu(X @ W + 1) ** 2): X^T (2 relu(z))."""
    return X.T @ (2 * np.maximum(X @ W + 1.0, 0.0))


def _candidates() -> list[tuple[str, bool, Callable[[np.ndarray, np.ndarray], np.ndarray], str]]:
    """(what it is, is it right, the candidate, what to test when a verdict on it is wrong)."""
    X0, W0 = _lesson_point()
    printed = _dw(X0, W0)                     # section 4's printed dy/dw, typed in

    def by_einsum(X: np.ndarray, W: np.ndarray) -> np.ndarray:
        z = np.asarray(X) @ np.asarray(W) + 1.0
        return np.einsum("ni,nk->ik", X, np.where(z > 0, 2.0 * z, 0.0))

    def no_relu(X: np.ndarray, W: np.ndarray) -> np.ndarray:
        return np.asarray(X).T @ (2 * (np.asarray(X) @ np.asarray(W) + 1.0))

    def no_two(X: np.ndarray, W: np.ndarray) -> np.ndarray:
        return np.asarray(X).T @ np.maximum(np.asarray(X) @ np.asarray(W) + 1.0, 0.0)

    def no_bias(X: np.ndarray, W: np.ndarray) -> np.ndarray:
        return np.asarray(X).T @ (2 * np.maximum(np.asarray(X) @ np.asarray(W), 0.0))

    def copied(X: np.ndarray, W: np.ndarray) -> np.ndarray:
        return printed.copy()

    def hand(X: np.ndarray, W: np.ndarray) -> np.ndarray:
        return _dw(np.asarray(X, dtype=np.float64), np.asarray(W, dtype=np.float64))

    compare = ("compare the candidate with dw run at the same point, with a tolerance (np.allclose): two right "
               "formulas differ in the last digits")
    return [
        ("section 4's formula, X.T @ (2 relu(z))", True, hand, compare),
        ("the same gradient written with einsum and np.where", True, by_einsum, compare),
        ("a formula that forgets the relu (2 z instead of 2 relu(z))", False, no_relu,
         "it is right wherever every pre-activation z = x @ w + 1 is positive, wrong where one is negative: "
         "test at several random points of your own, not at one"),
        ("a formula without the factor 2 of the square", False, no_two,
         "it is off by a factor of 2 everywhere: compare the values, not only the shapes"),
        ("a formula that forgets the bias (z = x @ w)", False, no_bias,
         "it differs wherever x @ w + 1 and x @ w give different relus: compare the values at fresh points"),
        ("section 4's printed dy/dw, returned whatever X and W are", False, copied,
         "it is right at section 3's X and W and nowhere else: a copied number. Test at points of your own "
         "(draw X and W at random and run dw there), not at the lesson's"),
    ]


def grad_is_right_check(fn: Callable[[Callable[..., Any]], Any]) -> None:
    """Exercise 1: ``fn(candidate)`` says whether ``candidate(X, W)`` is section 2's dy/dw for every X (4, 3) and
    W (3, 2). Called on the candidates of :func:`_candidates` in a random order; a wrong verdict names the
    candidate and what would have told it apart, never the check's points."""
    if not callable(fn):
        raise ExerciseError(f"grad_is_right should be a function grad_is_right(candidate), got {type(fn).__name__}")
    trials = _candidates()
    order = fresh().permutation(len(trials))
    for number, i in enumerate(order, start=1):
        what, right, candidate, test = trials[int(i)]
        call = f"grad_is_right(<candidate #{number} of {len(trials)}>)"
        got = call_answer(fn, call, candidate)
        if not isinstance(got, (bool, np.bool_)):
            raise ExerciseError(f"{call} should return True or False, got {got!r:.80}")
        if bool(got) != right:
            raise ExerciseError(f"{call} returned {bool(got)}, but that candidate is {what}: it is "
                                f"{'right' if right else 'wrong'}. Hint: {test}.")
    print(f"grad_is_right told {sum(r for _, r, _, _ in trials)} right candidates from "
          f"{sum(not r for _, r, _, _ in trials)} wrong ones (the check's own, in a random order)")


# --- exercise 2: the gradient of a broadcast bias -------------------------------------------------------

def bias_grad_check(fn: Callable[[np.ndarray], Any]) -> None:
    """Exercise 2: ``fn(dz)`` is dy/dc for ``z = x @ w + c`` with ``c`` of shape (K,) broadcast over the N rows,
    given dy/dz of shape (N, K); compared with ``at.grad`` on ``y = sum(relu(x @ w + c) ** 2)`` at sizes the lesson
    never used (a single row included)."""
    import asgteach as at

    if not callable(fn):
        raise ExerciseError(f"bias_grad should be a function bias_grad(dz), got {type(fn).__name__}")
    rng = fresh()
    sizes = [(int(rng.integers(5, 9)), 3, 2), (1, 4, 5), (int(rng.integers(20, 40)), 6, 3)]
    for n, d, k in sizes:
        with at.Graph(name="check 2"):
            xc, wc, cc = at.input("x", (n, d)), at.parameter("w", (d, k)), at.parameter("c", (k,))
            (dc,) = at.grad(at.sum(at.relu(xc @ wc + cc) ** 2), [cc])
        while True:                           # a column the relu shut entirely has dy/dc = 0, which any
            X, W, c = rng.standard_normal((n, d)), rng.standard_normal((d, k)), rng.standard_normal(k)
            expected = at.run(dc, {xc: X, wc: W, cc: c})
            if np.all(np.abs(expected) > 1e-3):   # answer (a mean, zeros) would match there: draw again
                break
        dz = 2 * np.maximum(X @ W + c, 0.0)
        call = f"bias_grad(<dz of shape {dz.shape}>)"
        got = call_answer(fn, call, dz.copy())
        try:
            arr = np.asarray(got, dtype=np.float64)
        except (TypeError, ValueError):
            arr = None                        # check_array says what it is
        if (arr is not None and arr.shape == (k,) and n > 1 and not np.allclose(arr, expected, rtol=1e-9, atol=1e-12)
                and np.allclose(arr * n, expected, rtol=1e-9, atol=1e-12)):
            raise ExerciseError(f"{call} is the MEAN over the rows, {n} times too small: each of the {n} rows "
                                "adds its own contribution to every entry of c, and contributions add up")
        check_array(got, expected, name=call, rtol=1e-9, atol=1e-12)
    print(f"bias_grad agrees with at.grad on {len(sizes)} batches of the check's own (one of them a single row)")
