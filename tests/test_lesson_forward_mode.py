"""Lessons 10 and 10b's checks: the sharpest curvature from HVPs (10's exercise 2), a JVP by transposition for several
inputs (10's exercise 3), the softmax Jacobian (10b's exercise 2) and per-example gradients with at.vmap (10b's
exercise 3).

Each check passes on a right answer and, on a wrong or borrowed one, fails with a message that says
what is wrong: the library's autodiff called, a finite-difference approximation, a wrong shape, a
Jacobian built row by row instead of by the trick, a loop over the examples instead of vmap.
"""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at
from asgteach.lessons import ExerciseError, lesson10, lesson10b


# --- lesson 10b, exercise 2: softmax's VJP from y and g, without forming J -------------------------------------

def softmax_vjp(y: np.ndarray, g: np.ndarray) -> np.ndarray:
    return y * (g - (g * y).sum(axis=-1, keepdims=True))


def test_softmax_vjp_passes_on_the_formula_in_two_styles() -> None:
    lesson10b.softmax_vjp_check(softmax_vjp)
    lesson10b.softmax_vjp_check(lambda y, g: y * g - y * np.einsum("...i,...i->...", y, g)[..., None])


def test_softmax_vjp_that_forms_j_runs_out_of_memory_with_a_message() -> None:
    def through_j(y: np.ndarray, g: np.ndarray) -> np.ndarray:
        J = y[..., :, None] * np.eye(y.shape[-1]) - y[..., :, None] * y[..., None, :]
        return np.einsum("...i,...ij->...j", g, J)

    with pytest.raises(ExerciseError, match=r"ran out of memory: J of softmax over n classes holds n\^2 numbers"):
        lesson10b.softmax_vjp_check(through_j)


def test_softmax_vjp_by_the_library_is_refused() -> None:
    def by_grad(y: np.ndarray, g: np.ndarray) -> np.ndarray:
        with at.Graph():
            z = at.input("z", y.shape)
            (d,) = at.grad(at.sum(at.softmax(z) * at.constant(g)), [z])
        return at.run(d, {z: np.log(y)})

    with pytest.raises(ExerciseError, match="uses at, which this exercise does not allow"):
        lesson10b.softmax_vjp_check(by_grad)


@pytest.mark.parametrize(("answer", "words"), [
    (lambda y, g: y * g, "diag\\(y\\) g alone"),
    (lambda y, g: -softmax_vjp(y, g), "the sign"),
    (lambda y, g: y * (g - (g * y).sum()), "each row's n entries"),
    (lambda y, g: y[..., :, None] * np.eye(y.shape[-1]) - y[..., :, None] * y[..., None, :], "J itself"),
])
def test_softmax_vjp_names_the_common_mistakes(answer, words) -> None:
    with pytest.raises(ExerciseError, match=words):
        lesson10b.softmax_vjp_check(answer)


def test_softmax_vjp_by_finite_differences_is_named() -> None:
    def by_differences(y: np.ndarray, g: np.ndarray) -> np.ndarray:
        z, h = np.log(y), 1e-6

        def soft(v: np.ndarray) -> np.ndarray:
            e = np.exp(v - v.max(axis=-1, keepdims=True))
            return e / e.sum(axis=-1, keepdims=True)

        out = np.zeros_like(z)
        for j in range(z.shape[-1]):
            e = np.zeros(z.shape[-1])
            e[j] = h
            out[..., j] = ((soft(z + e) - soft(z - e)) * g).sum(axis=-1) / (2 * h)
        return out

    with pytest.raises(ExerciseError, match="finite differences give"):
        lesson10b.softmax_vjp_check(by_differences)


# --- lesson 10, exercise 2: the sharpest curvature from HVPs alone ---------------------------------------------

def by_power_iteration(hvp, n: int) -> float:
    q = np.random.default_rng(3).standard_normal(n)
    for _ in range(60):
        q = hvp(q)
        q = q / np.linalg.norm(q)
    return float(q @ hvp(q))


