"""GRUCell and LSTMCell: PyTorch's equations, gate order and parameter layout, gradients, GPU parity, training.

No PyTorch here: the oracle is numpy written from torch.nn.GRUCell's and torch.nn.LSTMCell's documented
equations, holding the weights in PyTorch's own layout ((G*H, in), gates stacked r|z|n and i|f|g|o) and
feeding their transposes to our cells, so a wrong layout or gate order shows as a wrong value.
"""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at
from asgteach import explain, nn

from error_helpers import caller_line
from error_helpers import raises_text as _raises

HERE = "test_nn_recurrent.py"
IN, H = 3, 4


# --- the oracle: PyTorch's documented equations, PyTorch's layout -----------------------------------------
def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def torch_gru_cell(x, h, w_ih, w_hh, b_ih, b_hh):
    """torch.nn.GRUCell: w_ih (3H, in) = [W_ir; W_iz; W_in], w_hh (3H, H), biases (3H,)."""
    hs = h.shape[-1]
    W_ir, W_iz, W_in = w_ih[:hs], w_ih[hs:2 * hs], w_ih[2 * hs:]
    W_hr, W_hz, W_hn = w_hh[:hs], w_hh[hs:2 * hs], w_hh[2 * hs:]
    b_ir, b_iz, b_in = b_ih[:hs], b_ih[hs:2 * hs], b_ih[2 * hs:]
    b_hr, b_hz, b_hn = b_hh[:hs], b_hh[hs:2 * hs], b_hh[2 * hs:]
    r = _sigmoid(x @ W_ir.T + b_ir + h @ W_hr.T + b_hr)
    z = _sigmoid(x @ W_iz.T + b_iz + h @ W_hz.T + b_hz)
    n = np.tanh(x @ W_in.T + b_in + r * (h @ W_hn.T + b_hn))
    return (1 - z) * n + z * h


def torch_lstm_cell(x, h, c, w_ih, w_hh, b_ih, b_hh):
    """torch.nn.LSTMCell: w_ih (4H, in) = [W_ii; W_if; W_ig; W_io], w_hh (4H, H), biases (4H,)."""
    hs = h.shape[-1]
    pre = x @ w_ih.T + b_ih + h @ w_hh.T + b_hh
    i = _sigmoid(pre[..., :hs])
    f = _sigmoid(pre[..., hs:2 * hs])
    g = np.tanh(pre[..., 2 * hs:3 * hs])
    o = _sigmoid(pre[..., 3 * hs:])
    c2 = f * c + i * g
    return o * np.tanh(c2), c2


def _torch_params(gates, seed=0):
    """Random weights in PyTorch's layout (a bit larger than the init, so every gate works off its middle)."""
    rng = np.random.default_rng(seed)
    return {"w_ih": rng.uniform(-0.8, 0.8, (gates * H, IN)), "w_hh": rng.uniform(-0.8, 0.8, (gates * H, H)),
            "b_ih": rng.uniform(-0.5, 0.5, gates * H), "b_hh": rng.uniform(-0.5, 0.5, gates * H)}


def _feeds(cell, tp):
    """Our cell's parameters from PyTorch-layout weights: the weights transposed, the biases as they are."""
    return {cell.weight_ih: tp["w_ih"].T, cell.weight_hh: tp["w_hh"].T,
            cell.bias_ih: tp["b_ih"], cell.bias_hh: tp["b_hh"]}


def _build_gru(batch):
    x, h = at.input("x", batch + (IN,)), at.input("h", batch + (H,))
    cell = nn.GRUCell(IN, H, name="gru")
    return cell, x, h, cell(x, h)


def _build_lstm(batch):
    x, h, c = at.input("x", batch + (IN,)), at.input("h", batch + (H,)), at.input("c", batch + (H,))
    cell = nn.LSTMCell(IN, H, name="lstm")
    h2, c2 = cell(x, (h, c))
    return cell, x, h, c, h2, c2


