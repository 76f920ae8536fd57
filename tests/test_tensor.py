"""Tensor: operators with Python scalars and numpy arrays on both sides, methods, identity."""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at

X = np.array([[1.0, -2.0, 3.0], [0.5, 4.0, -1.5]])
F = np.array([2.0, -4.0, 0.5])


def _run(build):
    with at.Graph():
        x = at.input("x", (2, 3))
        f = at.input("f", (3,))
        out = build(x, f)
    assert isinstance(out, at.Tensor)
    return at.run(out, {x: X, f: F}), out


@pytest.mark.parametrize("build,expect", [
    (lambda x, f: 2 * x, lambda: 2 * X),
    (lambda x, f: x * 2, lambda: X * 2),
    (lambda x, f: x / 3.0, lambda: X / 3.0),
    (lambda x, f: 10.0 / f, lambda: 10.0 / F),
    (lambda x, f: 1 - x, lambda: 1 - X),
    (lambda x, f: x - 1, lambda: X - 1),
    (lambda x, f: 3 + x, lambda: 3 + X),
    (lambda x, f: np.ones(3) + x, lambda: np.ones(3) + X),
    (lambda x, f: x + np.ones(3), lambda: X + np.ones(3)),
    (lambda x, f: np.arange(3.0) * x, lambda: np.arange(3.0) * X),
    (lambda x, f: np.full((2, 3), 2.0) / x, lambda: 2.0 / X),
    (lambda x, f: np.ones(3) - f, lambda: 1 - F),
    (lambda x, f: x ** 2, lambda: X ** 2),
    (lambda x, f: 2.0 ** f, lambda: 2.0 ** F),
    (lambda x, f: abs(x) ** f, lambda: np.abs(X) ** F),
    (lambda x, f: x @ f, lambda: X @ F),
    (lambda x, f: np.ones((4, 2)) @ x, lambda: np.ones((4, 2)) @ X),
    (lambda x, f: x @ np.ones(3), lambda: X @ np.ones(3)),
    (lambda x, f: -x, lambda: -X),
    (lambda x, f: +x, lambda: X),
    (lambda x, f: abs(f), lambda: np.abs(F)),
    (lambda x, f: x.T, lambda: X.T),
    (lambda x, f: x.sum(axis=1, keepdims=True), lambda: X.sum(axis=1, keepdims=True)),
    (lambda x, f: x.sum(), lambda: X.sum()),
    (lambda x, f: x.mean(axis=0), lambda: X.mean(axis=0)),
    (lambda x, f: x.max(axis=-1), lambda: X.max(axis=-1)),
    (lambda x, f: x.var(axis=1), lambda: X.var(axis=1)),
    (lambda x, f: x.reshape(3, 2), lambda: X.reshape(3, 2)),
    (lambda x, f: x.reshape((6,)), lambda: X.reshape(6)),
    (lambda x, f: x.reshape(-1, 1), lambda: X.reshape(-1, 1)),
    (lambda x, f: x.transpose(), lambda: X.T),
    (lambda x, f: x.transpose(1, 0), lambda: X.T),
    (lambda x, f: x[1], lambda: X[1]),
    (lambda x, f: x[:, ::2], lambda: X[:, ::2]),
    (lambda x, f: x[::-1, ::-2], lambda: X[::-1, ::-2]),
    (lambda x, f: x[-1, 1:], lambda: X[-1, 1:]),
    (lambda x, f: x[None, ..., 0], lambda: X[None, ..., 0]),
    (lambda x, f: x[0, 2], lambda: X[0, 2]),
    (lambda x, f: x > 0.5, lambda: (X > 0.5).astype(float)),
    (lambda x, f: 0.5 < x, lambda: (X > 0.5).astype(float)),
    (lambda x, f: x < f, lambda: (X < F).astype(float)),
    (lambda x, f: x.exp().log(), lambda: X),
    (lambda x, f: abs(x).sqrt(), lambda: np.sqrt(np.abs(X))),
    (lambda x, f: x.tanh() + x.sigmoid() + x.relu(), lambda: np.tanh(X) + 1 / (1 + np.exp(-X)) + np.maximum(X, 0)),
    (lambda x, f: x.softmax(axis=0), lambda: np.exp(X) / np.exp(X).sum(axis=0)),
], ids=lambda v: None)
def test_operators_and_methods(build, expect) -> None:
    got, out = _run(build)
    want = expect()
    assert out.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)


def test_scalar_mixing_makes_constants_in_the_same_graph() -> None:
    with at.Graph() as g:
        x = at.input("x", (3,))
        y = 10.0 / x
    assert y.op == "div"
    num = g.nodes[y.node.inputs[0]]
    assert num.op == "constant" and num.name == "10" and num.dtype == "float"
    assert g.constants[num.id].dtype == np.float64 and g.constants[num.id] == 10.0


def test_int_scalar_with_float_tensor_is_float() -> None:
    with at.Graph():
        x = at.input("x", (2,))
        y = 2 * x + 1
    assert y.dtype == "float"
    out = at.run(y, {x: np.array([1.0, 2.0], np.float32)})
    assert out.dtype == np.float32 and out.tolist() == [3.0, 5.0]


