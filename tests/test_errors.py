"""Bad inputs: every error says what happened, where (op, shapes, the user's file:line) and what to do.

Each test records the line that makes the bad node (``line, make = caller_line(), lambda: ...``:
the lambda's body is on the same line) and checks the message points at this file and line.
"""

from __future__ import annotations


import numpy as np
import pytest

import asgteach as at
from error_helpers import caller_line
from error_helpers import raises_text as _raises

HERE = "test_errors.py"




# --- shape errors at build time -------------------------------------------------------------
def test_add_shape_mismatch() -> None:
    with at.Graph():
        a, b = at.input("a", (4, 3)), at.input("b", (4,))
        line, make = caller_line(), (lambda: a + b)
        msg = _raises(at.ShapeError, make)
    assert msg.startswith("add:")
    assert "(4, 3)" in msg and "(4,)" in msg and "axis -1" in msg
    assert f"{HERE}:{line}" in msg
    assert "line, make = caller_line(), (lambda: a + b)" in msg  # the user's source text is quoted
    assert "what to do" in msg


def test_shape_error_carries_structured_fields() -> None:
    with at.Graph():
        a, b = at.input("a", (2, 3)), at.input("b", (3, 2))
        with pytest.raises(at.ShapeError) as e:
            at.mul(a, b)
    err = e.value
    assert err.op == "mul" and err.shapes == ((2, 3), (3, 2)) and HERE in err.source
    assert isinstance(err, ValueError)


def test_matmul_inner_dimensions() -> None:
    with at.Graph():
        x, w = at.input("x", (4, 3)), at.parameter("w", (4, 2))
        line, make = caller_line(), (lambda: x @ w)
        msg = _raises(at.ShapeError, make)
    assert msg.startswith("matmul:") and "(4, 3)" in msg and "(4, 2)" in msg and "inner" in msg
    assert f"{HERE}:{line}" in msg and "x.T" in msg
    with at.Graph():
        a, b = at.input("a", (2, 2, 3)), at.input("b", (3, 3, 2))
        line, make = caller_line(), (lambda: a @ b)
        msg = _raises(at.ShapeError, make)
    assert "matmul" in msg and f"{HERE}:{line}" in msg and "(2, 2, 3)" in msg
    with at.Graph():
        s, v = at.input("s", ()), at.input("v", (3,))
        msg = _raises(at.ShapeError, lambda: s @ v)
    assert "at least 1-D" in msg


def test_concat_shapes() -> None:
    with at.Graph():
        a, b = at.input("a", (2, 3)), at.input("b", (2, 4))
        line, make = caller_line(), (lambda: at.concat([a, b], axis=0))
        msg = _raises(at.ShapeError, make)
    assert msg.startswith("concat:") and "(2, 3)" in msg and "(2, 4)" in msg and "axis 0" in msg
    assert f"{HERE}:{line}" in msg
    with at.Graph():
        a = at.input("a", (2, 3))
        line, make = caller_line(), (lambda: at.concat([a, a], axis=2))
        msg = _raises(at.ShapeError, make)
    assert "concat" in msg and "axis 2 is out of range" in msg and f"{HERE}:{line}" in msg


def test_reshape_sizes() -> None:
    with at.Graph():
        x = at.input("x", (4, 3))
        line, make = caller_line(), (lambda: x.reshape(5, 2))
        msg = _raises(at.ShapeError, make)
        assert msg.startswith("reshape:") and "(4, 3)" in msg and "(5, 2)" in msg and "12" in msg
        assert f"{HERE}:{line}" in msg
        line, make = caller_line(), (lambda: x.reshape(-1, 5))
        msg = _raises(at.ShapeError, make)
        assert "reshape" in msg and f"{HERE}:{line}" in msg
        msg = _raises(at.ShapeError, lambda: x.reshape(-1, -1))
        assert "only one -1" in msg


def test_layer_norm_weight_shape() -> None:
    with at.Graph():
        x, w, b = at.input("x", (2, 4)), at.parameter("w", (3,)), at.parameter("b", (4,))
        line, make = caller_line(), (lambda: at.layer_norm(x, w, b))
        msg = _raises(at.ShapeError, make)
    assert msg.startswith("layer_norm:") and "(2, 4)" in msg and "(3,)" in msg and "(4,)" in msg
    assert f"{HERE}:{line}" in msg


def test_transpose_axes() -> None:
    with at.Graph():
        x = at.input("x", (2, 3, 4))
        line, make = caller_line(), (lambda: at.transpose(x, (0, 0, 1)))
        msg = _raises(at.ShapeError, make)
        assert msg.startswith("transpose:") and "(0, 0, 1)" in msg and "(2, 3, 4)" in msg
        assert f"{HERE}:{line}" in msg
        msg = _raises(at.ShapeError, lambda: x.transpose(1, 0))
        assert "not a permutation" in msg