# --- parameters -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind, gates", [("GRUCell", 3), ("LSTMCell", 4)])
def test_parameter_names_shapes_and_metadata(kind, gates):
    with at.Graph():
        cell = getattr(nn, kind)(IN, H, name="rnn")
    params = cell.parameters()
    assert [p.name for p in params] == ["rnn.weight_ih", "rnn.weight_hh", "rnn.bias_ih", "rnn.bias_hh"]
    assert [p.shape for p in params] == [(IN, gates * H), (H, gates * H), (gates * H,), (gates * H,)]
    for p in params:
        m = p.node.meta
        assert (m["layer"], m["layer_kind"], m["role"]) == ("rnn", kind, p.name.split(".")[-1])
        assert m["init"] == "uniform" and m["init_args"] == {"low": -0.5, "high": 0.5}  # 1/sqrt(H), H = 4
    assert f"{kind}('rnn')" in repr(cell) and "weight_hh: (4, " in repr(cell)
    assert explain.role(params[0]).init.summary.endswith("(low=-0.5, high=0.5)")


def test_no_bias_and_default_names():
    with at.Graph():
        a, b = nn.GRUCell(2, 5), nn.GRUCell(2, 5)
        c = nn.LSTMCell(2, 5, bias=False)
    assert a.name == "grucell" and b.name == "grucell_1" and c.name == "lstmcell"
    assert [p.name for p in c.parameters()] == ["lstmcell.weight_ih", "lstmcell.weight_hh"]
    assert c.bias_ih is None and c.bias_hh is None


def test_init_is_pytorchs_uniform_range():
    hidden = 16
    with at.Graph():
        gru, lstm = nn.GRUCell(10, hidden, name="g"), nn.LSTMCell(10, hidden, name="l")
    k = 1 / np.sqrt(hidden)
    values = at.init.initial_values(gru.parameters() + lstm.parameters(), seed=3)
    assert len(values) == 8
    for name, v in values.items():
        assert np.abs(v).max() <= k, name
        assert np.abs(v).max() > 0.8 * k, name          # spread over the whole range, not a narrow slice of it
        assert abs(v.mean()) < 0.3 * k, name
    assert np.std(values["g.weight_ih"]) == pytest.approx(k / np.sqrt(3), rel=0.1)  # U(-k, k) has std k/sqrt(3)


def test_bad_sizes_are_refused():
    with at.Graph():
        with pytest.raises(ValueError, match="hidden_size must be a positive int"):
            nn.GRUCell(3, 0)
        with pytest.raises(ValueError, match="input_size must be a positive int"):
            nn.LSTMCell(2.5, 4)


