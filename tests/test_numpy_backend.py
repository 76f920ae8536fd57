"""The numpy backend: precision, plan caching, pruning, freeing buffers, liveness."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import asgteach as at
from asgteach.backends import numpy_backend


def _mlp():
    with at.Graph() as g:
        x = at.input("x", (4, 3))
        w = at.parameter("w", (3, 2))
        b = at.parameter("b", (2,))
        y = at.sum(at.tanh(x @ w + b) ** 2) / 4.0
        dw, db = at.grad(y, [w, b])
    rng = np.random.default_rng(0)
    feeds = {x: rng.standard_normal((4, 3)), w: rng.standard_normal((3, 2)), b: rng.standard_normal(2)}
    return g, (x, w, b), (y, dw, db), feeds


# --- precision -------------------------------------------------------------------------------
def test_float64_in_float64_out_and_float32_stays_float32() -> None:
    g, xs, outs, feeds = _mlp()
    v64 = at.run(list(outs), feeds)
    assert all(v.dtype == np.float64 for v in v64)
    f32 = {k: v.astype(np.float32) for k, v in feeds.items()}
    v32 = at.run(list(outs), f32)
    assert all(v.dtype == np.float32 for v in v32)
    for a, b in zip(v32, v64):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # reference value by hand
    X, W, B = (feeds[t] for t in xs)
    np.testing.assert_allclose(v64[0], np.sum(np.tanh(X @ W + B) ** 2) / 4.0, rtol=1e-14)


def test_float_constants_follow_the_run_precision() -> None:
    with at.Graph():
        x = at.input("x", (3,))
        y = x * np.array([1.0, 2.0, 3.0]) + 0.1 + at.constant(np.float64(2.0))
    out32 = at.run(y, {x: np.ones(3, dtype=np.float32)})
    assert out32.dtype == np.float32
    out64 = at.run(y, {x: np.ones(3)})
    assert out64.dtype == np.float64
    np.testing.assert_allclose(out64, [3.1, 4.1, 5.1], rtol=1e-15)
    assert at.run(y, {x: np.ones(3, dtype=np.float32)}, dtype=np.float64).dtype == np.float64


def test_mixed_precision_feeds_promote_and_dtype_can_be_forced() -> None:
    with at.Graph():
        a, b = at.input("a", (2,)), at.input("b", (2,))
        y = a + b
    assert at.run(y, {a: np.ones(2, np.float32), b: np.ones(2)}).dtype == np.float64
    assert at.run(y, {a: np.ones(2), b: np.ones(2)}, dtype=np.float32).dtype == np.float32
    with pytest.raises(at.FeedError, match="float32 or float64"):
        at.run(y, {a: np.ones(2), b: np.ones(2)}, dtype=np.float16)


def test_int_outputs_stay_int() -> None:
    with at.Graph():
        x = at.input("x", (2, 3))
        i = at.argmax(x)
        e = at.embedding(i, at.parameter("t", (3, 2)))
    vi, ve = at.run([i, e], {"x": np.array([[0.0, 2.0, 1.0], [5.0, 1.0, 0.0]], np.float32),
                             "t": np.eye(3, 2, dtype=np.float32)})
    assert vi.dtype == np.int64 and list(vi) == [1, 0]
    assert ve.dtype == np.float32


def test_constants_only_graph_runs_in_float64() -> None:
    with at.Graph():
        y = at.constant(np.ones(3)) * 2.0
    out = at.run(y, {})
    assert out.dtype == np.float64 and list(out) == [2.0, 2.0, 2.0]


def test_inputs_and_constants_are_not_overwritten() -> None:
    """Buffer reuse must never write into the caller's arrays or the graph's constants."""
    g, xs, outs, feeds = _mlp()
    saved = {k: v.copy() for k, v in feeds.items()}
    consts = {k: v.copy() for k, v in g.constants.items()}
    first = at.run(list(outs), feeds)
    second = at.run(list(outs), feeds)
    for k in feeds:
        np.testing.assert_array_equal(feeds[k], saved[k])
    for k in consts:
        np.testing.assert_array_equal(g.constants[k], consts[k])
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    # a float32 run twice, too (other cached constants)
    f32 = {k: v.astype(np.float32) for k, v in feeds.items()}
    r1 = at.run(list(outs), f32)
    r2 = at.run(list(outs), f32)
    for a, b in zip(r1, r2):
        np.testing.assert_array_equal(a, b)


def test_outputs_are_not_aliased_between_runs() -> None:
    with at.Graph():
        x = at.input("x", (3,))
        y = at.exp(x) * 2.0
    X = np.zeros(3)
    a = at.run(y, {x: X})
    b = at.run(y, {x: X + 1.0})
    np.testing.assert_allclose(a, 2.0)
    np.testing.assert_allclose(b, 2 * np.e)


# --- compile once, prune, free ----------------------------------------------------------------
def test_plan_is_compiled_once_and_cached(monkeypatch) -> None:
    calls = []
    real = numpy_backend.compile
    monkeypatch.setattr(numpy_backend, "compile", lambda graph, outputs: calls.append(outputs) or real(graph, outputs))
    g, xs, outs, feeds = _mlp()
    at.run(list(outs), feeds)
    at.run(list(outs), feeds)
    at.run(list(outs), {k: v * 2 for k, v in feeds.items()})
    assert len(calls) == 1
    assert at.compile(list(outs)) is at.compile(list(outs))
    at.run(outs[0], feeds)  # other outputs: another plan
    assert len(calls) == 2


def test_pruning_runs_only_what_the_outputs_need() -> None:
    calls = []

    def spy_exp(x):
        calls.append(1)
        return np.exp(x)

    with at.ops.patched("exp", numpy=spy_exp):
        with at.Graph():
            x, unused = at.input("x", (3,)), at.input("unused", (2,))
            y = x * 2.0
            z = at.exp(x) + at.sum(unused)
            plan = at.compile([y])
            ops = [s.node.op for s in plan.steps]
            assert ops == ["mul"]
            assert at.run(y, {x: np.ones(3)}).tolist() == [2.0, 2.0, 2.0]  # `unused` need not be fed
            assert calls == []
            at.run(z, {x: np.ones(3), unused: np.ones(2)})
            assert calls == [1]


def test_buffers_are_freed_after_their_last_use() -> None:
    """exp's value is read only by sum; by the time the next kernel runs it must be gone."""
    refs: list[weakref.ref] = []
    seen: list[bool] = []

    def spy_exp(x):
        out = np.exp(x)
        refs.append(weakref.ref(out))
        return out

    def spy_tanh(x):
        gc.collect()
        seen.append(refs[-1]() is None)
        return np.tanh(x)

    with at.ops.patched("exp", numpy=spy_exp), at.ops.patched("tanh", numpy=spy_tanh):
        with at.Graph():
            x = at.input("x", (1000,))
            e = at.exp(x)
            s = at.sum(e)
            y = at.tanh(s)
            plan = at.compile([y])
            # the plan's free lists: e is dropped by the step that reads it last (sum)
            by_op = {st.node.op: st for st in plan.steps}
            assert plan.slot[e.node_id] in by_op["sum"].free
            assert plan.slot[e.node_id] not in by_op["exp"].free
            assert plan.slot[x.node_id] in by_op["exp"].free
            assert not any(plan.slot[y.node_id] in st.free for st in plan.steps)  # outputs are kept
            at.run(y, {x: np.zeros(1000)})
            at.run(y, {x: np.ones(1000)})
    assert seen == [True, True]


