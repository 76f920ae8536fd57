"""at.gradcheck: the report, fast mode, plots, HTML, and catching a planted wrong rule."""

from __future__ import annotations

import sys

import matplotlib
import numpy as np
import pytest

import asgteach as at

matplotlib.use("Agg")


def caller_line() -> int:
    return sys._getframe(1).f_lineno


def _mlp():
    rng = np.random.default_rng(0)
    with at.Graph() as g:
        x = at.input("x", (4, 3))
        w = at.parameter("w", (3, 2))
        b = at.parameter("b", (2,))
        y = at.sum(at.tanh(x @ w + b) ** 2)
    feeds = {x: rng.standard_normal((4, 3)), w: rng.standard_normal((3, 2)), b: rng.standard_normal(2)}
    return g, y, [x, w, b], feeds


def test_report_fields() -> None:
    g, y, xs, feeds = _mlp()
    n_before = len(g)
    rep = at.gradcheck(y, xs, feeds)
    assert len(g) == n_before, "gradcheck must not add nodes to the user's graph"
    assert rep.ok is True and rep.mode == "full" and rep.culprits == []
    assert (rep.eps, rep.atol, rep.rtol) == (1e-6, 1e-5, 1e-3)  # PyTorch's defaults
    assert [c.name for c in rep.inputs] == ["x", "w", "b"]
    for c, x in zip(rep.inputs, xs):
        assert c.ok and c.shape == x.shape
        assert 0 <= c.max_abs_err < 1e-7
        assert c.numerical_jacobian.shape == (1, x.size)
        assert c.worst_index is not None and len(c.worst_index) == len(x.shape)
        assert c.worst_output == ()
        np.testing.assert_allclose(c.analytical_jacobian, c.numerical_jacobian, atol=1e-6)
    assert rep.worst in rep.inputs
    text = rep.summary()
    assert "PASSED" in text and "d/dw (3, 2)" in text and repr(rep) == text


def test_jacobian_is_the_true_jacobian() -> None:
    with at.Graph():
        x = at.input("x", (3,))
        y = x * at.constant(np.array([1.0, 2.0, 3.0]))
    rep = at.gradcheck(y, [x], {x: np.ones(3)})
    np.testing.assert_allclose(rep.inputs[0].analytical_jacobian, np.diag([1.0, 2.0, 3.0]), atol=1e-12)
    np.testing.assert_allclose(rep.inputs[0].numerical_jacobian, np.diag([1.0, 2.0, 3.0]), atol=1e-8)


def test_non_scalar_y_full_jacobian() -> None:
    rng = np.random.default_rng(1)
    with at.Graph():
        x = at.input("x", (2, 3))
        w = at.parameter("w", (3, 4))
        y = at.softmax(x @ w, axis=-1)
    rep = at.gradcheck(y, [x, w], {x: rng.standard_normal((2, 3)), w: rng.standard_normal((3, 4))})
    assert rep.ok, rep.summary()
    assert rep.inputs[0].numerical_jacobian.shape == (8, 6)
    assert rep.inputs[1].numerical_jacobian.shape == (8, 12)


def test_fast_mode() -> None:
    g, y, xs, feeds = _mlp()
    rep = at.gradcheck(y, xs, feeds, fast=True, n_directions=4)
    assert rep.ok and rep.mode == "fast"
    assert all(c.numerical_jacobian is None and c.worst_index is None for c in rep.inputs)
    # fast mode also fails on a wrong rule
    with at.ops.patched("tanh", vjp=lambda c, g: (g * (1.0 - c.out),)):
        bad = at.gradcheck(y, xs, feeds, fast=True)
    assert not bad.ok and any(c.op == "tanh" for c in bad.culprits)


def test_gradcheck_needs_fed_inputs() -> None:
    with at.Graph():
        x = at.input("x", (3,))
        h = at.exp(x)
        y = at.sum(h)
    with pytest.raises(ValueError, match="gradcheck needs a value for input 'x'"):
        at.gradcheck(y, [x], {})
    with pytest.raises(ValueError, match="computed, not fed"):
        at.gradcheck(y, [h], {x: np.ones(3)})