@pytest.mark.parametrize("fn", [
    lambda x: at.sum(x, axis=3), lambda x: at.mean(x, axis=-4), lambda x: at.max(x, axis=(0, 0)),
    lambda x: at.softmax(x, axis=5), lambda x: at.argmax(x, axis=3), lambda x: at.var(x, axis=1.5),
], ids=["sum", "mean", "max_repeat", "softmax", "argmax", "var_float"])
def test_bad_axis(fn) -> None:
    with at.Graph():
        x = at.input("x", (2, 3, 4))
        line, make = caller_line(), (lambda: fn(x))
        msg = _raises(at.ShapeError, make)
    assert "(2, 3, 4)" in msg and "axis" in msg
    # the user's line is the lambda in the parametrize list, a frame further out: check the file
    assert HERE in msg
    assert any(op in msg.split(":")[0] for op in ("sum", "mean", "max", "softmax", "argmax", "var"))
    del line


def test_bad_axis_points_at_the_calling_line() -> None:
    with at.Graph():
        x = at.input("x", (2, 3))
        line, make = caller_line(), (lambda: x.sum(axis=2))
        msg = _raises(at.ShapeError, make)
    assert msg.startswith("sum:") and "axis 2 is out of range for a 2-d tensor" in msg
    assert f"{HERE}:{line}" in msg


def test_getitem_out_of_range_and_unsupported() -> None:
    with at.Graph():
        x = at.input("x", (2, 3))
        line, make = caller_line(), (lambda: x[5])
        msg = _raises(at.ShapeError, make)
        assert msg.startswith("getitem:") and f"{HERE}:{line}" in msg and "(2, 3)" in msg
        msg = _raises(at.ShapeError, lambda: x[np.array([0, 1])])
        assert "embedding" in msg


def test_int_tensor_into_float_op() -> None:
    with at.Graph():
        ids = at.input("ids", (3,), dtype="int")
        line, make = caller_line(), (lambda: at.exp(ids))
        msg = _raises(TypeError, make)
    assert "exp" in msg and "ids" in msg and "int" in msg and f"{HERE}:{line}" in msg


def test_tensors_from_two_graphs() -> None:
    with at.Graph():
        a = at.input("a", (3,))
    with at.Graph():
        b = at.input("b", (3,))
    assert "different graphs" in _raises(ValueError, lambda: a + b)


# --- feeds ----------------------------------------------------------------------------------
def _graph():
    g = at.Graph()
    with g:
        x = at.input("x", (2, 3))
        line = caller_line() + 1
        ids = at.input("ids", (2,), dtype="int")
        t = at.parameter("table", (4, 3))
        y = at.sum(x * at.embedding(ids, t))
    return g, x, ids, t, y, line


def _feeds(x, ids, t):
    return {x: np.ones((2, 3)), ids: np.array([0, 3]), t: np.ones((4, 3))}


def test_missing_feed_names_the_input() -> None:
    g, x, ids, t, y, line = _graph()
    feeds = _feeds(x, ids, t)
    del feeds[ids]
    msg = _raises(at.FeedError, lambda: at.run(y, feeds))
    assert "missing feed" in msg and "'ids'" in msg and "(2,)" in msg
    assert f"{HERE}:{line}" in msg  # where the input was declared


def test_feed_by_name_and_unknown_name() -> None:
    g, x, ids, t, y, _ = _graph()
    value = at.run(y, {"x": np.ones((2, 3)), "ids": np.array([0, 3]), "table": np.ones((4, 3))})
    assert value == 6.0
    msg = _raises(at.FeedError, lambda: at.run(y, {"xx": np.ones((2, 3))}))
    assert "'xx'" in msg and "known" in msg and "x" in msg


def test_feed_with_wrong_shape() -> None:
    g, x, ids, t, y, _ = _graph()
    feeds = {**_feeds(x, ids, t), x: np.ones((3, 2))}
    msg = _raises(at.FeedError, lambda: at.run(y, feeds))
    assert "'x'" in msg and "(3, 2)" in msg and "(2, 3)" in msg


