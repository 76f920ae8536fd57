"""Lesson 10's checks for the softmax Jacobian (exercise 4) and a JVP by transposition (exercise 5).

Each check passes on a right answer and, on a wrong or borrowed one, fails with a message that says
what is wrong: the library's autodiff called, a finite-difference approximation, a wrong shape, a
Jacobian built row by row instead of by the trick.
"""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at
from asgteach.lessons import ExerciseError, lesson10


# --- exercise 4: softmax's Jacobian from y alone ----------------------------------------------------

def softmax_jacobian(y: np.ndarray) -> np.ndarray:
    return y[..., :, None] * np.eye(y.shape[-1]) - y[..., :, None] * y[..., None, :]


def test_softmax_jacobian_passes_on_the_formula() -> None:
    lesson10.softmax_jacobian_check(softmax_jacobian)


def test_softmax_jacobian_by_the_library_is_refused() -> None:
    def by_jvp(y: np.ndarray) -> np.ndarray:
        with at.Graph():
            z = at.input("z", y.shape)
            t = at.input("t", y.shape)
            jt = at.jvp(at.softmax(z), z, t)
        return np.stack([at.run(jt, {z: np.log(y), t: e}) for e in np.eye(y.size)], axis=1)

    with pytest.raises(ExerciseError, match="which the exercise asks you to write yourself"):
        lesson10.softmax_jacobian_check(by_jvp)

    def by_grad_of_own_softmax(y: np.ndarray) -> np.ndarray:
        with at.Graph():
            z = at.input("z", y.shape)
            e = at.exp(z)
            rows = [at.grad(at.sum((e / at.sum(e)) * at.constant(u)), z) for u in np.eye(y.size)]
        return np.stack(at.run(rows, {z: np.log(y)}))

    # the exercise's rule (numpy only) reads `at.` in the function's source before anything runs
    with pytest.raises(ExerciseError, match="line 2: uses at, which this exercise does not allow"):
        lesson10.softmax_jacobian_check(by_grad_of_own_softmax)


def test_softmax_jacobian_by_finite_differences_is_named() -> None:
    def by_differences(y: np.ndarray) -> np.ndarray:
        z, h = np.log(y), 1e-6

        def soft(v: np.ndarray) -> np.ndarray:
            return np.exp(v) / np.exp(v).sum()

        return np.stack([(soft(z + h * e) - soft(z - h * e)) / (2 * h) for e in np.eye(y.size)], axis=1)

    with pytest.raises(ExerciseError, match="finite differences give"):
        lesson10.softmax_jacobian_check(by_differences)


def test_softmax_jacobian_for_one_row_only_gets_the_batch_hint() -> None:
    def one_row(y: np.ndarray) -> np.ndarray:
        y = np.asarray(y).reshape(-1)[: y.shape[-1]]
        return np.diag(y) - np.outer(y, y)

    with pytest.raises(ExerciseError, match="a batch of rows .* one n x n Jacobian per row"):
        lesson10.softmax_jacobian_check(one_row)


# --- exercise 5: J t from the VJP graph --------------------------------------------------------------

def by_transposition(y: at.Tensor, x: at.Tensor, t: at.Tensor) -> at.Tensor:
    u = at.input("u", y.shape)
    vjp = at.grad(y, x, seed=u)
    return at.grad(at.sum(vjp * t), u)


def test_jvp_by_transposition_passes_on_the_trick() -> None:
    lesson10.jvp_by_transposition_check(by_transposition)


def test_jvp_by_transposition_refuses_at_jvp() -> None:
    with pytest.raises(ExerciseError, match=r"calls asgteach\.jvp"):
        lesson10.jvp_by_transposition_check(lambda y, x, t: at.jvp(y, x, t))


def test_jvp_by_transposition_names_the_vjp_shape() -> None:
    def the_vjp_itself(y: at.Tensor, x: at.Tensor, t: at.Tensor) -> at.Tensor:
        return at.grad(y, x, seed=at.input("u", y.shape))

    with pytest.raises(ExerciseError, match="that is x's shape"):
        lesson10.jvp_by_transposition_check(the_vjp_itself)


def test_jvp_by_transposition_catches_a_jacobian_built_row_by_row() -> None:
    def row_by_row(y: at.Tensor, x: at.Tensor, t: at.Tensor) -> at.Tensor:
        rows = [at.sum(at.grad(y, x, seed=at.constant(e)) * t) for e in np.eye(y.shape[0])]
        return at.concat([at.reshape(r, (1,)) for r in rows], axis=0)

    with pytest.raises(ExerciseError, match="ran 3 reverse sweeps"):
        lesson10.jvp_by_transposition_check(row_by_row)


def test_jvp_by_transposition_catches_a_missing_tangent() -> None:
    def no_tangent(y: at.Tensor, x: at.Tensor, t: at.Tensor) -> at.Tensor:
        u = at.input("u", y.shape)
        return at.grad(at.sum(at.grad(y, x, seed=u)), u)

    with pytest.raises(ExerciseError, match=r"J t \(.*\) is wrong"):
        lesson10.jvp_by_transposition_check(no_tangent)
