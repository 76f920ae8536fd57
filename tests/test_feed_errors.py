"""Feeds that are wrong say which input and what it expects (issue 11, section 4), on both backends.

Also: zero-size feeds run on the GPU and give numpy's values (an empty sum is 0, an empty mean
NaN, an empty max an error), and a missing feed whose name now means a newer input says so.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import asgteach as at

from wgpu_helpers import need_gpu

BACKENDS = ["numpy", "wgpu"]


def _need(backend: str) -> None:
    """A wgpu case needs an adapter: without one it is skipped loudly (CI=true: failed), by wgpu_helpers.need_gpu."""
    if backend == "numpy":
        return
    need_gpu()


def _raises(fn) -> str:
    with pytest.raises(at.FeedError) as info:
        fn()
    return str(info.value)


# --- ragged nested lists ------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("value", [
    [[1.0, 2.0, 3.0], [4.0, 5.0]],               # the second row is short
    [[1.0, 2.0, 3.0], [4.0, 5.0, [6.0]]],        # a variant: a list where a number should be
], ids=["short-row", "nested-element"])
def test_ragged_feed_names_the_input_and_its_shape(backend, value) -> None:
    _need(backend)
    with at.Graph():
        x = at.input("pixels", (2, 3))
        y = at.sum(x * 2.0)
    msg = _raises(lambda: at.run(y, {x: value}, backend=backend))
    assert "'pixels'" in msg and "(2, 3)" in msg and "same length" in msg, msg


# --- feeding something that is not an input or a parameter ------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("how", ["tensor", "id", "numpy-int"])
def test_feeding_a_computed_node_is_an_error(backend, how) -> None:
    _need(backend)
    with at.Graph():
        x = at.input("x", (3,))
        h = at.tanh(x)
        y = at.sum(h * h)
    key = {"tensor": h, "id": h.node_id, "numpy-int": np.int64(h.node_id)}[how]
    msg = _raises(lambda: at.run(y, {x: np.ones(3), key: np.zeros(3)}, backend=backend))
    assert "cannot feed tanh" in msg and f"#{h.node_id}" in msg and "at.input" in msg, msg


def test_feeding_a_constant_or_an_unknown_id_is_an_error() -> None:
    # variants: a constant (its value is part of the graph), and an id past the end of the graph
    with at.Graph() as g:
        x = at.input("x", (3,))
        c = at.constant(np.ones(3), name="ones")
        y = at.sum(x * c)
    msg = _raises(lambda: at.run(y, {x: np.ones(3), c: np.zeros(3)}))
    assert "cannot feed constant" in msg and "'ones'" in msg, msg
    msg = _raises(lambda: at.run(y, {x: np.ones(3), len(g.nodes) + 5: np.zeros(3)}))
    assert "not a node of this graph" in msg, msg


def test_feeding_an_input_the_outputs_do_not_need_is_still_fine() -> None:
    with at.Graph():
        x = at.input("x", (3,))
        unused = at.input("unused", (2,))
        y = at.sum(x)
    assert at.run(y, {x: np.ones(3), unused: np.ones(2)}) == 3.0


# --- float16 ------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float16, np.longdouble])
def test_half_precision_feed_names_the_input(backend, dtype) -> None:
    _need(backend)
    if np.dtype(dtype) == np.float64:
        pytest.skip("on this platform longdouble is float64, which is accepted")
    with at.Graph():
        x = at.input("weights16", (2, 2))
        ids = at.input("ids", (2,), dtype="int")   # the only other feed is an integer one
        y = at.sum(x) + at.sum(at.embedding(ids, x))
    msg = _raises(lambda: at.run(y, {x: np.ones((2, 2), dtype=dtype), ids: np.array([0, 1])}, backend=backend))
    assert "'weights16'" in msg and np.dtype(dtype).name in msg and "float32 or float64" in msg, msg


# --- a missing feed, after a notebook cell was re-run ------------------------------------------
def test_missing_feed_says_when_the_name_now_means_a_newer_input(monkeypatch) -> None:
    with at.Graph() as g:
        x_old = at.input("x", (3,))
        y = at.sum(x_old * 2.0)            # "cell 2", built on the first x
        x_new = at.input("x", (3,))        # "cell 1" re-run: a NEW input called x
    if g.find("x").id != x_new.node_id:    # until names bind to their most recent node (issue 11, section 1)
        monkeypatch.setattr(g, "find", lambda name: x_new.node if name == "x" else at.Graph.find(g, name))
    msg = _raises(lambda: at.run(y, {"x": np.ones(3)}))
    assert "missing feed for input 'x'" in msg, msg
    assert f"now means input #{x_new.node_id}" in msg and f"older input #{x_old.node_id}" in msg, msg
    assert "re-run the cell" in msg and "by its Tensor" in msg, msg


def test_missing_feed_without_a_rebound_name_has_no_rebinding_note() -> None:
    with at.Graph():
        a = at.input("a", (3,))
        b = at.input("b", (3,))
        y = at.sum(a * b)
    msg = _raises(lambda: at.run(y, {a: np.ones(3)}))
    assert "missing feed for input 'b'" in msg and "now means" not in msg, msg


def test_missing_feed_on_wgpu_says_the_same() -> None:
    _need("wgpu")
    with at.Graph() as g:
        x_old = at.input("x", (3,))
        y = at.sum(x_old * 2.0)
        x_new = at.input("x", (3,))
    if g.find("x").id != x_new.node_id:
        g.find = lambda name: x_new.node if name == "x" else at.Graph.find(g, name)
    msg = _raises(lambda: at.run(y, {"x": np.ones(3, np.float32)}, backend="wgpu"))
    assert f"now means input #{x_new.node_id}" in msg, msg


# --- zero-size feeds on the GPU ---------------------------------------------------------------
ZERO_CASES = {
    "sum-axis0": lambda x: at.sum(x, axis=0),
    "sum-all": lambda x: at.sum(x),
    "mean-axis0": lambda x: at.mean(x, axis=0),
    "var-axis0": lambda x: at.var(x, axis=0),
    "sum-axis1": lambda x: at.sum(x, axis=1),
    "tanh-chain": lambda x: at.tanh(x) * 2.0 + 1.0,
    "matmul": lambda x: x @ at.constant(np.ones((x.shape[1], 2))),
    "matmul-empty-inner": lambda x: at.transpose(x) @ at.constant(np.ones((x.shape[0], 2))),
    "softmax": lambda x: at.softmax(x, axis=-1),
    "max-axis0": lambda x: at.max(x, axis=0),
}


@pytest.mark.parametrize("shape", [(0, 3), (3, 0)])
@pytest.mark.parametrize("case", sorted(ZERO_CASES))
def test_zero_size_feeds_run_on_wgpu_as_on_numpy(case, shape) -> None:
    _need("wgpu")
    with at.Graph():
        x = at.input("x", shape)
        y = ZERO_CASES[case](x)
        outs = [y, at.grad(at.sum(y), x)]   # the gradients too (mean's and var's rules divide by the count)
    feeds = {x: np.zeros(shape, np.float32)}
    results = {}
    for backend in BACKENDS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)   # numpy: "Mean of empty slice"
            try:
                results[backend] = at.run(outs, feeds, backend=backend, on_nan="ignore")
            except at.KernelError as e:   # numpy has no value here (max of nothing): nor may the GPU
                results[backend] = f"KernelError: {str(e).splitlines()[0]}"
    want, got = results["numpy"], results["wgpu"]
    if isinstance(want, str):
        assert isinstance(got, str) and got.split(" failed")[0] == want.split(" failed")[0], (want, got)
        return
    assert not isinstance(got, str), got
    for w, r in zip(want, got):
        assert r.shape == w.shape and r.dtype == w.dtype
        np.testing.assert_array_equal(r, w)   # exact: 0 for a sum, NaN for a mean or variance


def test_zero_size_reductions_have_numpys_values_on_wgpu() -> None:
    """The values themselves, not only the agreement: sum of nothing is 0, mean of nothing is NaN."""
    _need("wgpu")
    with at.Graph():
        x = at.input("x", (0, 3))
        s, m = at.sum(x, axis=0), at.mean(x, axis=0)
    got = at.run([s, m], {x: np.zeros((0, 3), np.float32)}, backend="wgpu", on_nan="ignore")
    np.testing.assert_array_equal(got[0], np.zeros(3, np.float32))
    assert np.isnan(got[1]).all()
    # run twice: the value computed once at compile time stays on the device
    again = at.run([s, m], {x: np.zeros((0, 3), np.float32)}, backend="wgpu", on_nan="ignore")
    np.testing.assert_array_equal(again[0], got[0])