def test_outputs_are_kept_even_if_read_later() -> None:
    with at.Graph():
        x = at.input("x", (3,))
        a = at.exp(x)
        b = a * 2.0
    va, vb = at.run([a, b], {x: np.zeros(3)})
    np.testing.assert_array_equal(va, np.ones(3))
    np.testing.assert_array_equal(vb, 2 * np.ones(3))


def test_liveness_counts_bytes() -> None:
    with at.Graph():
        x = at.input("x", (10,))
        a = at.exp(x)          # 10 values
        s = at.sum(a)          # 1 value; frees a
        y = s * 3.0            # frees s
    plan = at.compile([y])
    rows = plan.liveness(itemsize=8)
    assert [r["op"] for r in rows] == ["exp", "sum", "mul"]
    # leaves: x (80 bytes) and the constant 3.0 (8 bytes) are live from the start
    # after exp: x freed (last use), a alive -> 80 + 8 ; after sum: a freed -> 8 + 8 ; after mul: y + ... -> 8
    assert [r["live_bytes"] for r in rows] == [88, 16, 8]
    assert [r["live_values"] for r in rows] == [2, 2, 1]
    assert plan.liveness()[0]["live_bytes"] == 44  # default itemsize 4 (float32)
    assert "numpy Plan" in repr(plan) and "3 kernels" in repr(plan)