def test_identity_equality_and_hash() -> None:
    with at.Graph() as g:
        x = at.input("x", (3,))
        y = x + 1.0
    same = at.Tensor(g, x.node_id)
    assert same == x and hash(same) == hash(x) and not (same != x)
    assert x != y
    assert {x: 1, same: 2} == {x: 2}
    assert x != "x" and x != x.node_id


def test_properties_and_repr() -> None:
    with at.Graph():
        x = at.input("img", (2, 3, 4))
        ids = at.input("ids", (5,), dtype="int")
    assert x.shape == (2, 3, 4) and x.ndim == 3 and x.size == 24 and x.dtype == "float"
    assert x.name == "img" and x.op == "input" and len(x) == 2
    assert ids.dtype == "int"
    r = repr(x)
    assert "input" in r and "'img'" in r and "(2, 3, 4)" in r and "forward" in r
    with at.Graph():
        s = at.input("s", ())
    with pytest.raises(TypeError, match="0-d"):
        len(s)


def test_no_truth_value_and_no_iteration() -> None:
    with at.Graph():
        x = at.input("x", (3,))
        with pytest.raises(TypeError, match="define-then-run"):
            bool(x)
        with pytest.raises(TypeError, match="define-then-run"):
            x and x  # noqa: B018
        with pytest.raises(TypeError, match="iterated"):
            iter(x)


def test_numpy_on_the_left_does_not_loop_elementwise() -> None:
    """``np.ones(3) + x`` must be one add node, not an object array of 3 tensors."""
    with at.Graph() as g:
        x = at.input("x", (3,))
        y = np.ones(3) + x
        z = np.float64(2.0) * x
    assert isinstance(y, at.Tensor) and y.op == "add" and y.shape == (3,)
    assert isinstance(z, at.Tensor) and z.op == "mul"
    assert sum(1 for n in g.nodes if n.op == "add") == 1


# --- asking a Tensor for numbers: every way explains define-then-run and names the call that gives them ---

def _loss_of_a_layer() -> tuple[at.Tensor, at.Tensor]:
    with at.Graph():
        x = at.input("x", (4, 3))
        loss = at.mean(at.nn.Linear(3, 2, name="lin")(x) ** 2)  # the line the messages quote
    return x, loss


CONVERSIONS = {
    "float": (float, "float() of a Tensor", "float(value)"),
    "int": (int, "int() of a Tensor", "int(value)"),
    "complex": (complex, "complex() of a Tensor", "complex(value)"),
    "bool": (bool, "`if`, `and`, `or`, `not` or bool()", "at.where(cond, a, b)"),
    "if": (lambda t: 1 if t else 0, "`if`", "at.where"),
    "np.asarray": (np.asarray, "np.asarray() / np.array() of a Tensor", "# a numpy array"),
    "np.array of a list": (lambda t: np.array([t, t]), "np.asarray() / np.array()", "# a numpy array"),
    "np.float64": (np.float64, "np.asarray() / np.array() of a Tensor", "# a numpy array"),
    ".numpy()": (lambda t: t.numpy(), "Tensor.numpy()", "# a numpy array"),
    ".item()": (lambda t: t.item(), "Tensor.item()", "value.item()"),
    "operator.index": (__import__("operator").index, "a Tensor used as an integer", "range(int(value))"),
    "range": (range, "a Tensor used as an integer", "range(int(value))"),
    "a list index": (lambda t: [1, 2, 3][t], "a Tensor used as an integer", "range(int(value))"),
    "f-string": (lambda t: f"{t:.3f}", 'formatting a Tensor as a number (f"{t:.3f}")', 'f"{value:.3f}"'),
}


@pytest.mark.parametrize("how", list(CONVERSIONS))
def test_asking_for_numbers_explains_define_then_run(how: str) -> None:
    convert, asked, then = CONVERSIONS[how]
    x, loss = _loss_of_a_layer()
    with pytest.raises(TypeError) as err:
        convert(loss)
    msg = str(err.value)
    assert msg.startswith(asked), msg
    assert "has no value yet (define-then-run)" in msg
    assert f"node #{loss.node_id} (mean, shape ())" in msg and "test_tensor.py:" in msg
    assert "loss = at.mean(at.nn.Linear(3, 2, name=\"lin\")(x) ** 2)" in msg  # the user's own line
    assert 'value = at.run(tensor, {"x": ...})' in msg and then in msg
    assert "the inputs it needs fed: x (4, 3)" in msg
    assert "it also reads 2 parameters (lin.weight (3, 2), lin.bias (2,))" in msg and "trainer.run([tensor]" in msg


def test_asking_an_input_for_numbers_and_what_still_works() -> None:
    with at.Graph():
        x = at.input("x", (3,))
        y = x * 2.0
    with pytest.raises(TypeError, match=r"node #0 \(input 'x', shape \(3,\)\)") as err:
        float(x)
    assert "parameter" not in str(err.value)
    # a graph of constants only needs no feeds
    with at.Graph():
        c = at.constant(np.ones(2)) + 1.0
    with pytest.raises(TypeError, match=r"value = at\.run\(tensor, \{\}\)"):
        c.item()
    # what is no conversion keeps working: the repr in text, numpy on the left, and the numbers after a run
    assert f"{y}" == repr(y) and "{}".format(y) == repr(y)
    assert isinstance(np.ones(3) * x, at.Tensor)
    value = at.run(y, {x: np.arange(3.0)})
    assert float(value[1]) == 2.0 and value.tolist() == [0.0, 2.0, 4.0]