def test_top_curvature_passes_on_power_iteration() -> None:
    lesson10.top_curvature_check(by_power_iteration)


def test_top_curvature_refuses_forming_the_hessian() -> None:
    def formed(hvp, n: int) -> float:
        eig = np.linalg.eigvalsh(np.stack([hvp(e) for e in np.eye(n)], axis=1))
        return float(eig[np.argmax(np.abs(eig))])

    with pytest.raises(ExerciseError, match="forming H takes n calls"):
        lesson10.top_curvature_check(formed)


def test_top_curvature_names_a_lost_sign_and_a_single_product() -> None:
    with pytest.raises(ExerciseError, match="keeps its sign"):
        lesson10.top_curvature_check(lambda hvp, n: abs(by_power_iteration(hvp, n)))
    with pytest.raises(ExerciseError, match="does not point along the sharpest direction"):
        lesson10.top_curvature_check(lambda hvp, n: float(np.ones(n) @ hvp(np.ones(n))) / n)


# --- lesson 10, exercise 3: J t from the VJP graph, for several inputs --------------------------------------

def by_transposition(y: at.Tensor, xs: list, ts: list) -> at.Tensor:
    u = at.input("u", y.shape)
    vjps = at.grad(y, list(xs), seed=u)
    return at.grad(sum(at.sum(g * t) for g, t in zip(vjps, ts)), u)


def test_jvp_by_transposition_passes_on_the_trick() -> None:
    lesson10.jvp_by_transposition_check(by_transposition)


def test_jvp_by_transposition_refuses_at_jvp() -> None:
    with pytest.raises(ExerciseError, match=r"calls asgteach\.jvp"):
        lesson10.jvp_by_transposition_check(lambda y, xs, ts: at.jvp(y, xs[0], ts[0]))


def test_jvp_by_transposition_names_the_vjp_shape() -> None:
    def the_vjp_itself(y: at.Tensor, xs: list, ts: list) -> at.Tensor:
        return at.grad(y, xs[0], seed=at.input("u", y.shape))

    with pytest.raises(ExerciseError, match="that is an input's shape"):
        lesson10.jvp_by_transposition_check(the_vjp_itself)


def test_jvp_by_transposition_catches_a_jacobian_built_row_by_row() -> None:
    def row_by_row(y: at.Tensor, xs: list, ts: list) -> at.Tensor:
        rows = [at.sum(at.grad(y, xs[0], seed=at.constant(e)) * ts[0]) for e in np.eye(y.shape[0])]
        return at.concat([at.reshape(r, (1,)) for r in rows], axis=0)

    with pytest.raises(ExerciseError, match="ran 3 reverse sweeps"):
        lesson10.jvp_by_transposition_check(row_by_row)


def test_jvp_by_transposition_catches_a_missing_tangent_and_a_forgotten_input() -> None:
    def no_tangent(y: at.Tensor, xs: list, ts: list) -> at.Tensor:
        u = at.input("u", y.shape)
        return at.grad(at.sum(at.grad(y, xs[0], seed=u)), u)

    with pytest.raises(ExerciseError, match=r"J t \(.*\) is wrong"):
        lesson10.jvp_by_transposition_check(no_tangent)

    def first_input_only(y: at.Tensor, xs: list, ts: list) -> at.Tensor:
        return by_transposition(y, xs[:1], ts[:1])

    with pytest.raises(ExerciseError, match="every input's share is added"):
        lesson10.jvp_by_transposition_check(first_input_only)


# --- lesson 10b, exercise 3: DP-SGD's clipped sum of per-example gradients, with at.vmap --------------------------

def _per_example(loss_fn, w, X, Y):
    return at.vmap(lambda x, y: at.grad(loss_fn(w, x, y), w))(X, Y)