def test_plan_run_accepts_params_separately() -> None:
    g, (x, w, b), outs, feeds = _mlp()
    plan = at.compile(list(outs))
    v1 = plan.run({x: feeds[x]}, params={w: feeds[w], b: feeds[b]})
    v2 = at.run(list(outs), feeds)
    for a, c in zip(v1, v2):
        np.testing.assert_array_equal(a, c)


def test_get_backend_and_available() -> None:
    assert "numpy" in at.available()
    assert at.get_backend("numpy") is numpy_backend
    with pytest.raises(ValueError, match="unknown backend"):
        at.get_backend("cuda")
    info = at.describe()
    assert info["numpy"]["available"] is True
    with pytest.raises(ValueError, match="nothing to run"):
        at.run([], {})


def test_outputs_cannot_corrupt_later_runs() -> None:
    """A constant output is the plan's cached array: it must be read-only, not silently shared."""
    with at.Graph():
        x = at.input("x", (3,))
        c = at.constant(np.ones(3))
        r = at.reshape(c, (3, 1))
        y = x + c
    for dt in (np.float64, np.float32):
        out_c, out_r, out_y = at.run([c, r, y], {x: np.zeros(3, dt)})
        for out in (out_c, out_r):
            try:
                out += 5.0
            except ValueError:
                pass  # read-only: the safe answer
        again = at.run([c, r, y], {x: np.zeros(3, dt)})
        np.testing.assert_array_equal(again[0], np.ones(3))
        np.testing.assert_array_equal(again[1], np.ones((3, 1)))
        np.testing.assert_array_equal(again[2], np.ones(3))


def test_views_of_values_reused_in_place_stay_right() -> None:
    """Outputs that are views (reshape, getitem, transpose, broadcast_to) of a buffer a later
    step could overwrite in place must keep their values."""
    X = np.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]])
    builds = [
        lambda x: [at.reshape(at.exp(x), (3, 2)), at.tanh(at.exp(x)) * 2.0],
        lambda x: [at.exp(x)[0], at.tanh(at.exp(x)) * 2.0],
        lambda x: [(a := at.exp(x))[:, 1:] * 2.0, at.tanh(a) * 3.0],
        lambda x: [at.transpose(a := at.exp(x)), at.tanh(a) + 1.0],
        lambda x: [at.broadcast_to(a := at.exp(x[0]), (2, 3)), at.tanh(a) * 2.0],
        lambda x: [at.reshape(x, (6,)) * 2.0, at.transpose(x) + 1.0],
    ]
    for build in builds:
        with at.Graph():
            x = at.input("x", (2, 3))
            outs = build(x)
        feed = X.copy()
        together = at.run(outs, {x: feed})
        alone = [at.run(o, {x: feed}) for o in outs]
        for a, b in zip(together, alone):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(feed, X)
