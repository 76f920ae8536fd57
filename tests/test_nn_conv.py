"""Convolutional layers: metadata, values against naive loops, gradcheck, and a small CNN that learns.

The reference convolution and pooling here are the textbook loops (one output pixel at a
time), deliberately unlike the einsum/strided-view kernels they check.
"""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at
from asgteach import nn
from asgteach.datasets import load_digits

RNG = np.random.default_rng(0)


def naive_conv2d(x, w, b, stride, padding, dilation, groups):
    """y[n, o, i, j] = b[o] + sum_{c, a, q} x_pad[n, g*Cg + c, i*s + a*d, j*s + q*d] * w[o, c, a, q]."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    xp = np.zeros((n, c, h + 2 * ph, wd + 2 * pw))
    xp[:, :, ph:ph + h, pw:pw + wd] = x
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((n, o, oh, ow))
    og = o // groups
    for bi in range(n):
        for oc in range(o):
            g = oc // og
            for i in range(oh):
                for j in range(ow):
                    s = b[oc]
                    for ci in range(cg):
                        for a in range(kh):
                            for q in range(kw):
                                s += xp[bi, g * cg + ci, i * sh + a * dh, j * sw + q * dw] * w[oc, ci, a, q]
                    y[bi, oc, i, j] = s
    return y


def naive_max_pool(x, k, s, p):
    n, c, h, w = x.shape
    xp = np.full((n, c, h + 2 * p[0], w + 2 * p[1]), -np.inf)
    xp[:, :, p[0]:p[0] + h, p[1]:p[1] + w] = x
    oh, ow = (h + 2 * p[0] - k[0]) // s[0] + 1, (w + 2 * p[1] - k[1]) // s[1] + 1
    y = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            y[:, :, i, j] = xp[:, :, i * s[0]:i * s[0] + k[0], j * s[1]:j * s[1] + k[1]].max(axis=(2, 3))
    return y


@pytest.mark.parametrize("opts", [
    {"stride": 1, "padding": 0, "dilation": 1, "groups": 1},
    {"stride": (2, 1), "padding": (1, 2), "dilation": (2, 1), "groups": 2},
])
def test_conv2d_layer_metadata_and_values(opts):
    with at.Graph():
        x = at.input("x", (2, 4, 7, 6))
        conv = nn.Conv2d(4, 6, (3, 2), name="conv1", **opts)
        y = conv(x)
    w, b = conv.weight.node, conv.bias.node
    assert (w.name, w.meta["layer"], w.meta["layer_kind"], w.meta["role"], w.meta["init"]) == \
        ("conv1.weight", "conv1", "Conv2d", "weight", "kaiming_uniform")
    assert (b.name, b.meta["layer_kind"], b.meta["role"], b.meta["init"]) == ("conv1.bias", "Conv2d", "bias", "zeros")
    assert w.shape == (6, 4 // opts["groups"], 3, 2) and b.shape == (6,)
    X, W, B = RNG.standard_normal((2, 4, 7, 6)), RNG.standard_normal(w.shape), RNG.standard_normal(6)
    pair = {k: (v, v) if isinstance(v, int) and k != "groups" else v for k, v in opts.items()}
    want = naive_conv2d(X, W, B, pair["stride"], pair["padding"], pair["dilation"], opts["groups"])
    (got,) = at.run([y], {x: X, conv.weight: W, conv.bias: B})
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert [t.name for t in conv.parameters()] == ["conv1.weight", "conv1.bias"]


def test_conv2d_without_bias_and_bad_groups():
    with at.Graph():
        conv = nn.Conv2d(2, 4, 3, bias=False, name="c")
        assert conv.bias is None and [t.name for t in conv.parameters()] == ["c.weight"]
        with pytest.raises(ValueError, match="divisible by groups"):
            nn.Conv2d(3, 4, 3, groups=2)


def test_max_and_avg_pool_layers_match_loops():
    X = RNG.standard_normal((2, 3, 7, 6))
    with at.Graph():
        x = at.input("x", X.shape)
        mp = nn.MaxPool2d(3, stride=2, padding=1, name="mp")(x)
        mp2 = nn.MaxPool2d(2)(x)
        ap = nn.AvgPool2d((2, 3), stride=(2, 1))(x)
    got_mp, got_mp2, got_ap = at.run([mp, mp2, ap], {x: X})
    np.testing.assert_array_equal(got_mp, naive_max_pool(X, (3, 3), (2, 2), (1, 1)))
    np.testing.assert_array_equal(got_mp2, naive_max_pool(X, (2, 2), (2, 2), (0, 0)))
    want_ap = np.stack([np.stack([X[:, :, 2 * i:2 * i + 2, j:j + 3].mean(axis=(2, 3)) for j in range(4)], -1)
                        for i in range(3)], -2)
    np.testing.assert_allclose(got_ap, want_ap, rtol=1e-12)


def test_conv_net_gradcheck():
    """Conv2d (stride, padding, groups) -> tanh -> max pool -> Conv2d (dilation) -> avg pool: every gradient."""
    with at.Graph() as g:
        x = at.input("x", (2, 4, 8, 7))
        c1 = nn.Conv2d(4, 6, 3, stride=(1, 2), padding=1, groups=2, name="c1")
        c2 = nn.Conv2d(6, 3, (2, 2), dilation=(1, 2), name="c2")
        h = at.max_pool2d(at.tanh(c1(x)), 2, stride=1)
        y = at.avg_pool2d(c2(h), 2, padding=1)
        loss = at.sum(y * at.constant(RNG.standard_normal(y.shape)))
    rng = np.random.default_rng(3)
    feeds = {x: rng.standard_normal((2, 4, 8, 7))}
    for t in (*c1.parameters(), *c2.parameters()):
        feeds[t] = rng.standard_normal(t.shape) * 0.5
    rep = at.gradcheck(loss, list(feeds), feeds)
    assert rep.ok, rep.summary()
    assert len(g.parameters()) == 4


def test_small_cnn_learns_digits():
    """A tiny conv net on the shipped 8x8 digits: a few full-batch Adam steps and the loss falls clearly."""
    images, labels = load_digits()
    X = images[:256].reshape(-1, 1, 8, 8).astype(np.float32)
    Y = labels[:256]
    with at.Graph():
        x, t = at.input("x", X.shape), at.input("t", Y.shape, dtype="int")
        net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, name="conv"), nn.MaxPool2d(2), name="cnn")
        h = at.relu(net(x)).reshape(X.shape[0], 8 * 4 * 4)
        logits = nn.Linear(8 * 4 * 4, 10, name="head")(h)
        loss = nn.cross_entropy(logits, t)
    tr = at.Trainer(loss, optimizer=at.optim.Adam(lr=0.02), seed=0)
    history = tr.fit({x: X, t: Y}, steps=25, progress=False)
    assert np.isfinite(history).all()
    assert history[-1] < 0.5 * history[0], history
    (pred,) = tr.run([logits], {x: X})
    assert (pred.argmax(axis=1) == Y).mean() > 0.8