def by_vmap(loss_fn, w: at.Tensor, X: at.Tensor, Y: at.Tensor, C: at.Tensor) -> at.Tensor:
    G = _per_example(loss_fn, w, X, Y)
    axes = tuple(range(1, G.ndim))
    norms = at.sqrt(at.sum(G * G, axis=axes, keepdims=True))
    return at.sum(G * at.minimum(1.0, C / norms), axis=0)


def test_clipped_grad_sum_passes_on_vmap_and_on_a_clip_inside_the_mapped_function() -> None:
    lesson10b.clipped_grad_sum_check(by_vmap)

    def clip_inside(loss_fn, w, X, Y, C):      # the clip written for ONE example, then mapped with it
        def one(x, y):
            g = at.grad(loss_fn(w, x, y), w)
            return g * at.minimum(1.0, C / at.sqrt(at.sum(g * g)))
        return at.sum(at.vmap(one)(X, Y), axis=0)

    lesson10b.clipped_grad_sum_check(clip_inside)


def test_clipped_grad_sum_by_a_loop_is_caught_by_its_node_count() -> None:
    def loop(loss_fn, w, X, Y, C):
        total = None
        for i in range(X.shape[0]):
            g = at.grad(loss_fn(w, X[i], Y[i]), w)
            g = g * at.minimum(1.0, C / at.sqrt(at.sum(g * g)))
            total = g if total is None else total + g
        return total

    with pytest.raises(ExerciseError, match=r"added \d+ nodes .* for \d+ examples and \d+ for \d+ .*one copy of the "
                                            "loss and its gradient per example"):
        lesson10b.clipped_grad_sum_check(loop)


@pytest.mark.parametrize(("answer", "words"), [
    (lambda loss_fn, w, X, Y, C: at.sum(_per_example(loss_fn, w, X, Y), axis=0), "unclipped"),
    (lambda loss_fn, w, X, Y, C: (lambda g: g * at.minimum(1.0, C / at.sqrt(at.sum(g * g))))(
        at.sum(_per_example(loss_fn, w, X, Y), axis=0)), "clipped once, after summing"),
    (lambda loss_fn, w, X, Y, C: (lambda G: at.sum(G * (C / at.sqrt(at.sum(G * G, axis=tuple(range(1, G.ndim)),
                                                                          keepdims=True))), axis=0))(
        _per_example(loss_fn, w, X, Y)), "scaled to norm exactly C"),
    (lambda loss_fn, w, X, Y, C: _per_example(loss_fn, w, X, Y), "still to be summed"),
])
def test_clipped_grad_sum_names_the_common_mistakes(answer, words) -> None:
    with pytest.raises(ExerciseError, match=words):
        lesson10b.clipped_grad_sum_check(answer)


def test_clipped_grad_sum_wants_a_tensor_of_the_checks_graph() -> None:
    with at.Graph():
        elsewhere = at.input("G", (3,))
    with pytest.raises(ExerciseError, match="a Tensor of another graph"):
        lesson10b.clipped_grad_sum_check(lambda loss_fn, w, X, Y, C: elsewhere)
    with pytest.raises(ExerciseError, match="should return a Tensor of X's graph.*got ndarray"):
        lesson10b.clipped_grad_sum_check(lambda loss_fn, w, X, Y, C: np.zeros(w.shape))


def test_per_example_grads_losses_are_the_ones_the_check_differentiates() -> None:
    """The check's losses, run one example at a time by the check's loop, against numpy."""
    rng = np.random.default_rng(3)
    W, x, y = rng.standard_normal((4, 3)), rng.standard_normal(4), np.array([0.2, 0.5, 0.3])
    with at.Graph():
        w_, x_, y_ = at.parameter("w", (4, 3)), at.input("x", (4,)), at.input("y", (3,))
        loss = lesson10b.check_loss_softmax(w_, x_, y_)
    z = x @ W
    want = -(y * (z - z.max() - np.log(np.exp(z - z.max()).sum()))).sum()
    np.testing.assert_allclose(at.run(loss, {w_: W, x_: x, y_: y}), want, rtol=1e-13)