@pytest.mark.parametrize("which,value,words", [
    ("x", np.ones((2, 3), dtype=np.int64), ["'x'", "int64", "float"]),
    ("x", np.ones((2, 3), dtype=bool), ["'x'", "bool", "float"]),
    ("x", np.ones((2, 3), dtype=np.float16), ["'x'", "float16"]),
    ("ids", np.array([0.0, 3.0]), ["'ids'", "float64", "integer"]),
    ("ids", np.array([True, False]), ["'ids'", "bool", "integer"]),
])
def test_feed_with_wrong_dtype(which, value, words) -> None:
    g, x, ids, t, y, _ = _graph()
    feeds = {**_feeds(x, ids, t), {"x": x, "ids": ids}[which]: value}
    msg = _raises(at.FeedError, lambda: at.run(y, feeds))
    for w in words:
        assert w in msg, (w, msg)


def test_feed_key_from_another_graph() -> None:
    g, x, ids, t, y, _ = _graph()
    with at.Graph():
        other = at.input("x", (2, 3))
    msg = _raises(at.FeedError, lambda: at.run(y, {**_feeds(x, ids, t), other: np.ones((2, 3))}))
    assert "different graph" in msg


# --- numerics ----------------------------------------------------------------------------
def test_nan_in_a_feed_names_the_feed() -> None:
    with at.Graph():
        x = at.input("x", (2, 3))
        y = at.sum(x * 2.0)
    X = np.ones((2, 3))
    X[1, 2] = np.nan
    msg = _raises(at.NumericsError, lambda: at.run(y, {x: X}))
    assert "feed" in msg and "'x'" in msg and "NaN" in msg and "(1, 2)" in msg


def test_log_of_negative_names_the_log_node() -> None:
    with at.Graph():
        x = at.input("x", (3,))
        line, lg = caller_line(), at.log(x - 1.0)
        y = at.sum(lg * 2.0)
    msg = _raises(at.NumericsError, lambda: at.run(y, {x: np.array([2.0, 0.5, 3.0])}))
    assert msg.startswith("NaN first appears in log") and f"#{lg.node_id}" in msg
    assert f"{HERE}:{line}" in msg and "negative" in msg and "(1,)" in msg
    assert isinstance(at.NumericsError("x"), FloatingPointError)


def test_nan_in_the_backward_pass_names_the_phase() -> None:
    with at.Graph():
        x = at.input("x", (2,))
        (dx,) = at.grad(at.sum(at.sqrt(x)), [x])
    msg = _raises(at.NumericsError, lambda: at.run(dx, {x: np.array([-1.0, 4.0])}))
    assert "sqrt" in msg


def test_on_nan_ignore_and_warn() -> None:
    with at.Graph():
        x = at.input("x", (3,))
        y = at.log(x)
    X = np.array([1.0, -1.0, 2.0])
    out = at.run(y, {x: X}, on_nan="ignore")
    assert np.isnan(out[1]) and out[0] == 0.0
    with pytest.warns(RuntimeWarning, match="NaN first appears in log"):
        out = at.run(y, {x: X}, on_nan="warn")
    assert np.isnan(out[1])


def test_embedding_id_out_of_range_is_a_kernel_error() -> None:
    with at.Graph():
        ids = at.input("ids", (3,), dtype="int")
        t = at.parameter("table", (4, 2))
        line, e = caller_line(), at.embedding(ids, t)
    msg = _raises(at.KernelError, lambda: at.run(e, {ids: np.array([0, 7, 1]), t: np.ones((4, 2))}))
    assert "embedding" in msg and f"#{e.node_id}" in msg and "7 at index (1,)" in msg and "[0, V) with V = 4" in msg
    assert f"{HERE}:{line}" in msg


def test_tensor_in_if_is_a_type_error() -> None:
    with at.Graph():
        x = at.input("x", (3,))
        msg = _raises(TypeError, lambda: bool(x > 0.0))
        assert "at.where" in msg and "at.run" in msg
        with pytest.raises(TypeError):
            if x:
                pass
        with pytest.raises(TypeError, match="iterated"):
            list(x)


def test_grad_through_argmax_names_its_line() -> None:
    with at.Graph():
        x = at.input("x", (4,))
        line, i = caller_line(), at.argmax(x)
        msg = _raises(at.NotDifferentiableError, lambda: at.grad(i, [x]))
    assert "argmax" in msg and f"{HERE}:{line}" in msg and "integer" in msg


def test_parameter_unknown_init_and_bad_shape() -> None:
    with at.Graph():
        line, make = caller_line(), (lambda: at.parameter("w", (2, 2), init="glorious"))
        msg = _raises(ValueError, make)
        assert "glorious" in msg and "xavier_uniform" in msg and f"{HERE}:{line}" in msg
        assert "negative" in _raises(at.ShapeError, lambda: at.input("x", (2, -1)))
        assert "tuple of ints" in _raises(at.ShapeError, lambda: at.input("x", ("a",)))
        assert "float or int" in _raises(TypeError, lambda: at.input("x", (2,), dtype=np.complex128))
