"""at.stop_gradient (issue 35, item 1): the identity forward, a wall for at.grad, at.jvp and grad of grad.

What the registry-wide tests check for every op (its sample's gradcheck, jvp, dtype, GPU parity, texts)
holds for stop_gradient too; here is what is particular to it: the gradient it does NOT pass (exact
zeros of the right shape, no error, no node of its own rule), the truncated-BPTT gradient computed
by hand, gradcheck treating the stopped value as the constant it is, the numpy plan's memory
planner not writing under its aliasing identity kernel, and the wall in the graph view.
"""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at
from asgteach import explain
from asgteach.ops import REGISTRY

RNG = np.random.default_rng(35)


# --- the record ---------------------------------------------------------------------------------------------
def test_registered_as_a_wall_with_an_identity_kernel() -> None:
    s = REGISTRY["stop_gradient"]
    assert s.category == "gradient" and s.arity == 1
    assert s.zero_gradient and s.not_differentiable is None and not s.differentiable_input(0)
    assert s.gpu.kernel == "elementwise" and s.gpu.expr == "x"
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    assert s.numpy(x) is x                      # the identity: nothing computed, nothing copied
    assert at.stop_gradient is at.ops.stop_gradient and "stop_gradient" in at.__all__
    for lang in ("en", "ru"):
        rec = explain.explain("stop_gradient", lang)
        assert rec.formula == "y = x" and rec.vjp == r"\frac{\partial L}{\partial x} = 0"


def test_detach_is_stop_gradient() -> None:
    with at.Graph():
        x = at.input("x", (3,))
        d = x.detach()
    assert d.op == "stop_gradient" and tuple(d.node.inputs) == (x.node_id,) and d.shape == (3,)


