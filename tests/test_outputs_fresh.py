"""Outputs are the caller's (issue 11, section 3).

What ``at.run`` returns must be fresh, writable arrays that share no memory with the feeds,
with each other, or with anything the plan keeps between runs (constants, folded values):
a student who writes ``out[0] = 0`` must not change their input, the next run's result, or
another output. The plan still writes in place internally; only outputs that could alias
are copied (``plan.source`` shows which).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import asgteach as at


def _assert_caller_owns(outs, feeds) -> None:
    """Every output is a writable ndarray, shares no memory with a feed or another output."""
    for k, o in enumerate(outs):
        assert type(o) is np.ndarray, f"output {k} is a {type(o).__name__}, not an ndarray"
        assert o.flags.writeable, f"output {k} is read-only"
        for name, f in feeds.items():
            assert not np.shares_memory(o, np.asarray(f)), f"output {k} shares memory with the feed {name}"
    for i, j in itertools.combinations(range(len(outs)), 2):
        assert not np.shares_memory(outs[i], outs[j]), f"outputs {i} and {j} share memory"


def test_gradient_of_a_sum_is_writable_above_4096_elements() -> None:
    # grad(sum(x)) is broadcast_to(1, x.shape): above 4,096 elements numpy gives a read-only view
    with at.Graph():
        x = at.input("x", (100, 50))
        dx = at.grad(at.sum(x), x)
        b = at.broadcast_to(at.constant(np.arange(50.0)), (100, 50))
    X = np.ones((100, 50))
    outs = at.run([dx, b], {x: X})
    _assert_caller_owns(outs, {"x": X})
    outs[0][...] = 7.0
    outs[1][0, 0] = 99.0
    again = at.run([dx, b], {x: X})   # the plan's constants were not written through
    np.testing.assert_array_equal(again[0], np.ones((100, 50)))
    assert again[1][0, 0] == 0.0


@pytest.mark.parametrize("make", [
    lambda x: at.reshape(x, (6, 2)),
    lambda x: at.transpose(x),
    lambda x: x[1:3],
    lambda x: x.T.reshape((12,)),
    lambda x: x,                      # the feed itself, asked for as an output
], ids=["reshape", "transpose", "getitem", "transpose-reshape", "identity"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_views_of_a_feed_are_copies(make, dtype) -> None:
    with at.Graph():
        x = at.input("x", (4, 3))
        y = make(x)
    X = np.arange(12, dtype=dtype).reshape(4, 3)
    before = X.copy()
    (out,) = at.run([y], {x: X})
    _assert_caller_owns([out], {"x": X})
    out[...] = -1
    np.testing.assert_array_equal(X, before)


def test_integer_feed_and_its_view_are_copies() -> None:
    # a variant the issue did not name: integer inputs are passed through unconverted
    with at.Graph():
        ids = at.input("ids", (2, 3), dtype="int")
        flat = at.reshape(ids, (6,))
    I = np.arange(6).reshape(2, 3)
    outs = at.run([ids, flat], {ids: I})
    _assert_caller_owns(outs, {"ids": I})


def test_the_same_node_twice_gives_two_arrays() -> None:
    with at.Graph():
        x = at.input("x", (3,))
        y = at.tanh(x)          # a fresh ufunc result
        s = at.sum(x)           # a reduction
        v = at.reshape(y, (3, 1))   # a view of another output
    X = np.array([0.1, 0.2, 0.3])
    outs = at.run([y, y, s, s, v, y], {x: X})
    _assert_caller_owns(outs, {"x": X})
    outs[0][0] = 5.0
    assert outs[1][0] == np.tanh(0.1) and outs[5][0] == np.tanh(0.1) and outs[4][0, 0] == np.tanh(0.1)


def test_constant_outputs_and_views_of_constants_do_not_leak_into_later_runs() -> None:
    with at.Graph():
        c = at.constant(np.arange(6.0).reshape(2, 3))
        folded = at.exp(c) * 2.0      # reads only constants: folded where it is not an output
        y = at.sum(folded, axis=0)    # an output computed from a folded value
        r = at.reshape(c, (3, 2))     # a view of a constant
    outs = at.run([c, y, r])
    _assert_caller_owns(outs, {})
    for o in outs:
        o[...] = 0.0
    again = at.run([c, y, r])
    np.testing.assert_array_equal(again[0], np.arange(6.0).reshape(2, 3))
    np.testing.assert_allclose(again[1], (np.exp(np.arange(6.0)) * 2.0).reshape(2, 3).sum(0))
    np.testing.assert_array_equal(again[2], np.arange(6.0).reshape(3, 2))


def test_fresh_outputs_are_not_copied_and_in_place_writes_stay() -> None:
    """Copies only where an output could alias: a training step's outputs are handed over as they are."""
    with at.Graph():
        x = at.input("x", (8, 4))
        w = at.parameter("w", (4, 3))
        loss = at.mean(at.tanh(x @ w) ** 2)
        (dw,) = at.grad(loss, [w])
        w_new = w - 0.1 * dw
    plan = at.compile([loss, w_new])
    assert plan.inplace, "the plan should still write some values in place"
    handover = [line.strip() for line in plan.source.splitlines() if line.strip().startswith("o")]
    assert handover[1].startswith("o1 = v") and "_copy" not in handover[1] and "_own" not in handover[1], handover
    X, W = np.ones((8, 4)), np.full((4, 3), 0.1)
    outs = plan.run({x: X, w: W})
    _assert_caller_owns(outs, {"x": X, "w": W})


def test_trainer_run_returns_arrays_the_trainer_does_not_hold() -> None:
    with at.Graph():
        x = at.input("x", (4, 2))
        w = at.parameter("w", (2, 1), init="zeros")
        pred = x @ w
        loss = at.mean(pred ** 2)
        w_view = at.reshape(w, (2,))
    tr = at.Trainer(loss, optimizer=at.optim.SGD(lr=0.1), backend="numpy", seed=0)
    X = np.ones((4, 2))
    wv, ww = tr.run([w_view, w], {x: X})
    _assert_caller_owns([wv, ww], {"x": X})
    wv[...] = 42.0
    ww[...] = 42.0
    np.testing.assert_array_equal(tr.run([w], {x: X})[0], np.zeros((2, 1)))


@pytest.mark.gpu
def test_wgpu_outputs_are_the_callers() -> None:
    with at.Graph():
        x = at.input("x", (100, 50))
        dx = at.grad(at.sum(x), x)
        t = at.transpose(x)
        y = at.tanh(x)
        ids = at.input("ids", (3,), dtype="int")
        r = at.reshape(x, (50, 100))
    X = np.random.default_rng(0).standard_normal((100, 50)).astype(np.float32)
    I = np.array([0, 1, 2])
    outs = at.run([dx, t, y, y, r, ids, x], {x: X, ids: I}, backend="wgpu")
    _assert_caller_owns(outs, {"x": X, "ids": I})
    outs[2][...] = 0.0
    np.testing.assert_allclose(outs[3], np.tanh(X), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(outs[6], X)
