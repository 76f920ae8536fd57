"""Every op's backward rule against central differences (float64, full Jacobian).

Parametrised over the cases in tests/opcases.py, which cover every registry op (see
test_registry.py::test_every_op_has_a_test_case), with broadcasting shapes, axis
variants and index forms. Plus the op-specific checks the issue asks for.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import asgteach as at
from asgteach.ops import REGISTRY

from opcases import CASES, Builder

DIFF_CASES = [c for c in CASES if REGISTRY[c.op].not_differentiable is None]


@pytest.mark.parametrize("c", DIFF_CASES, ids=lambda c: c.id)
def test_gradcheck_every_op(c) -> None:
    b = c.build()
    assert b.xs, f"case {c.id} differentiates nothing"
    rep = at.gradcheck(b.y, b.xs, b.feeds)
    assert rep.ok, f"{c.id}\n{rep.summary()}"
    assert rep.mode == "full"
    # a full check really looked at every entry of the Jacobian
    m = int(np.prod(b.y.shape, dtype=np.int64))
    for chk, x in zip(rep.inputs, b.xs):
        assert chk.numerical_jacobian.shape == (m, x.size)


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
def test_kernel_preserves_dtype(c) -> None:
    b = c.build()
    for dtype in (np.float32, np.float64):
        out = at.run(b.y, b.feeds_as(dtype))
        want = np.int64 if b.y.dtype == "int" else dtype
        assert out.dtype == want, f"{c.id}: {np.dtype(dtype).name} in -> {out.dtype} out"
        assert out.shape == b.y.shape, f"{c.id}: kernel shape {out.shape} != inferred {b.y.shape}"
    lo = at.run(b.y, b.feeds_as(np.float32))
    hi = at.run(b.y, b.feeds)
    np.testing.assert_allclose(lo, hi, rtol=2e-5, atol=2e-5)


# --- ops whose gradient is zero by design, and ops with none ----------------------------------
@pytest.mark.parametrize("name", sorted(n for n, s in REGISTRY.items() if s.zero_gradient))
def test_zero_gradient_ops_stop_the_gradient(name: str) -> None:
    assert set(n for n, s in REGISTRY.items() if s.zero_gradient) >= {"greater", "equal", "sign"}
    s = REGISTRY[name]
    assert "derivative is 0" in s.zero_gradient
    with at.Graph() as g:
        x = at.input("x", (4,))
        mask = at.ops.apply(name, x) if s.arity == 1 else at.ops.apply(name, x, 0.5)
        y = at.sum(mask * 3.0)
        (dx,) = at.grad(y, [x])
    # explicitly zero: no backward node reads the comparison's rule
    assert not any(n.meta.get("vjp_of") == mask.node_id for n in g.nodes)
    value = at.run(dx, {x: np.array([-1.0, 0.3, 2.0, -0.7])})
    assert value.shape == (4,) and np.all(value == 0.0)


def test_argmax_is_not_differentiable() -> None:
    with at.Graph():
        x = at.input("x", (3, 4))
        i = at.argmax(x, axis=1)
        line = i.node.source
        with pytest.raises(at.NotDifferentiableError) as e:
            at.grad(i[0], [x])  # getitem passes the gradient on: the path runs through argmax
    msg = str(e.value)
    assert "argmax" in msg and line in msg and "test_ops_gradcheck.py" in msg
    assert f"#{i.node_id}" in msg and "'x'" in msg  # names the node and what was asked for
    with at.Graph():
        v = at.input("v", (5,))
        with pytest.raises(at.NotDifferentiableError, match="argmax"):
            at.grad(at.argmax(v), v)


def test_argmax_jvp_raises_too() -> None:
    with at.Graph():
        x = at.input("x", (3, 4))
        i = at.argmax(x)
        with pytest.raises(at.NotDifferentiableError, match="argmax"):
            at.jvp(at.reshape(i, (3, 1)), [x], [np.ones((3, 4))])


def test_argmax_blocks_only_paths_through_it() -> None:
    """Ids from argmax feed embedding's non-differentiable input: no error, in both modes."""
    with at.Graph():
        x = at.input("x", (3, 4))
        t = at.parameter("t", (4, 2))
        y = at.sum(at.embedding(at.argmax(x), t) * at.sum(x))
        dx, dt = at.grad(y, [x, t])
        jx = at.jvp(y, [x], [np.ones((3, 4))])
    X = np.arange(12.0).reshape(3, 4) % 5
    T = np.arange(8.0).reshape(4, 2)
    vdx, vdt, vjx = at.run([dx, dt, jx], {x: X, t: T})
    rows = np.argmax(X, axis=1)
    expect = np.zeros((4, 2))
    for r in rows:
        expect[r] += X.sum()
    np.testing.assert_allclose(vdt, expect)
    np.testing.assert_allclose(vdx, np.full((3, 4), T[rows].sum()))  # argmax itself adds nothing
    np.testing.assert_allclose(vjx, T[rows].sum() * 12)


