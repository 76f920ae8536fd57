"""Feeding one input twice is an error that names both keys, on every backend (issue 22).

``{x: A, "x": B}`` (the Tensor and its name), a name and a node id, or the same leaf in
``feeds`` and in ``params=``: two values for one leaf. Which was meant cannot be told, and the
last one used to win without a word. Now ``at.FeedError`` names the leaf (op, name, shape, the
user's line) and both keys. The numpy plan's short feed path (feeds like ones it has checked
before) must not let a double feed through either, once it has learned every key on its own.
"""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at

BACKENDS = ["numpy", pytest.param("wgpu", marks=pytest.mark.gpu)]   # wgpu: no adapter -> skipped loudly (CI: failed)
A = np.array([1.0, 2.0, 3.0], np.float32)
B = np.array([4.0, 5.0, 6.0], np.float32)


def _graph():
    with at.Graph() as g:
        x = at.input("pixels", (3,))   # the line the errors point at
        w = at.parameter("weights", (3,))
        spare = at.input("spare", (2,))   # in the graph, not needed by y
        y = at.sum(x * w)
    return g, x, w, spare, y


def _error(y: at.Tensor, backend: str, feeds: dict, params: dict | None = None) -> str:
    with pytest.raises(at.FeedError) as info:
        at.compile([y], backend).run(feeds, params=params)
    return str(info.value)


@pytest.fixture
def graph():
    return _graph()


def _names_the_input(msg: str, op: str = "input", name: str = "pixels") -> None:
    line = 'x = at.input("pixels", (3,))' if name == "pixels" else 'w = at.parameter("weights", (3,))'
    assert f"{op} '{name}'" in msg and "(3,)" in msg and "fed twice" in msg, msg
    assert "test_feed_twice.py" in msg and line in msg, msg


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("keys", ["tensor+name", "name+id", "tensor+numpy-id"])
def test_two_keys_for_one_input_in_one_dict(backend, keys, graph) -> None:
    g, x, w, spare, y = graph
    first, second = {"tensor+name": (x, "pixels"), "name+id": ("pixels", x.node_id),
                     "tensor+numpy-id": (x, np.int64(x.node_id))}[keys]
    msg = _error(y, backend, {first: A, second: B, w: A})
    _names_the_input(msg)
    said = {"tensor+name": ("its Tensor", "the name 'pixels'"),
            "name+id": ("the name 'pixels'", f"the node id {x.node_id}"),
            "tensor+numpy-id": ("its Tensor", f"the node id {x.node_id}")}[keys]
    assert all(s in msg for s in said), msg


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_same_values_twice_are_still_two_feeds(backend, graph) -> None:
    g, x, w, spare, y = graph
    _names_the_input(_error(y, backend, {x: A, "pixels": A, w: A}))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_parameter_in_feeds_and_by_name_in_params(backend, graph) -> None:
    g, x, w, spare, y = graph
    msg = _error(y, backend, {x: A, w: A}, params={"weights": B})
    _names_the_input(msg, "parameter", "weights")
    assert "its Tensor in feeds" in msg and "the name 'weights' in params" in msg, msg


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_same_key_in_feeds_and_in_params(backend, graph) -> None:
    g, x, w, spare, y = graph
    msg = _error(y, backend, {x: A}, params={w: A, x: B})
    _names_the_input(msg)
    assert "its Tensor in feeds" in msg and "its Tensor in params" in msg and "pass it in one of them" in msg, msg


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_leaf_the_outputs_do_not_need_fed_twice(backend, graph) -> None:
    g, x, w, spare, y = graph
    msg = _error(y, backend, {x: A, w: A, spare: A[:2], "spare": B[:2]})
    assert "input 'spare'" in msg and "fed twice" in msg, msg


@pytest.mark.parametrize("backend", BACKENDS)
def test_after_each_key_ran_on_its_own(backend, graph) -> None:
    """Runs that succeed teach the numpy plan every key (its short path); the double feed still raises."""
    g, x, w, spare, y = graph
    plan = at.compile([y], backend)
    want = float(np.sum(A * A))
    for feeds in ({x: A, w: A}, {"pixels": A, "weights": A}, {x: A, "weights": A, spare: A[:2]},
                  {x: A, w: A, "spare": A[:2]}):
        for _ in range(2):   # the second run of each takes the short path on numpy
            assert float(plan.run(feeds)[0]) == pytest.approx(want)
    for feeds, params, name in [({x: A, "pixels": B, w: A}, None, "pixels"),
                                ({x: A, "pixels": B}, None, "pixels"),   # as many keys as leaves: one twice
                                ({x: A, w: A}, {"weights": B}, "weights"),
                                ({x: A, w: A}, {x: B}, "pixels"),
                                ({x: A, w: A, spare: A[:2], "spare": B[:2]}, None, "spare")]:
        with pytest.raises(at.FeedError, match=f"(?s)'{name}'.*fed twice"):
            plan.run(feeds, params=params)
    assert float(plan.run({x: A, w: A})[0]) == pytest.approx(want)   # and it still runs after the errors


@pytest.mark.parametrize("backend", BACKENDS)
def test_at_run_says_it_too(backend, graph) -> None:
    g, x, w, spare, y = graph
    with pytest.raises(at.FeedError, match="(?s)'pixels'.*fed twice"):
        at.run(y, {x: A, "pixels": B, w: A}, backend=backend)
