"""The optimised numpy plan computes what the reference interpreter computes (issue 12, section 2).

``asgteach.backends.reference.interpret`` is the meaning of running a graph: every node in
graph order, ``env[node] = kernel(*inputs)``. The numpy backend's Plan folds constants,
writes in place, frees early, takes a short feed path and runs generated code; none of that
may change a value. On random graphs (tests/test_random_graphs.py's builder, plus their
gradients, plus a few extra outputs: feeds, intermediates, the same node twice) this checks,
in float64 and float32:

* equal values, bit for bit (same kernels in the same order), dtype and shape, on the first
  run (full feed check) and the next (short path);
* the outputs are the caller's: writable, sharing memory with no feed and no other output,
  and scribbling over them changes no later run;
* NaNs: ``on_nan="ignore"`` returns the reference's NaNs; ``"raise"`` raises exactly when the
  reference has one, naming the first node (in graph order) whose reference value has one;
  ``"warn"`` warns exactly then.
"""

from __future__ import annotations

import itertools
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import asgteach as at
from asgteach.backends import numpy_backend
from asgteach.backends.reference import interpret

from test_random_graphs import random_graphs

SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _reference(graph: at.Graph, outputs: list[int], feeds: dict) -> list[np.ndarray]:
    with np.errstate(all="ignore"):   # the interpreter lets numpy warn; the plan never does
        return [np.asarray(v) for v in interpret(graph, outputs, feeds)]


def _assert_same(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert (g.dtype, g.shape) == (w.dtype, w.shape), f"{what}, output {k}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}"
        np.testing.assert_array_equal(g, w, err_msg=f"{what}, output {k}")   # NaN == NaN here


def _assert_caller_owns(outs: list[np.ndarray], feeds: dict, what: str) -> None:
    for k, o in enumerate(outs):
        assert type(o) is np.ndarray and o.flags.writeable, f"{what}: output {k} is not a writable ndarray"
        for f in feeds.values():
            assert not np.shares_memory(o, f), f"{what}: output {k} shares memory with a feed"
    for i, j in itertools.combinations(range(len(outs)), 2):
        assert not np.shares_memory(outs[i], outs[j]), f"{what}: outputs {i} and {j} share memory"


@settings(max_examples=150, **SETTINGS)
@given(random_graphs(), st.data())
def test_plan_matches_the_reference_interpreter(b: Any, data: st.DataObject) -> None:
    g = b.graph
    with g:
        grads = at.grad(b.out if b.out.shape == () else at.sum(b.out), b.xs)
    ids = st.integers(0, len(g.nodes) - 1)
    extra = data.draw(st.lists(ids, max_size=3), label="extra outputs")   # leaves, intermediates, repeats
    outputs = [b.out.node_id, *(t.node_id for t in grads), *extra]
    plan = numpy_backend.compile(g, outputs)
    for dtype in (np.float64, np.float32):
        feeds = {x: v.astype(dtype) for x, v in b.feeds.items()}
        want = _reference(g, outputs, feeds)
        for run in ("first run", "short path", "after scribbling"):
            what = f"{dtype.__name__}, {run}: {b.log} outputs {outputs}"
            got = plan.run(feeds, on_nan="ignore")
            _assert_same(got, want, what)
            _assert_caller_owns(got, feeds, what)
            for o in got:
                o[...] = 7.0   # the caller's to write: no later run may see it


@settings(max_examples=100, **SETTINGS)
@given(random_graphs(), st.sampled_from(["log", "sqrt", "nan feed", "0/0"]), st.sampled_from(["float64", "float32"]))
def test_nan_behaviour_matches_the_reference(b: Any, poison: str, dtype: str) -> None:
    g = b.graph
    feeds = {x: v.astype(dtype) for x, v in b.feeds.items()}
    with g:
        if poison == "log":
            out = at.log(b.out)                  # NaN where out < 0
        elif poison == "sqrt":
            out = at.sqrt(b.out)
        elif poison == "0/0":
            zero = b.out - b.out
            out = zero / zero                    # NaN everywhere
        else:
            out = b.out
            used = [x for x in b.xs if x.node_id in set(g.ancestors([out.node_id]))]
            feeds[used[0]] = feeds[used[0]].copy()
            feeds[used[0]].flat[0] = np.nan
    plan = numpy_backend.compile(g, [out.node_id])
    (want,) = _reference(g, [out.node_id], feeds)
    (got,) = plan.run(feeds, on_nan="ignore")
    _assert_same([got], [want], f"{dtype} {poison}: {b.log}")
    has_nan = bool(np.isnan(want).any())
    event(f"{poison}: {'a NaN' if has_nan else 'no NaN'}")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan.run(feeds, on_nan="warn")
    assert bool(caught) == has_nan, f"{poison}: warned {len(caught)} times, reference NaN: {has_nan}"
    if not has_nan:
        plan.run(feeds)   # on_nan="raise" raises nothing
        return
    with pytest.raises(at.NumericsError) as err:
        plan.run(feeds)
    msg = str(err.value)
    if poison == "nan feed":
        assert "the feed for input" in msg and "contains NaN" in msg, msg
        return
    # the node the plan blames is the first, in graph order, whose reference value has a NaN
    needed = g.ancestors([out.node_id])
    values = dict(zip(needed, _reference(g, needed, feeds)))
    first = next(i for i in needed if values[i].dtype.kind == "f" and np.isnan(values[i]).any())
    assert f"(node #{first} " in msg, f"expected node #{first} {g.nodes[first].op}: {msg}"


def test_integer_ids_and_a_missing_feed_are_handled_alike() -> None:
    with at.Graph() as g:
        x = at.input("x", (3, 4))
        table = at.parameter("table", (4, 2))
        ids = at.input("ids", (5,), dtype="int")
        picked = at.embedding(at.argmax(x, axis=1), table)
        y = at.sum(picked * at.sum(x)) + at.sum(at.embedding(ids, table))
        dx, dt = at.grad(y, [x, table])
    outputs = [y.node_id, dx.node_id, dt.node_id, at.argmax(x, axis=1).node_id, ids.node_id]
    feeds = {x: np.arange(12.0).reshape(3, 4) % 5, table: np.arange(8.0).reshape(4, 2),
             ids: np.array([0, 3, 3, 1, 2])}
    plan = numpy_backend.compile(g, outputs)
    want = _reference(g, outputs, feeds)
    assert want[3].dtype.kind == "i" and want[4].dtype.kind == "i"
    _assert_same(plan.run(feeds), want, "ids")
    del feeds[ids]
    with pytest.raises(at.FeedError) as by_plan:
        plan.run(feeds)
    with pytest.raises(at.FeedError) as by_reference:
        interpret(g, outputs, feeds)
    assert str(by_plan.value) == str(by_reference.value)
    assert "missing feed for input 'ids'" in str(by_plan.value)


def test_the_interpreter_is_short() -> None:
    """It is the lesson: the loop a student steps through stays about a dozen lines."""
    import inspect

    from asgteach.backends import reference

    body = inspect.getsource(reference.interpret).split('"""')[-1]
    lines = [line for line in body.splitlines() if line.strip()]
    assert len(lines) <= 15, "\n".join(lines)
