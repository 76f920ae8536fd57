"""Forward mode (at.jvp) and second derivatives (grad of grad, at.hvp) against finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at
from asgteach.ops import REGISTRY

from opcases import CASES

EPS = 1e-6
DIFF_CASES = [c for c in CASES if REGISTRY[c.op].not_differentiable is None]


def _central(y: at.Tensor, feeds: dict, xs: list, vs: list, eps: float = EPS) -> np.ndarray:
    plus = {**feeds, **{x: feeds[x] + eps * v for x, v in zip(xs, vs)}}
    minus = {**feeds, **{x: feeds[x] - eps * v for x, v in zip(xs, vs)}}
    return (at.run(y, plus) - at.run(y, minus)) / (2 * eps)


@pytest.mark.parametrize("c", DIFF_CASES, ids=lambda c: c.id)
def test_jvp_every_op(c) -> None:
    b = c.build()
    rng = np.random.default_rng(5)
    vs = [rng.standard_normal(x.shape) for x in b.xs]
    with b.graph:
        t = at.jvp(b.y, b.xs, vs)
    assert isinstance(t, at.Tensor) and t.shape == b.y.shape
    analytic = at.run(t, b.feeds)
    np.testing.assert_allclose(analytic, _central(b.y, b.feeds, b.xs, vs), rtol=1e-5, atol=1e-6, err_msg=c.id)


def test_every_differentiable_op_reaches_jvp() -> None:
    """Both routes are exercised: ops with their own jvp rule and ops derived from the VJP."""
    ops = {c.op for c in DIFF_CASES}
    with_rule = {o for o in ops if REGISTRY[o].jvp is not None}
    derived = {o for o in ops if REGISTRY[o].jvp is None and not REGISTRY[o].zero_gradient}
    assert with_rule and derived, (with_rule, derived)
    assert {"mul", "div", "pow", "layer_norm", "max", "var"} <= derived


def test_jvp_single_and_list_forms_and_zero_for_unconnected() -> None:
    with at.Graph():
        x, z = at.input("x", (3,)), at.input("z", (2,))
        y = at.tanh(x) * 2.0
        t_single = at.jvp(y, x, np.ones(3))
        t_list = at.jvp([y, at.sum(z)], [x], [np.ones(3)])
    X = np.array([0.1, -0.4, 0.9])
    a, b, c = at.run([t_single, *t_list], {x: X, z: np.zeros(2)})
    np.testing.assert_allclose(a, 2 * (1 - np.tanh(X) ** 2))
    np.testing.assert_allclose(b, a)
    assert c.shape == () and c == 0.0
    with at.Graph():
        x = at.input("x", (3,))
        with pytest.raises(ValueError, match="tangent for 'x' has shape"):
            at.jvp(at.exp(x), [x], [np.ones(4)])
        with pytest.raises(ValueError, match="2 tangents"):
            at.jvp(at.exp(x), [x], [np.ones(3), np.ones(3)])


def test_jvp_nodes_are_backward_phase() -> None:
    with at.Graph() as g:
        x = at.input("x", (3,))
        y = at.sum(at.exp(x) * x)
        n = len(g)
        at.jvp(y, x, np.ones(3))
    new = g.nodes[n:]
    assert new and all(nd.phase == "backward" for nd in new)
    assert all(nd.meta.get("mode") == "jvp" for nd in new if "jvp_of" in nd.meta)


# --- second order -------------------------------------------------------------------------
def _mlp(g: at.Graph):
    with g:
        x = at.input("x", (4, 3))
        w1, b1 = at.parameter("w1", (3, 5)), at.parameter("b1", (5,))
        w2 = at.parameter("w2", (5, 2))
        h = at.tanh(x @ w1 + b1)
        loss = at.mean(at.log_softmax(h @ w2) * -1.0) + 0.1 * at.sum(w1 * w1)
    rng = np.random.default_rng(0)
    feeds = {x: rng.standard_normal((4, 3)), w1: rng.standard_normal((3, 5)) * 0.7,
             b1: rng.standard_normal(5) * 0.1, w2: rng.standard_normal((5, 2))}
    return loss, w1, feeds


def test_hvp_matches_finite_differences_of_the_gradient() -> None:
    g = at.Graph()
    loss, w1, feeds = _mlp(g)
    v = np.random.default_rng(1).standard_normal(w1.shape)
    with g:
        (dw1,) = at.grad(loss, [w1])
        hv = at.hvp(loss, w1, v)
    assert hv.shape == w1.shape
    got = at.run(hv, feeds)
    fd = _central(dw1, feeds, [w1], [v], eps=1e-5)
    np.testing.assert_allclose(got, fd, rtol=1e-5, atol=1e-7)
    # H is symmetric: u.(H v) == v.(H u)
    u = np.random.default_rng(2).standard_normal(w1.shape)
    with g:
        hu = at.hvp(loss, w1, u)
    hu_v = at.run(hu, feeds)
    np.testing.assert_allclose(np.sum(u * got), np.sum(v * hu_v), rtol=1e-10)


@pytest.mark.parametrize("fn", [
    at.tanh,
    lambda x: at.softmax(x, axis=-1),
    lambda x: at.softmax(x, axis=0),
    lambda x: at.layer_norm(x),
    lambda x: at.log_softmax(x),
    lambda x: at.sigmoid(x) * at.gelu(x),
], ids=["tanh", "softmax", "softmax_axis0", "layer_norm", "log_softmax", "sigmoid*gelu"])
def test_grad_of_grad(fn) -> None:
    """The gradient is a graph, so gradcheck it: its Jacobian is the Hessian."""
    rng = np.random.default_rng(3)
    C = rng.standard_normal((3, 4))
    with at.Graph() as g:
        x = at.input("x", (3, 4))
        y = at.sum(fn(x) * C) + at.sum(fn(x) ** 2)
        (dx,) = at.grad(y, [x])
    assert all(g.nodes[i].phase == "backward" for i in g.ancestors([dx.node_id]) if i > y.node_id)
    rep = at.gradcheck(dx, [x], {x: rng.standard_normal((3, 4))})
    assert rep.ok, rep.summary()


def test_third_derivative_of_a_scalar_function() -> None:
    with at.Graph():
        x = at.input("x", ())
        y = at.exp(x) * x ** 3
        d1 = at.grad(y, x)
        d2 = at.grad(d1, x)
        d3 = at.grad(d2, x)
    X = 0.7
    e = np.exp(X)
    v = at.run([d1, d2, d3], {x: np.array(X)})
    np.testing.assert_allclose(v[0], e * (X**3 + 3 * X**2))
    np.testing.assert_allclose(v[1], e * (X**3 + 6 * X**2 + 6 * X))
    np.testing.assert_allclose(v[2], e * (X**3 + 9 * X**2 + 18 * X + 6))