# --- forward: the identity, on every backend ----------------------------------------------------------------
@pytest.mark.parametrize("shape", [(), (5,), (2, 3), (2, 1, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_forward_is_the_identity_on_numpy(shape: tuple, dtype: type) -> None:
    X = RNG.standard_normal(shape).astype(dtype)
    with at.Graph():
        x = at.input("x", shape)
        y = at.stop_gradient(x)
        z = at.stop_gradient(at.stop_gradient(x) * 3.0)
    a, b = at.run([y, z], {x: X})
    assert a.dtype == dtype and a.shape == shape and np.array_equal(a, X)
    np.testing.assert_array_equal(b, X * dtype(3.0))


def test_numpy_output_is_the_callers_own_array() -> None:
    """The kernel returns its input; the plan still hands back a fresh array, never the fed one."""
    X = RNG.standard_normal((3, 4))
    keep = X.copy()
    with at.Graph():
        x = at.input("x", (3, 4))
        y = at.stop_gradient(x)
    out = at.run(y, {x: X})
    assert out is not X and not np.shares_memory(out, X)
    out[:] = 0.0
    np.testing.assert_array_equal(X, keep)


def test_numpy_plan_writes_nothing_in_place_under_it() -> None:
    """a's buffer dies at exp(a), but stop_gradient(a) (the same array) is read later: no in-place write there."""
    X = RNG.standard_normal((4, 5))
    with at.Graph():
        x = at.input("x", (4, 5))
        a = x * 2.0
        s = at.stop_gradient(a)
        c = at.exp(a)
        y = c + s
        y2 = at.tanh(s) + at.exp(at.stop_gradient(s))
    plan = at.compile([y, y2])
    for _ in range(2):
        got, got2 = plan.run({x: X})
        np.testing.assert_allclose(got, np.exp(2 * X) + 2 * X, rtol=1e-15)
        np.testing.assert_allclose(got2, np.tanh(2 * X) + np.exp(2 * X), rtol=1e-15)


def test_constant_folding_keeps_the_value_and_grad_ignores_backends() -> None:
    """stop_gradient of a constant is folded like any op of constants; at.grad ran on the graph before."""
    C = np.array([1.0, -2.0, 0.5])
    with at.Graph():
        x = at.input("x", (3,))
        c = at.stop_gradient(at.constant(C) * 2.0)
        y = at.sum(x * c)
        (dx,) = at.grad(y, [x])
    plan = at.compile([y, dx])
    assert c.node_id in plan.folded
    X = np.array([0.3, 0.1, -1.0])
    val, g = plan.run({x: X})
    np.testing.assert_allclose(val, np.sum(X * 2 * C))
    np.testing.assert_allclose(g, 2 * C)


@pytest.mark.gpu
def test_forward_is_the_identity_on_wgpu() -> None:
    X = RNG.standard_normal((3, 7)).astype(np.float32)
    X[0, 0], X[1, 1] = -0.0, np.inf
    with at.Graph():
        x = at.input("x", (3, 7))
        y = at.stop_gradient(x)
        z = at.tanh(at.stop_gradient(x * 2.0) + 1.0)   # inside a fused elementwise chain
    for optimize in (True, False):
        plan = at.compile([y, z], backend="wgpu", optimize=optimize)
        a, b = plan.run({x: X}, on_nan="ignore")
        assert a.dtype == np.float32 and np.array_equal(a.view(np.uint32), X.view(np.uint32)), "not bit for bit"
        np.testing.assert_allclose(b, np.tanh(2 * X + 1), rtol=2e-6, atol=2e-6)
    assert "return x;" in at.compile([y], backend="wgpu", optimize=False).shader_for(y)


@pytest.mark.gpu
def test_gradient_graph_through_the_wall_runs_on_wgpu() -> None:
    X = RNG.standard_normal((4,)).astype(np.float32)
    with at.Graph():
        x = at.input("x", (4,))
        y = at.sum(x * at.stop_gradient(at.tanh(x)))
        (dx,) = at.grad(y, [x])
    got = at.run(dx, {x: X}, backend="wgpu")
    np.testing.assert_allclose(got, np.tanh(X), rtol=2e-6, atol=2e-6)


# --- reverse mode: nothing passes ---------------------------------------------------------------------------
def test_grad_of_x_times_stopped_x_is_x_not_2x() -> None:
    X = RNG.standard_normal((2, 3))
    with at.Graph():
        x = at.input("x", (2, 3))
        s = at.stop_gradient(x)
        y = at.sum(x * s)
        dx, ds = at.grad(y, [x, s])
        (plain,) = at.grad(at.sum(x * x), [x])
    vdx, vds, vplain = at.run([dx, ds, plain], {x: X})
    np.testing.assert_allclose(vdx, X, rtol=1e-15)      # d/dx of x * const, at const = x
    np.testing.assert_allclose(vds, X, rtol=1e-15)      # the stopped value itself still has a gradient
    np.testing.assert_allclose(vplain, 2 * X, rtol=1e-15)


@pytest.mark.parametrize("shape", [(), (4,), (2, 3)])
def test_a_path_only_through_the_wall_gives_zeros_of_xs_shape(shape: tuple) -> None:
    with at.Graph() as g:
        x = at.input("x", shape)
        s = at.stop_gradient(at.exp(x))
        y = at.sum(s * s) + 1.0
        (dx,) = at.grad(y, [x])
        (dloss,) = at.grad(at.stop_gradient(at.sum(at.exp(x))), [x])   # the wrong place: stops everything
    assert dx.shape == shape and dloss.shape == shape
    assert not any(n.meta.get("vjp_of") in (s.node_id, s.node.inputs[0]) for n in g.nodes)   # no rule was called
    X = RNG.standard_normal(shape)
    a, b = at.run([dx, dloss], {x: X})
    assert a.shape == shape and np.all(a == 0.0) and np.all(b == 0.0)


def test_an_infinite_upstream_gradient_stays_out() -> None:
    """The wall sends nothing, so not even inf * 0 = NaN comes through: exact zeros."""
    with at.Graph():
        x = at.input("x", (3,))
        y = at.sum(at.exp(at.stop_gradient(x)) * 1e300 * 1e300)   # dy/d(stopped) = inf
        (dx,) = at.grad(y, [x])
    with np.errstate(over="ignore"):
        assert np.array_equal(at.run(dx, {x: np.zeros(3)}, on_nan="ignore"), np.zeros(3))


# --- forward mode and second order --------------------------------------------------------------------------
def test_jvp_gives_a_zero_tangent() -> None:
    X, V = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3))
    with at.Graph():
        x = at.input("x", (2, 3))
        only = at.jvp(at.stop_gradient(at.tanh(x)) * 3.0, x, V)
        half = at.jvp(at.sum(x * at.stop_gradient(x)), x, V)
    a, b = at.run([only, half], {x: X})
    assert a.shape == (2, 3) and np.all(a == 0.0)
    np.testing.assert_allclose(b, np.sum(V * X), rtol=1e-13)   # only the first factor moves


def test_second_derivatives_stop_at_the_wall() -> None:
    X, V = RNG.standard_normal(5), RNG.standard_normal(5)
    with at.Graph():
        x = at.input("x", (5,))
        hv = at.hvp(at.sum(x * at.stop_gradient(x)), x, V)           # gradient = stop_gradient(x): H = 0
        hv_plain = at.hvp(at.sum(x * x), x, V)                        # H = 2 I
        hv_cubic = at.hvp(at.sum(x * x * at.stop_gradient(x)), x, V)  # gradient 2 x s: H = 2 diag(s)
        (g,) = at.grad(at.sum(at.tanh(x)), [x])
        (gg,) = at.grad(at.sum(at.stop_gradient(g) * x), [x])        # grad of a stopped gradient: its value
        (ggg,) = at.grad(at.sum(gg), [x])                            # ... and nothing behind it
    a, b, c, d, e = at.run([hv, hv_plain, hv_cubic, gg, ggg], {x: X})
    assert np.all(a == 0.0)
    np.testing.assert_allclose(b, 2 * V, rtol=1e-15)
    np.testing.assert_allclose(c, 2 * X * V, rtol=1e-14)
    np.testing.assert_allclose(d, 1 - np.tanh(X) ** 2, rtol=1e-14)
    assert np.all(e == 0.0)


# --- gradcheck: the stopped value is a constant -------------------------------------------------------------
def test_gradcheck_passes_where_the_stopped_value_is_held_still() -> None:
    """Checked with respect to w, stop_gradient(u) is a constant to both sides of the check."""
    with at.Graph():
        w, u = at.input("w", (3,)), at.input("u", (3,))
        y = at.sum(at.tanh(w * at.stop_gradient(u * u)))
    feeds = {w: RNG.standard_normal(3), u: RNG.standard_normal(3)}
    rep = at.gradcheck(y, [w], feeds)
    assert rep.ok, rep.summary()


def test_finite_differences_see_through_the_wall() -> None:
    """Moving u moves the forward value (the identity), while the wall says 0: gradcheck disagrees on u, by design."""
    W, U = RNG.standard_normal(3), RNG.standard_normal(3)
    with at.Graph():
        w, u = at.input("w", (3,)), at.input("u", (3,))
        y = at.sum(w * at.stop_gradient(u))
    rep = at.gradcheck(y, [w, u], {w: W, u: U})
    ok = {c.name: c for c in rep.inputs}
    assert ok["w"].ok and not ok["u"].ok and not rep.ok
    np.testing.assert_allclose(ok["u"].numerical_jacobian.ravel(), W, rtol=1e-6)   # the true derivative
    assert np.all(ok["u"].analytical_jacobian == 0.0)                               # the decision
    assert not rep.culprits   # no rule is blamed: every rule checks out on its own


# --- truncated backprop through time ------------------------------------------------------------------------
N, B, T = 4, 3, 5


def _rnn(stop: bool, fed_states: bool = False):
    """h[t+1] = tanh(W @ sg(h[t]) + x[t]); loss = sum_t sum(c[t] * h[t+1]). With fed_states, each h[t] read
    by the next step is a fed input instead (what the wall means: a constant)."""
    with at.Graph() as g:
        w = at.parameter("W", (N, N))
        xs = [at.input(f"x{t}", (N, B)) for t in range(T)]
        cs = [at.input(f"c{t}", (N, B)) for t in range(T)]
        h = at.input("h0", (N, B))
        fed = [h]
        loss = None
        hs = [h]
        for t in range(T):
            prev = (fed[t] if fed_states else (at.stop_gradient(h) if stop else h))
            h = at.tanh(w @ prev + xs[t])
            hs.append(h)
            if fed_states and t + 1 < T:
                fed.append(at.input(f"h{t + 1}", (N, B)))
            term = at.sum(cs[t] * h)
            loss = term if loss is None else loss + term
        (dw,) = at.grad(loss, [w])
    return g, w, xs, cs, fed, hs, loss, dw


def _rnn_values():
    rng = np.random.default_rng(18)
    Wv = rng.standard_normal((N, N)) * 0.6
    X = [rng.standard_normal((N, B)) for _ in range(T)]
    C = [rng.standard_normal((N, B)) for _ in range(T)]
    H0 = rng.standard_normal((N, B)) * 0.5
    H = [H0]
    for t in range(T):
        H.append(np.tanh(Wv @ H[t] + X[t]))
    return Wv, X, C, H


def test_truncated_bptt_gradient_is_the_sum_of_one_step_gradients() -> None:
    Wv, X, C, H = _rnn_values()
    g, w, xs, cs, fed, hs, loss, dw = _rnn(stop=True)
    feeds = {w: Wv, fed[0]: H[0], **dict(zip(xs, X)), **dict(zip(cs, C))}
    hv = at.run(hs, feeds)
    for got, want in zip(hv, H):
        np.testing.assert_allclose(got, want, rtol=1e-13)                # the forward pass is untouched
    # by hand: each step's W-gradient reads only its own step, (c_t * tanh') @ h_t^T
    expect = sum((C[t] * (1 - H[t + 1] ** 2)) @ H[t].T for t in range(T))
    np.testing.assert_allclose(at.run(dw, feeds), expect, rtol=1e-12)
    # full BPTT differs: the same loss without the walls also sends gradient back through time
    _, w2, xs2, cs2, fed2, _, _, dw_full = _rnn(stop=False)
    full = at.run(dw_full, {w2: Wv, fed2[0]: H[0], **dict(zip(xs2, X)), **dict(zip(cs2, C))})
    assert not np.allclose(full, expect)


def test_truncated_bptt_equals_gradcheck_of_the_graph_with_states_fed() -> None:
    """The wall means: the state is a constant. The same graph with the states fed as inputs has no wall, and
    gradcheck (finite differences of its forward pass) confirms the gradient the walled graph gives."""
    Wv, X, C, H = _rnn_values()
    _, w, xs, cs, fed, _, loss, dw = _rnn(stop=True)
    walled = at.run(dw, {w: Wv, fed[0]: H[0], **dict(zip(xs, X)), **dict(zip(cs, C))})
    _, w2, xs2, cs2, fed2, _, loss2, dw2 = _rnn(stop=False, fed_states=True)
    feeds2 = {w2: Wv, **dict(zip(fed2, H[:T])), **dict(zip(xs2, X)), **dict(zip(cs2, C))}
    rep = at.gradcheck(loss2, [w2], feeds2)
    assert rep.ok, rep.summary()
    np.testing.assert_allclose(at.run(dw2, feeds2), walled, rtol=1e-12)
    np.testing.assert_allclose(rep.inputs[0].numerical_jacobian.reshape(N, N), walled, rtol=1e-6, atol=1e-8)


# --- the graph view: a wall -------------------------------------------------------------------------------
def test_the_graph_view_draws_a_wall() -> None:
    """A forward node of category "gradient" (only stop_gradient is one) gets the wall's rule, after the categories'."""
    from asgteach.widgets.elements import build_elements, scope_of
    from asgteach.widgets.styles import WALL, cytoscape_style

    with at.Graph() as g:
        x = at.input("x", (3,))
        s = at.stop_gradient(at.tanh(x))
        y = at.sum(x * s)
        at.grad(y, [x])
    classes = {e["data"]["nid"]: set(e["classes"].split())
               for e in build_elements(scope_of(g)) if e["group"] == "nodes" and "nid" in e["data"]}
    walls = {i for i, cl in classes.items() if {"cat-gradient", "forward"} <= cl}
    assert walls == {s.node_id}, "only the stop_gradient node is a wall; backward nodes are not"
    for present in (False, True):
        sheet = [r["selector"] for r in cytoscape_style(present)]
        rule = next(r["style"] for r in cytoscape_style(present) if r["selector"] == "node.cat-gradient.forward")
        assert (rule["shape"], rule["border-style"], rule["border-color"]) == (WALL[0], WALL[1], WALL[3])
        assert rule["border-width"] >= WALL[2]
        # later rules win in cytoscape: the wall overrides its category's dashed border, and output, selection
        # and step highlights override the wall
        wall = sheet.index("node.cat-gradient.forward")
        assert sheet.index("node.cat-gradient") < wall < sheet.index("node.output") < sheet.index("node.selected")