# --- the planted bug: div without un-broadcast, but the right shape ---------------------------
def _div_rule_one_row(c, g):
    """Wrong on purpose: takes one row of the broadcast gradient instead of summing the rows."""
    a, b = c.inputs
    da = at.sum_to(g / b, a.shape) if c.needs[0] else None
    db = None
    if c.needs[1]:
        full = at.neg(g) * c.out / b
        db = full[0] if full.shape != b.shape else full
    return da, db


def _div_rule_mean(c, g):
    """Wrong on purpose: averages the copies' gradients instead of adding them."""
    a, b = c.inputs
    da = at.sum_to(g / b, a.shape) if c.needs[0] else None
    db = None
    if c.needs[1]:
        full = at.neg(g) * c.out / b
        db = at.mean(full, axis=0) if full.shape != b.shape else full
    return da, db


@pytest.mark.parametrize("bad_rule", [_div_rule_one_row, _div_rule_mean], ids=["one_row", "mean"])
def test_planted_div_bug_is_caught_and_named(bad_rule) -> None:
    rng = np.random.default_rng(2)
    with at.Graph():
        x = at.input("x", (4, 3))
        w = at.parameter("w", (3, 3))
        s = at.parameter("s", (3,))
        h = at.tanh(x @ w)
        line = caller_line() + 1
        q = h / s                      # the div node: s is broadcast over 4 rows
        loss = at.sum(q * q)
    feeds = {x: rng.standard_normal((4, 3)), w: rng.standard_normal((3, 3)), s: rng.uniform(1, 2, 3)}
    assert at.gradcheck(loss, [x, w, s], feeds).ok  # the real rule is right
    with at.ops.patched("div", vjp=bad_rule):
        rep = at.gradcheck(loss, [x, w, s], feeds)
    assert not rep.ok
    by_name = {c.name: c for c in rep.inputs}
    assert not by_name["s"].ok and by_name["w"].ok and by_name["x"].ok
    assert rep.worst.name == "s"
    assert len(rep.culprits) == 1, [str(c) for c in rep.culprits]
    culprit = rep.culprits[0]
    assert culprit.op == "div" and culprit.node_id == q.node_id and culprit.input_index == 1
    assert culprit.source.endswith(f"test_gradcheck.py:{line}")
    text = rep.summary()
    assert "FAILED" in text and f"#{q.node_id} div" in text and f"test_gradcheck.py:{line}" in text
    assert "div" in rep._repr_html_()


def test_gradcheck_catches_wrong_accumulation_free_bug_in_local_rules() -> None:
    """When every rule is right locally, no culprit is named (and the verdict is ok)."""
    g, y, xs, feeds = _mlp()
    rep = at.gradcheck(y, xs, feeds, locate=True)
    assert rep.ok and rep.culprits == []


# --- presentation -----------------------------------------------------------------------
def test_plot_returns_a_figure_with_one_axis_per_input_plus_eps() -> None:
    from matplotlib.figure import Figure

    g, y, xs, feeds = _mlp()
    rep = at.gradcheck(y, xs, feeds)
    fig = rep.plot()
    assert isinstance(fig, Figure)
    assert len(fig.axes) == len(xs) + 1
    assert fig.axes[-1].get_xscale() == "log"
    fast = at.gradcheck(y, xs[:1], feeds, fast=True)
    assert len(fast.plot().axes) == 2


def test_repr_html_escapes_names() -> None:
    with at.Graph():
        x = at.parameter("<b>x</b>", (2,))
        y = at.sum(x * x)
    rep = at.gradcheck(y, [x], {x: np.array([1.0, 2.0])})
    h = rep._repr_html_()
    assert "&lt;b&gt;x&lt;/b&gt;" in h and "<b>x</b>" not in h
    assert "passed" in h


def test_error_vs_eps_has_a_v_shape() -> None:
    g, y, xs, feeds = _mlp()
    rep = at.gradcheck(y, xs, feeds)
    eps, err = rep.error_vs_eps([1e-1, 1e-6, 1e-12])
    assert list(eps) == [1e-1, 1e-6, 1e-12]
    assert err[1] < err[0] and err[1] < err[2], err
    eps_all, err_all = rep.error_vs_eps()
    assert len(eps_all) == len(err_all) == 25 and eps_all[0] > eps_all[-1]
