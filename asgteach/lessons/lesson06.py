"""Lesson 6 (nonlinearities and softmax): its exercises are checked in the notebook, its rules are here.

``my_log_softmax`` and ``cross_entropy_grad`` are compared with asgteach's own results on the lesson's
inputs and fresh ones (logits of 1000 included: a naive log-softmax's ``-inf`` gets the hint "subtract the
max first"), while asgteach's softmax is switched off (``without``). Exercise 3's ``dead_units(X, W, b)`` is a
diagnosis: :func:`dead_units_check` calls it on hidden layers of its own, each with a unit that tells a diagnosis
from a guess (one active on a single example, one dead with a positive bias, one alive with a bias of -4), and
compares with the units whose gradient asgteach finds to be zero, so a list read off a printout cannot pass.
``RULES`` says what the two numpy answers may not use: asgteach, or another library's log-softmax or gradient.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..grading.exercises import ExerciseError
from ..grading.rules import Rule, no_asgteach

__all__ = ["LESSON", "RULES", "dead_units_check"]

LESSON = "06-nonlinearities-and-softmax"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {
    1: no_asgteach("with numpy only (no other library's log_softmax)"),
    2: no_asgteach("with numpy only (no other library's gradient)"),
}


# --- exercise 3: which units are dead? ---------------------------------------------------------------------

def _layers(rng: np.random.Generator) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
    """Three hidden layers relu(X @ W + b) of the check's own, with the units that tell a diagnosis from a guess:
    one active on a single example (alive), one dead with a positive bias, one alive with a bias of -4."""
    layers = []
    # 1. Gaussian inputs; one unit fires on exactly one example, one never does
    n, d, u = int(rng.integers(30, 50)), 6, 10
    X, W = rng.standard_normal((n, d)), rng.standard_normal((d, u)) * 0.5
    b = rng.normal(-1.0, 1.5, size=u)
    one, never = rng.choice(u, size=2, replace=False)
    top = np.sort(X @ W[:, one])
    b[one] = -(top[-1] + top[-2]) / 2           # only the largest pre-activation stays above 0
    b[never] = -(X @ W[:, never]).max() - 0.5
    layers.append(("Gaussian inputs", X, W, b))
    # 2. inputs in [0, 1) (pixels): a unit with negative weights is dead although its bias is positive; a unit with
    #    a bias of -4 and large positive weights is alive
    n, d, u = int(rng.integers(40, 60)), 8, 9
    X, W = rng.uniform(0.05, 1.0, size=(n, d)), rng.standard_normal((d, u))
    b = rng.normal(0.0, 1.0, size=u)
    neg, big = rng.choice(u, size=2, replace=False)
    W[:, neg] = -np.abs(W[:, neg]) - 0.1
    b[neg] = -(X @ W[:, neg]).max() / 2          # > 0, and still every pre-activation is below 0
    W[:, big] = np.abs(W[:, big]) + 1.0
    b[big] = -4.0
    layers.append(("inputs in [0, 1)", X, W, b))
    # 3. no dead unit at all
    n, d, u = int(rng.integers(20, 30)), 4, 6
    X, W = rng.standard_normal((n, d)), rng.standard_normal((d, u))
    b = rng.normal(1.0, 0.3, size=u)
    layers.append(("no dead unit", X, W, b))
    return layers


def _dead_by_gradient(X: np.ndarray, W: np.ndarray, b: np.ndarray) -> list[int]:
    """The units whose weight and bias gradients of sum(relu(X @ W + b) ** 2) are zero, asked of asgteach."""
    import asgteach as at

    with at.Graph(name="check 3"):
        xc, wc, bc = at.input("x", X.shape), at.parameter("w", W.shape), at.parameter("b", b.shape)
        dw, db = at.grad(at.sum(at.relu(xc @ wc + bc) ** 2), [wc, bc])
    dw_v, db_v = at.run([dw, db], {xc: X, wc: W, bc: b})
    return [int(k) for k in np.flatnonzero(np.all(dw_v == 0, axis=0) & (db_v == 0))]


def dead_units_check(fn: Callable[[np.ndarray, np.ndarray, np.ndarray], Any]) -> None:
    """Exercise 3: ``fn(X, W, b)`` lists the dead units of relu(X @ W + b) on the batch X, on layers of the check's
    own (:func:`_layers`); a wrong list names the first unit it gets wrong and what that unit does on the batch."""
    from .common import call_answer, fresh

    if not callable(fn):
        raise ExerciseError(f"dead_units should be a function dead_units(X, W, b), got {type(fn).__name__}")
    for what, X, W, b in _layers(fresh()):
        expected = _dead_by_gradient(X, W, b)
        pre = X @ W + b
        assert expected == [int(k) for k in np.flatnonzero(np.all(pre <= 0, axis=0))]   # the same diagnosis
        call = f"dead_units(<X {X.shape}>, <W {W.shape}>, <b {b.shape}>) on {what}"
        got = call_answer(fn, call, X.copy(), W.copy(), b.copy())
        try:
            units = sorted(int(k) for k in got)
            ok = all(float(k) == int(k) for k in got)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise ExerciseError(f"{call} should return a list of unit numbers (ints), got {got!r:.80}")
        if units != expected:
            wrong = sorted(set(units) ^ set(expected))[0]
            active = int((pre[:, wrong] > 0).sum())
            if wrong in units:
                why = (f"unit {wrong} is active (pre-activation > 0) on {active} of {len(X)} examples, so relu passes "
                       f"the gradient there and its weights get a nonzero one: not dead")
            else:
                why = (f"unit {wrong} is active on none of the {len(X)} examples (its bias is {b[wrong]:+.2f}): no "
                       "gradient reaches its weights")
            raise ExerciseError(f"{call} returned {units}, which is wrong about unit {wrong}: {why}. Hint: a unit is "
                                "dead on a batch when relu' of its pre-activation is 0 for every row: its whole column "
                                "of dL/dW is 0. Decide from the batch, not from the bias alone or a share of rows")
    print("dead_units diagnosed three layers of the check's own (a unit alive on one example, a dead one with a "
          "positive bias, a layer with none)")