# --- values against the oracle ----------------------------------------------------------------------------
@pytest.mark.parametrize("batch", [(5,), ()], ids=["batched", "unbatched"])
def test_gru_matches_pytorchs_equations(batch):
    with at.Graph():
        cell, x, h, h2 = _build_gru(batch)
    rng = np.random.default_rng(1)
    X, Hs = rng.standard_normal(batch + (IN,)), rng.standard_normal(batch + (H,))
    tp = _torch_params(3)
    got = at.run(h2, {x: X, h: Hs, **_feeds(cell, tp)})
    assert got.shape == batch + (H,)
    np.testing.assert_allclose(got, torch_gru_cell(X, Hs, **tp), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("batch", [(5,), ()], ids=["batched", "unbatched"])
def test_lstm_matches_pytorchs_equations(batch):
    with at.Graph():
        cell, x, h, c, h2, c2 = _build_lstm(batch)
    rng = np.random.default_rng(2)
    X, Hs, Cs = (rng.standard_normal(batch + (n,)) for n in (IN, H, H))
    tp = _torch_params(4)
    got_h, got_c = at.run([h2, c2], {x: X, h: Hs, c: Cs, **_feeds(cell, tp)})
    want_h, want_c = torch_lstm_cell(X, Hs, Cs, **tp)
    np.testing.assert_allclose(got_h, want_h, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got_c, want_c, rtol=1e-12, atol=1e-14)


def test_the_state_defaults_to_zeros_and_no_bias_works():
    with at.Graph():
        x = at.input("x", (2, IN))
        gru, lstm = nn.GRUCell(IN, H, name="g"), nn.LSTMCell(IN, H, bias=False, name="l")
        hg = gru(x)
        hl, cl = lstm(x)
    X = np.random.default_rng(3).standard_normal((2, IN))
    tg, tl = _torch_params(3, seed=4), _torch_params(4, seed=5)
    tl["b_ih"], tl["b_hh"] = np.zeros(4 * H), np.zeros(4 * H)
    feeds = {x: X, **_feeds(gru, tg), lstm.weight_ih: tl["w_ih"].T, lstm.weight_hh: tl["w_hh"].T}
    got_g, got_h, got_c = at.run([hg, hl, cl], feeds)
    zeros = np.zeros((2, H))
    np.testing.assert_allclose(got_g, torch_gru_cell(X, zeros, **tg), rtol=1e-12)
    want_h, want_c = torch_lstm_cell(X, zeros, zeros, **tl)
    np.testing.assert_allclose(got_h, want_h, rtol=1e-12)
    np.testing.assert_allclose(got_c, want_c, rtol=1e-12)


def test_unrolled_cell_shares_its_weights_and_matches_the_oracle():
    T = 4
    with at.Graph() as g:
        x, h0 = at.input("x", (2, T, IN)), at.input("h0", (2, H))
        cell = nn.GRUCell(IN, H, name="gru")
        h = h0
        for t in range(T):
            h = cell(x[:, t], h)
    readers = [n for n in g.nodes if cell.weight_hh.node_id in n.inputs]
    assert len(readers) == T  # one parameter node, one matmul per step
    rng = np.random.default_rng(6)
    X, H0, tp = rng.standard_normal((2, T, IN)), rng.standard_normal((2, H)), _torch_params(3, seed=7)
    want = H0
    for t in range(T):
        want = torch_gru_cell(X[:, t], want, **tp)
    np.testing.assert_allclose(at.run(h, {x: X, h0: H0, **_feeds(cell, tp)}), want, rtol=1e-12)


# --- gradients (float64) ----------------------------------------------------------------------------------
def _all_feeds(g, seed):
    rng = np.random.default_rng(seed)
    return {at.Tensor(g, n.id): rng.uniform(-1, 1, n.shape) for n in g.nodes if n.op in ("input", "parameter")}


@pytest.mark.parametrize("batch", [(3,), ()], ids=["batched", "unbatched"])
def test_gru_gradcheck(batch):
    with at.Graph() as g:
        cell, x, h, h2 = _build_gru(batch)
        r = at.constant(np.random.default_rng(8).uniform(-1, 1, batch + (H,)))
        loss = at.sum(h2 * r)
    feeds = _all_feeds(g, 9)
    rep = at.gradcheck(loss, list(feeds), feeds)
    assert rep.ok, rep.summary()
    assert {"x", "h", "gru.weight_ih", "gru.weight_hh", "gru.bias_ih", "gru.bias_hh"} <= {t.name for t in feeds}


@pytest.mark.parametrize("batch", [(3,), ()], ids=["batched", "unbatched"])
def test_lstm_gradcheck(batch):
    with at.Graph() as g:
        cell, x, h, c, h2, c2 = _build_lstm(batch)
        rng = np.random.default_rng(10)
        r_h, r_c = (at.constant(rng.uniform(-1, 1, (batch + (H,)))) for _ in range(2))
        loss = at.sum(h2 * r_h) + at.sum(c2 * r_c)     # both outputs, so every path is checked
    feeds = _all_feeds(g, 11)
    rep = at.gradcheck(loss, list(feeds), feeds)
    assert rep.ok, rep.summary()
    names = {t.name for t in feeds}
    assert {"x", "h", "c", "lstm.weight_ih", "lstm.weight_hh", "lstm.bias_ih", "lstm.bias_hh"} <= names


# --- the GPU (lavapipe in CI) -----------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_wgpu_matches_numpy(kind):
    from wgpu_helpers import BOTH_PLANS, run_both

    with at.Graph() as g:
        if kind == "gru":
            cell, x, h, h2 = _build_gru((6,))
            outs = [h2]
        else:
            cell, x, h, c, h2, c2 = _build_lstm((6,))
            outs = [h2, c2]
        r = at.constant(np.random.default_rng(12).uniform(-1, 1, (6, H)))
        loss = at.sum(outs[-1] * r)
        grads = at.grad(loss, [x, h, *cell.parameters()])
    feeds = _all_feeds(g, 13)
    run_both(outs + list(grads), feeds, f"{kind} cell", plans=BOTH_PLANS)


# --- training: backprop through 20 steps ------------------------------------------------------------------
def test_unrolled_gru_trains_with_the_trainer():
    """Recall the FIRST input of a 20-step sequence from the last state: the only signal is 20 steps back.

    A plain tanh RNN struggles here (the gradient to step 1 is a product of 20 Jacobians); the GRU learns to
    hold z near 1 and carry that value along ``z * h``.
    """
    B, T = 32, 20
    rng = np.random.default_rng(14)
    X = rng.uniform(-1, 1, (B, T, 1))
    Y = X[:, 0] * 2.0
    with at.Graph():
        x, y = at.input("x", (B, T, 1)), at.input("y", (B, 1))
        cell = nn.GRUCell(1, 8, name="gru")
        head = nn.Linear(8, 1, name="head")
        h = None
        for t in range(T):
            h = cell(x[:, t], h)
        loss = nn.mse_loss(head(h), y)
    tr = at.Trainer(loss, optimizer=at.optim.Adam(lr=0.03), seed=0)
    history = tr.fit({x: X, y: Y}, steps=200)
    assert np.all(np.isfinite(history))
    assert history[-1] < 0.05 * history[0], (history[0], history[-1])
    assert np.mean(history[-10:]) < np.mean(history[:10])


# --- errors -----------------------------------------------------------------------------------------------
def test_wrong_input_size_names_the_layer_and_the_line():
    with at.Graph():
        x = at.input("x", (4, 5))
        cell = nn.GRUCell(IN, H, name="enc")
        line, make = caller_line(), (lambda: cell(x))
        msg = _raises(at.ShapeError, make)
    assert msg.startswith("GRUCell:") and "'enc'" in msg and "(4, 5)" in msg and "input_size=3" in msg
    assert f"{HERE}:{line}" in msg


def test_a_whole_sequence_given_to_a_cell_says_to_loop():
    with at.Graph():
        x = at.input("x", (2, 7, IN))
        cell = nn.LSTMCell(IN, H, name="dec")
        line, make = caller_line(), (lambda: cell(x))
        msg = _raises(at.ShapeError, make)
    assert msg.startswith("LSTMCell:") and "'dec'" in msg and "ONE time step" in msg and "x[:, t]" in msg
    assert f"{HERE}:{line}" in msg


@pytest.mark.parametrize("which", ["h", "c"])
def test_wrong_state_shape_names_the_layer_and_the_line(which):
    with at.Graph():
        x, good, bad = at.input("x", (2, IN)), at.input("good", (2, H)), at.input("bad", (3, H))
        cell = nn.LSTMCell(IN, H, name="mem")
        state = (bad, good) if which == "h" else (good, bad)
        line, make = caller_line(), (lambda: cell(x, state))
        msg = _raises(at.ShapeError, make)
    assert msg.startswith("LSTMCell:") and "'mem'" in msg and f"expects {which} of shape (2, 4)" in msg
    assert "(3, 4)" in msg and f"{HERE}:{line}" in msg


def test_gru_state_shape_and_lstm_state_pair():
    with at.Graph():
        x, h = at.input("x", (2, IN)), at.input("h", (2, H + 1))
        gru, lstm = nn.GRUCell(IN, H, name="g"), nn.LSTMCell(IN, H, name="l")
        line, make = caller_line(), (lambda: gru(x, h))
        msg = _raises(at.ShapeError, make)
        assert "'g'" in msg and f"{HERE}:{line}" in msg
        with pytest.raises(TypeError, match=r"a pair \(h, c\)"):
            lstm(x, at.input("h2", (2, H)))
