"""The structure of the backward graph that at.grad appends, and its values."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import asgteach as at


def caller_line() -> int:
    return sys._getframe(1).f_lineno


def test_backward_nodes_are_marked_and_appended() -> None:
    with at.Graph() as g:
        x = at.input("x", (4, 3))
        w = at.parameter("w", (3, 2))
        y = at.sum(at.tanh(x @ w) ** 2)
        n_forward = len(g)
        dx, dw = at.grad(y, [x, w])
    assert all(n.phase == "forward" for n in g.nodes[:n_forward])
    assert len(g) > n_forward
    assert all(n.phase == "backward" for n in g.nodes[n_forward:])
    assert dx.node.phase == dw.node.phase == "backward"
    assert dx.node.meta["grad_of"] == x.node_id and dw.node.meta["grad_of"] == w.node_id
    # every backward op node says which forward node's rule made it
    vjp_of = {n.meta["vjp_of"] for n in g.nodes[n_forward:] if "vjp_of" in n.meta}
    assert vjp_of <= set(range(n_forward)) and y.node_id in vjp_of
    # the user's graph was not changed in place: forward nodes are the same objects and count
    assert [n.op for n in g.nodes[:n_forward]] == ["input", "parameter", "matmul", "tanh", "constant", "pow", "sum"]


def test_fan_out_accumulates_with_add() -> None:
    with at.Graph() as g:
        x = at.input("x", (3,))
        y = at.sum(at.exp(x) + at.tanh(x) + 3.0 * x)  # x used 3 times
        (dx,) = at.grad(y, [x])
    acc = [n for n in g.nodes if n.meta.get("accumulates") == x.node_id]
    assert len(acc) == 2 and all(n.op == "add" and n.phase == "backward" for n in acc), [n.op for n in acc]
    assert dx.node_id == acc[-1].id
    X = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(at.run(dx, {x: X}), np.exp(X) + 1 - np.tanh(X) ** 2 + 3.0)


def test_accumulation_hook_replaces_the_sum_inside_its_block_only() -> None:
    """``autograd.accumulation`` is the public hook the fan-out bug hunt plants its bug with."""
    from asgteach import autograd

    seen: list[tuple[int, int]] = []

    def last_one_wins(parts, node_id, graph):
        seen.append((node_id, len(parts)))
        return parts[-1]

    with at.Graph():
        x = at.input("x", (3,))
        y = at.sum(x * x + x)          # x: three contributions (two from mul, one from add)
        with autograd.accumulation(last_one_wins):
            bad = at.grad(y, x)
        good = at.grad(y, x)
    X = np.array([1.0, 2.0, -1.0])
    assert (x.node_id, 3) in seen
    np.testing.assert_allclose(at.run(good, {x: X}), 2 * X + 1)
    assert not np.allclose(at.run(bad, {x: X}), 2 * X + 1)
    with pytest.raises(RuntimeError, match="inside"):
        with autograd.accumulation(last_one_wins):
            raise RuntimeError("inside the block")
    with at.Graph():   # restored after an error too
        x = at.input("x", (3,))
        again = at.grad(at.sum(x * x + x), x)
    np.testing.assert_allclose(at.run(again, {x: X}), 2 * X + 1)


def test_fan_out_of_an_intermediate_node() -> None:
    """h feeds three consumers; a '=' instead of '+=' would keep only one contribution."""
    with at.Graph():
        x = at.input("x", (2, 2))
        h = at.tanh(x)
        y = at.sum(h * h) + at.sum(h) + at.mean(h @ h)
        (dx,) = at.grad(y, [x])
    X = np.array([[0.1, -0.3], [0.7, 0.2]])
    H = np.tanh(X)
    dh = 2 * H + 1 + (np.ones((2, 2)) / 4 @ H.T) + (H.T @ np.ones((2, 2)) / 4)
    np.testing.assert_allclose(at.run(dx, {x: X}), dh * (1 - H**2), rtol=1e-12)
    rep = at.gradcheck(y, [x], {x: X})
    assert rep.ok, rep.summary()


def test_same_input_twice_in_one_op() -> None:
    with at.Graph():
        x = at.input("x", (3,))
        (dx,) = at.grad(at.sum(x * x), [x])
        (dm,) = at.grad(at.sum(at.matmul(x, x)), [x])
    X = np.array([1.0, 2.0, -3.0])
    np.testing.assert_allclose(at.run(dx, {x: X}), 2 * X)
    np.testing.assert_allclose(at.run(dm, {x: X}), 2 * X)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "maximum", "pow", "where"])
def test_broadcast_vjp_uses_sum_to(op: str) -> None:
    with at.Graph() as g:
        a, b = at.input("a", (4, 3)), at.input("b", (3,))
        if op == "where":
            out = at.where(at.greater(a, 0.0), a, b)
        else:
            out = getattr(at, op)(a, b)
        n = len(g)
        at.grad(at.sum(out), [b])
    sum_to_nodes = [nd for nd in g.nodes[n:] if nd.op == "sum_to" and nd.meta.get("vjp_of") == out.node_id]
    assert sum_to_nodes, f"{op}: no sum_to in the backward graph of a broadcast operand"
    assert sum_to_nodes[-1].shape == (3,)


def test_no_sum_to_without_broadcasting() -> None:
    with at.Graph() as g:
        a, b = at.input("a", (4, 3)), at.input("b", (4, 3))
        n = len(g)
        at.grad(at.sum(a * b / a), [a, b])
    assert not [nd for nd in g.nodes[n:] if nd.op == "sum_to" and nd.meta.get("vjp_of") not in (None,)
                and g.nodes[nd.meta["vjp_of"]].op in ("mul", "div")]


def test_non_scalar_y_needs_a_seed() -> None:
    with at.Graph():
        x = at.input("x", (2, 3))
        y = x * 2.0
        line = caller_line() + 2
        with pytest.raises(ValueError) as e:
            at.grad(y, [x])
    msg = str(e.value)
    assert "(2, 3)" in msg and "scalar" in msg and "seed=" in msg
    assert f"test_autograd.py:{line}" in msg


def test_seed_gives_the_vjp() -> None:
    rng = np.random.default_rng(0)
    X, S = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    with at.Graph():
        x = at.input("x", (2, 3))
        y = at.tanh(x) * 3.0
        (dx,) = at.grad(y, [x], seed=S)
        s = at.input("s", (2, 3))
        (dx2,) = at.grad(y, [x], seed=s)
        with pytest.raises(ValueError, match="seed has shape"):
            at.grad(y, [x], seed=np.ones(3))
    np.testing.assert_allclose(at.run(dx, {x: X}), S * 3 * (1 - np.tanh(X) ** 2))
    np.testing.assert_allclose(at.run(dx2, {x: X, s: S}), S * 3 * (1 - np.tanh(X) ** 2))


def test_unconnected_input_gets_zeros() -> None:
    with at.Graph():
        x, z = at.input("x", (3,)), at.input("z", (2, 2))
        y = at.sum(x * x)
        dx, dz = at.grad(y, [x, z])
        d_single = at.grad(y, z)
    assert isinstance(d_single, at.Tensor)
    assert dz.shape == (2, 2)
    vx, vz, vs = at.run([dx, dz, d_single], {x: np.ones(3)})  # z need not be fed: nothing reads it
    np.testing.assert_array_equal(vz, np.zeros((2, 2)))
    np.testing.assert_array_equal(vs, np.zeros((2, 2)))
    np.testing.assert_array_equal(vx, 2 * np.ones(3))


def test_grad_wrt_int_input_is_a_type_error() -> None:
    with at.Graph():
        ids = at.input("ids", (3,), dtype="int")
        t = at.parameter("t", (4, 2))
        y = at.sum(at.embedding(ids, t))
        with pytest.raises(TypeError, match="ids.*integers"):
            at.grad(y, [ids])
        with pytest.raises(TypeError, match="Tensors"):
            at.grad(y, [np.ones(3)])


def test_passes_record_reverse_topological_order() -> None:
    with at.Graph() as g:
        x = at.input("x", (3,))
        w = at.parameter("w", (3,))
        a = at.exp(x * w)
        b = at.tanh(x)
        y = at.sum(a * b + a)
        dx, dw = at.grad(y, [x, w])
    assert len(g.passes) == 1
    p = g.passes[0]
    assert p["kind"] == "grad" and p["y"] == y.node_id
    assert g.nodes[p["seed"]].phase == "backward"
    order = p["order"]
    processed = [i for i in g.ancestors([y.node_id]) if not at.ops.REGISTRY[g.nodes[i].op].leaf
                 and g.nodes[i].op != "constant"]
    assert order == sorted(processed, reverse=True)
    # topological: every node comes before (in the sweep) the nodes that it reads
    pos = {nid: k for k, nid in enumerate(order)}
    for nid in order:
        for i in g.nodes[nid].inputs:
            if i in pos:
                assert pos[nid] < pos[i]
    assert p["grads"][str(x.node_id)] == dx.node_id and p["grads"][str(w.node_id)] == dw.node_id
    assert "test_autograd.py" in p["source"]
    at.grad(y, [w])
    assert len(g.passes) == 2


def test_grad_only_differentiates_what_is_needed() -> None:
    """Nodes that no x reaches get no backward nodes (no dead nodes to draw)."""
    with at.Graph() as g:
        x = at.input("x", (3,))
        c = at.input("c", (3,))
        k = at.exp(c) * 2.0          # does not depend on x
        y = at.sum(x * k)
        at.grad(y, [x])
    assert not any(n.meta.get("vjp_of") in (k.node_id,) for n in g.nodes)
    assert g.passes[-1]["order"] == [y.node_id, y.node_id - 1]


def test_grad_of_intermediate_node() -> None:
    with at.Graph():
        x = at.input("x", (3,))
        h = at.exp(x)
        y = at.sum(h * h)
        (dh,) = at.grad(y, [h])
    X = np.array([0.0, 1.0, -1.0])
    np.testing.assert_allclose(at.run(dh, {x: X}), 2 * np.exp(X))


def test_wrong_shape_rule_is_caught_naming_the_op() -> None:
    def no_sum_to(c, g):  # the RustyASG bug: forgot to un-broadcast
        a, b = c.inputs
        return g / b, at.neg(g) * c.out / b

    with at.Graph():
        a, b = at.input("a", (4, 3)), at.input("b", (3,))
        line = caller_line() + 1
        y = at.sum(a / b)
        with at.ops.patched("div", vjp=no_sum_to):
            with pytest.raises(ValueError) as e:
                at.grad(y, [a, b])
    msg = str(e.value)
    assert "div" in msg and "(4, 3)" in msg and "(3,)" in msg and "sum_to" in msg
    assert f"test_autograd.py:{line}" in msg


def test_rule_returning_wrong_count_is_caught() -> None:
    with at.Graph():
        x = at.input("x", (3,))
        y = at.sum(at.exp(x))
        with at.ops.patched("exp", vjp=lambda c, g: (g, g)):
            with pytest.raises(RuntimeError, match="exp returned 2 gradients for 1 inputs"):
                at.grad(y, [x])


def test_grads_mix_graphs_refused() -> None:
    with at.Graph():
        x = at.input("x", (3,))
    with at.Graph():
        z = at.input("z", (3,))
        y = at.sum(z)
    with pytest.raises(ValueError, match="one graph"):
        at.grad(y, [x])