# --- op-specific checks --------------------------------------------------------------------
def test_embedding_scatter_add_by_hand() -> None:
    ids_v = np.array([[0, 2, 0], [4, 2, 2]])
    table_v = np.random.default_rng(0).standard_normal((5, 3))
    gout = np.random.default_rng(1).standard_normal((2, 3, 3))
    with at.Graph():
        ids = at.input("ids", (2, 3), dtype="int")
        table = at.parameter("table", (5, 3))
        out = at.embedding(ids, table)
        (dt,) = at.grad(out, [table], seed=gout)
    val, dval = at.run([out, dt], {ids: ids_v, table: table_v})
    np.testing.assert_array_equal(val, table_v[ids_v])
    expect = np.zeros((5, 3))
    expect[0] = gout[0, 0] + gout[0, 2]          # id 0 used twice
    expect[2] = gout[0, 1] + gout[1, 1] + gout[1, 2]  # id 2 used three times
    expect[4] = gout[1, 0]
    np.testing.assert_allclose(dval, expect, rtol=0, atol=1e-12)
    assert np.all(dval[[1, 3]] == 0)


def test_layer_norm_fused_matches_composite() -> None:
    rng = np.random.default_rng(3)
    X, W, B = rng.standard_normal((3, 5)), rng.standard_normal(5), rng.standard_normal(5)
    G = rng.standard_normal((3, 5))
    with at.Graph() as g:
        x, w, b = at.input("x", (3, 5)), at.parameter("w", (5,)), at.parameter("b", (5,))
        fused = at.layer_norm(x, w, b)
        comp = at.layer_norm_composite(x, w, b)
        gf = at.grad(fused, [x, w, b], seed=G)
        gc = at.grad(comp, [x, w, b], seed=G)
    assert fused.op == "layer_norm" and comp.op != "layer_norm"
    n_fused = sum(1 for n in g.nodes if n.meta.get("vjp_of") == fused.node_id)
    assert n_fused > 0
    vals = at.run([fused, comp, *gf, *gc], {x: X, w: W, b: B})
    np.testing.assert_allclose(vals[0], vals[1], rtol=1e-12, atol=1e-12)
    ref = (X - X.mean(-1, keepdims=True)) / np.sqrt(X.var(-1, keepdims=True) + 1e-5) * W + B
    np.testing.assert_allclose(vals[0], ref, rtol=1e-12, atol=1e-12)
    for a, c in zip(vals[2:5], vals[5:8]):
        np.testing.assert_allclose(a, c, rtol=1e-10, atol=1e-10)
    # default weight/bias of the fused op equal the composite without affine
    with at.Graph():
        x = at.input("x", (2, 4))
        d1, d2 = at.layer_norm(x), at.layer_norm_composite(x)
    X = rng.standard_normal((2, 4))
    a, c = at.run([d1, d2], {x: X})
    np.testing.assert_allclose(a, c, rtol=1e-12, atol=1e-12)


