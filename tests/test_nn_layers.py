"""Layers and losses: metadata, shapes, values against numpy, and gradcheck (float64)."""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at
from asgteach import nn

RNG = np.random.default_rng(0)


def _feeds_for(g, extra=None, seed=0):
    """Random float64 values for every input and parameter of ``g`` (ints left to ``extra``)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for n in g.nodes:
        if n.op in ("input", "parameter") and n.dtype == "float":
            feeds[at.Tensor(g, n.id)] = rng.standard_normal(n.shape) * 0.5
    feeds.update(extra or {})
    return feeds


def _check(loss, g, extra=None, fast=False):
    feeds = _feeds_for(g, extra)
    xs = [t for t in feeds if t.dtype == "float" and t.node.op in ("input", "parameter")]
    rep = at.gradcheck(loss, xs, feeds, fast=fast)
    assert rep.ok, rep.summary()


def test_linear_metadata_and_value():
    with at.Graph():
        x = at.input("x", (4, 3))
        lin = nn.Linear(3, 2, name="fc1")
        y = lin(x)
    w, b = lin.weight.node, lin.bias.node
    assert (w.name, w.meta["layer"], w.meta["role"], w.meta["layer_kind"], w.meta["init"]) == \
        ("fc1.weight", "fc1", "weight", "Linear", "xavier_uniform")
    assert b.meta["init"] == "zeros" and w.shape == (3, 2)
    X, W, B = RNG.standard_normal((4, 3)), RNG.standard_normal((3, 2)), RNG.standard_normal(2)
    np.testing.assert_allclose(at.run(y, {x: X, lin.weight: W, lin.bias: B}), X @ W + B)
    assert [t.name for t in lin.parameters()] == ["fc1.weight", "fc1.bias"]


def test_duplicate_layer_name_is_an_error():
    with at.Graph():
        nn.Linear(2, 2, name="fc")
        with pytest.raises(ValueError, match="already exists"):
            nn.Linear(2, 2, name="fc")


def test_default_names_are_unique_and_module_tree():
    with at.Graph():
        a, b = nn.Linear(2, 2), nn.Linear(2, 2)
        mlp = nn.MLP([2, 4, 3, 1], activation="relu", name="mlp")
    assert a.name != b.name
    assert [t.name for t in mlp.parameters()] == [
        "mlp.0.weight", "mlp.0.bias", "mlp.1.weight", "mlp.1.bias", "mlp.2.weight", "mlp.2.bias"]
    assert mlp.layers[0].weight.node.meta["init"] == "kaiming_uniform"  # relu -> Kaiming
    assert "Linear('mlp.1')" in repr(mlp)


def test_mlp_gradcheck_and_weight_sharing():
    with at.Graph() as g:
        x = at.input("x", (3, 2))
        mlp = nn.MLP([2, 4, 1], activation="tanh", name="m")
        loss = at.sum(mlp(x) * mlp(x * 2.0))  # the same weights used twice
    w0 = mlp.layers[0].weight.node
    assert len([n for n in g.nodes if w0.id in n.inputs and n.phase == "forward"]) == 2
    _check(loss, g)


@pytest.mark.parametrize("act", ["relu", "tanh", "sigmoid", "gelu", "silu", "leaky_relu", "softplus", "gelu_tanh"])
def test_mlp_activations(act):
    with at.Graph() as g:
        x = at.input("x", (3, 2))
        loss = at.sum(nn.MLP([2, 3, 2], activation=act, name="m")(x) ** 2)
    _check(loss, g)


def test_layernorm_embedding_feedforward_gradcheck():
    with at.Graph() as g:
        ids = at.input("ids", (2, 3), dtype="int")
        emb = nn.Embedding(5, 4, name="emb")
        h = nn.LayerNorm(4, name="ln")(emb(ids))
        loss = at.sum(nn.FeedForward(4, 6, name="ff")(h) ** 2)
    assert emb.weight.node.meta["layer_kind"] == "Embedding"
    _check(loss, g, {ids: np.array([[0, 1, 1], [4, 1, 0]])})


@pytest.mark.parametrize("causal", [False, True])
def test_attention_matches_numpy_and_gradcheck(causal):
    b, t, d, h = 2, 3, 4, 2
    with at.Graph() as g:
        x = at.input("x", (b, t, d))
        mha = nn.MultiHeadAttention(d, h, causal=causal, name="att")
        y = mha(x)
        loss = at.sum(y * y)
    feeds = _feeds_for(g)
    vals = {t_.name: v for t_, v in feeds.items()}
    X = vals["x"]

    def lin(name, z):
        return z @ vals[f"att.{name}.weight"] + vals[f"att.{name}.bias"]

    def split(z):
        return z.reshape(b, t, h, d // h).transpose(0, 2, 1, 3)

    q, k, v = split(lin("query", X)), split(lin("key", X)), split(lin("value", X))
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d // h)
    if causal:
        s = s + np.triu(np.full((t, t), -1e9), 1)
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    ref = lin("output", (w @ v).transpose(0, 2, 1, 3).reshape(b, t, d))
    np.testing.assert_allclose(at.run(y, feeds), ref, rtol=1e-10, atol=1e-12)
    if causal:  # changing the last position must not change the first output
        X2 = X.copy()
        X2[:, -1] += 1.0
        y2 = at.run(y, {**feeds, x: X2})
        np.testing.assert_allclose(y2[:, 0], at.run(y, feeds)[:, 0], rtol=1e-12)
    roles = {n.meta["role"] for n in g.parameters()}
    assert {"query.weight", "key.weight", "value.weight", "output.weight"} <= roles
    assert all(n.meta["layer_kind"] == "Attention" for n in g.parameters())
    _check(loss, g)


def test_attention_padding_mask_hides_padded_keys():
    with at.Graph() as g:
        x, m = at.input("x", (1, 3, 4)), at.input("mask", (1, 3))
        y = nn.MultiHeadAttention(4, 1, name="a")(x, padding_mask=m)
    feeds = _feeds_for(g)
    feeds[m] = np.array([[1.0, 1.0, 0.0]])
    base = at.run(y, feeds)
    X2 = feeds[x].copy()
    X2[0, 2] += 5.0  # only the padded position changes ...
    changed = at.run(y, {**feeds, x: X2})
    np.testing.assert_allclose(changed[0, :2], base[0, :2], rtol=1e-10)  # ... so the real ones don't see it


def test_transformer_block_with_positional_encodings_gradcheck():
    with at.Graph() as g:
        x = at.input("x", (1, 3, 4))
        rope = nn.RotaryEmbedding(2, name="rope")
        h = nn.SinusoidalPositionalEncoding(4, name="sin")(x)
        h = nn.LearnedPositionalEmbedding(8, 4, name="pos")(h)
        y = nn.TransformerBlock(4, 2, d_hidden=6, causal=True, rope=rope, name="blk")(h)
        loss = at.sum(y * y)
    _check(loss, g, fast=True)


def test_rope_preserves_norms_and_relative_positions():
    with at.Graph():
        x = at.input("x", (1, 1, 5, 4))
        r = nn.RotaryEmbedding(4, name="rope")(x)
    X = np.tile(RNG.standard_normal(4), (1, 1, 5, 1))  # the same vector at every position
    R = at.run(r, {x: X})
    np.testing.assert_allclose(np.linalg.norm(R, axis=-1), np.linalg.norm(X, axis=-1), rtol=1e-12)
    dots = [R[0, 0, i] @ R[0, 0, i + 1] for i in range(4)]  # same offset -> same dot product
    np.testing.assert_allclose(dots, dots[0], rtol=1e-10)


def test_dropout_mask_is_an_input_and_trainer_fills_it():
    with at.Graph() as g:
        x = at.input("x", (200, 10))
        drop = nn.Dropout(0.25, name="drop")
        lin = nn.Linear(10, 1, name="lin")
        out = lin(drop(x))
        loss = at.mean(out * out)
    masks = [n for n in g.inputs() if n.supplied is not None and n.supplied.kind == "dropout_mask"]
    assert len(masks) == 1 and masks[0].supplied.p == 0.25 and masks[0].supplied == at.Supplied("dropout_mask", p=0.25)
    tr = at.Trainer(loss, optimizer=at.optim.SGD(lr=0.01), seed=1)
    train_mask = tr.random_feeds(True)[masks[0].id]
    kept = train_mask > 0
    assert 0.70 < kept.mean() < 0.80
    np.testing.assert_allclose(train_mask[kept], 1 / 0.75, rtol=1e-6)
    X = np.ones((200, 10))
    (eval_out,) = tr.run([out], {x: X})
    np.testing.assert_allclose(eval_out, X @ tr.params["lin.weight"] + tr.params["lin.bias"], rtol=1e-5)


def test_losses_against_numpy():
    rng = np.random.default_rng(1)
    P, T = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    logits, labels = rng.standard_normal((4, 5)), np.array([0, 4, 2, 2])
    probs = rng.uniform(0.05, 0.95, (4, 3))
    targets01 = (rng.random((4, 3)) > 0.5).astype(float)
    with at.Graph():
        p, t = at.input("p", (4, 3)), at.input("t", (4, 3))
        z, y = at.input("z", (4, 5)), at.input("y", (4,), dtype="int")
        out = {
            "mse": nn.mse_loss(p, t), "l1": nn.l1_loss(p, t), "huber": nn.huber_loss(p, t, delta=0.7),
            "ce": nn.cross_entropy(z, y), "ce_ls": nn.cross_entropy(z, y, label_smoothing=0.1),
            "ce_onehot": nn.cross_entropy(z, nn.one_hot(y, 5)), "nll": nn.nll_loss(at.log_softmax(z), y),
            "bce": nn.binary_cross_entropy(p, t), "bce_logits": nn.binary_cross_entropy_with_logits(p, t),
            "kl": nn.kl_div(at.log_softmax(z), at.softmax(z * 0.5)), "sum": nn.mse_loss(p, t, reduction="sum"),
        }
    feeds = {p: P, t: T, z: logits, y: labels}
    vals = dict(zip(out, at.run(list(out.values()), feeds)))
    d = P - T
    logp = logits - logits.max(1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
    onehot = np.eye(5)[labels]
    q = onehot * 0.9 + 0.1 / 5
    ref = {
        "mse": np.mean(d * d), "l1": np.mean(np.abs(d)),
        "huber": np.mean(np.where(np.abs(d) < 0.7, 0.5 * d * d, 0.7 * (np.abs(d) - 0.35))),
        "ce": -np.mean(logp[np.arange(4), labels]), "ce_ls": -np.mean((q * logp).sum(1)),
        "ce_onehot": -np.mean(logp[np.arange(4), labels]), "nll": -np.mean(logp[np.arange(4), labels]),
        "sum": np.sum(d * d),
    }
    for k, v in ref.items():
        assert vals[k] == pytest.approx(v, rel=1e-10), k
    vals2 = at.run([nn.binary_cross_entropy(p, t), nn.binary_cross_entropy_with_logits(p, t)],
                   {p: probs, t: targets01})
    assert vals2[0] == pytest.approx(-np.mean(targets01 * np.log(probs) + (1 - targets01) * np.log(1 - probs)))
    s = 1 / (1 + np.exp(-probs))
    assert vals2[1] == pytest.approx(-np.mean(targets01 * np.log(s) + (1 - targets01) * np.log(1 - s)))
    pq = np.exp(logits * 0.5) / np.exp(logits * 0.5).sum(1, keepdims=True)
    assert vals["kl"] == pytest.approx(np.sum(pq * (np.log(pq) - logp)) / 4, rel=1e-10)


def test_losses_gradcheck():
    with at.Graph() as g:
        p, t = at.input("p", (3, 4)), at.input("t", (3, 4))
        y = at.input("y", (3,), dtype="int")
        loss = (nn.huber_loss(p, t) + nn.cross_entropy(p, y, label_smoothing=0.2)
                + nn.binary_cross_entropy_with_logits(p, at.sigmoid(t)) + nn.kl_div(at.log_softmax(p), at.softmax(t)))
    _check(loss, g, {y: np.array([3, 0, 1])})


def test_loss_shape_errors_are_clear():
    with at.Graph():
        p, t = at.input("p", (4, 1)), at.input("t", (4,))
        with pytest.raises(ValueError, match=r"mse_loss: prediction \(4, 1\) and target \(4,\)"):
            nn.mse_loss(p, t)
        z, y = at.input("z", (4, 5)), at.input("y", (3,), dtype="int")
        with pytest.raises(ValueError, match="integer targets must have shape"):
            nn.cross_entropy(z, y)


@pytest.mark.parametrize("name", ["zeros", "ones", "normal", "uniform", "xavier_uniform", "xavier_normal",
                                  "kaiming_uniform", "kaiming_normal"])
def test_initialisers_statistics(name):
    rng = np.random.default_rng(0)
    shape = (400, 300)
    v = at.init.INITIALISERS[name](shape, rng)
    fan_in, fan_out = at.init.fans(shape)
    expected_std = {
        "zeros": 0.0, "ones": 0.0, "normal": 1.0, "uniform": 1 / np.sqrt(12),
        "xavier_uniform": np.sqrt(2 / (fan_in + fan_out)), "xavier_normal": np.sqrt(2 / (fan_in + fan_out)),
        "kaiming_uniform": np.sqrt(2 / fan_in), "kaiming_normal": np.sqrt(2 / fan_in),
    }[name]
    assert v.shape == shape
    assert v.std() == pytest.approx(expected_std, rel=0.02, abs=1e-12)
    assert at.init.fans((8, 3, 5, 5)) == (75, 200)