def test_gelu_tanh_approximation_is_close_but_not_equal() -> None:
    grid = np.linspace(-3, 3, 601)
    with at.Graph():
        x = at.input("x", grid.shape)
        exact, approx = at.gelu(x), at.gelu(x, approximate="tanh")
    e, a = at.run([exact, approx], {x: grid})
    erf = np.vectorize(math.erf)   # the standard library's, a second opinion beside ours

    np.testing.assert_allclose(e, 0.5 * grid * (1 + erf(grid / np.sqrt(2))), rtol=1e-12, atol=1e-14)
    diff = np.abs(e - a).max()
    assert 1e-6 < diff < 1e-3, diff
    with pytest.raises(ValueError, match="approximate"):
        at.gelu(x, approximate="fast")


def test_pow_gradient_with_respect_to_exponent() -> None:
    A, Bv = np.array([0.5, 1.5, 2.0]), np.array([2.0, -1.0, 0.5])
    with at.Graph():
        a, b = at.input("a", (3,)), at.input("b", (3,))
        y = at.sum(a ** b)
        da, db = at.grad(y, [a, b])
    va, vb = at.run([da, db], {a: A, b: Bv})
    np.testing.assert_allclose(vb, A ** Bv * np.log(A), rtol=1e-12)
    np.testing.assert_allclose(va, Bv * A ** (Bv - 1), rtol=1e-12)


def test_pow_constant_exponent_folds() -> None:
    """x**2 differentiates to g * 2 * x with no pow(x, 1) node."""
    with at.Graph() as g:
        x = at.input("x", (3,))
        (dx,) = at.grad(at.sum(x ** 2), [x])
    backward_ops = [n.op for n in g.nodes if n.phase == "backward"]
    assert "pow" not in backward_ops and "log" not in backward_ops
    np.testing.assert_allclose(at.run(dx, {x: np.array([1.0, -2.0, 3.0])}), [2.0, -4.0, 6.0])


def test_maximum_minimum_split_ties_in_half() -> None:
    with at.Graph():
        a, b = at.input("a", (3,)), at.input("b", (3,))
        da, db = at.grad(at.sum(at.maximum(a, b)), [a, b])
        ma, mb = at.grad(at.sum(at.minimum(a, b)), [a, b])
    A, B = np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 5.0])
    v = at.run([da, db, ma, mb], {a: A, b: B})
    np.testing.assert_array_equal(v[0], [0.5, 1, 0])
    np.testing.assert_array_equal(v[1], [0.5, 0, 1])
    np.testing.assert_array_equal(v[2], [0.5, 0, 1])
    np.testing.assert_array_equal(v[3], [0.5, 1, 0])


def test_max_reduction_ties_share_the_gradient() -> None:
    with at.Graph():
        x = at.input("x", (2, 3))
        (dx,) = at.grad(at.sum(at.max(x, axis=1)), [x])
    v = at.run(dx, {x: np.array([[1.0, 3.0, 3.0], [0.0, -1.0, 2.0]])})
    np.testing.assert_array_equal(v, [[0, 0.5, 0.5], [0, 0, 1]])


def test_softmax_is_stable_and_sums_to_one() -> None:
    with at.Graph():
        x = at.input("x", (2, 3))
        s, ls = at.softmax(x, axis=0), at.log_softmax(x)
    X = np.array([[1000.0, -1000.0, 0.0], [1001.0, 5.0, 0.0]])
    sv, lv = at.run([s, ls], {x: X})
    assert np.all(np.isfinite(sv)) and np.all(np.isfinite(lv))
    np.testing.assert_allclose(sv.sum(axis=0), 1.0)
    np.testing.assert_allclose(np.exp(lv).sum(axis=1), 1.0)


def test_var_is_population_variance() -> None:
    b = Builder(0)
    with b.graph:
        x = b.x((3, 4))
        v = at.var(x, axis=(0, 1))
    np.testing.assert_allclose(at.run(v, b.feeds), np.var(b.feeds[x]), rtol=1e-12)
