"""The ASG: append-only nodes, sources, the context manager, JSON round trips."""

from __future__ import annotations

import json
import sys
import threading

import numpy as np
import pytest

import asgteach as at


def caller_line() -> int:
    return sys._getframe(1).f_lineno


def _rich_graph():
    """A graph with every kind of attribute the JSON has to carry, and a backward pass."""
    g = at.Graph("rich")
    with g:
        x = at.input("x", (4, 3))
        ids = at.input("ids", (2,), dtype="int")
        w = at.parameter("w", (3, 3), init="kaiming_normal", layer="fc1", role="weight")
        table = at.parameter("table", (5, 3), init="normal", std=0.02)
        h = at.layer_norm(at.gelu(x @ w, approximate="tanh"), eps=1e-3)
        h = h[1:, ::-1] + at.embedding(ids, table)[None, 0]
        h = at.transpose(at.reshape(h, (3, 1, 3)), (2, 0, 1))
        h = at.concat([h, h * np.arange(3.0)[:, None, None]], axis=-1)
        y = at.mean(at.softmax(h, axis=1).var(axis=(0, 2), keepdims=True)) + at.sum(at.max(x, axis=-1))
        grads = at.grad(y, [x, w, table])
    feeds = {x: np.random.default_rng(0).standard_normal((4, 3)), ids: np.array([1, 4]),
             w: np.random.default_rng(1).standard_normal((3, 3)),
             table: np.random.default_rng(2).standard_normal((5, 3))}
    return g, y, grads, feeds


def test_node_order_is_topological_and_append_only() -> None:
    g, y, grads, _ = _rich_graph()
    for n in g.nodes:
        assert n.id == g.nodes.index(n)
        assert all(i < n.id for i in n.inputs)
    n_before = len(g)
    with g:
        at.exp(y)
    assert len(g) == n_before + 1 and g.nodes[-1].inputs == (y.node_id,)


def test_json_round_trip_structure_and_values() -> None:
    g, y, grads, feeds = _rich_graph()
    text = g.to_json()
    json.loads(text)  # plain JSON
    h = at.load_graph(text)
    assert h.name == "rich" and len(h) == len(g)
    for a, b in zip(g.nodes, h.nodes):
        assert (a.id, a.op, a.inputs, a.shape, a.dtype, a.name, a.phase, a.source) == \
               (b.id, b.op, b.inputs, b.shape, b.dtype, b.name, b.phase, b.source)
        assert a.attrs == b.attrs, (a.op, a.attrs, b.attrs)
        assert a.meta == b.meta, (a.op, a.meta, b.meta)
        assert type(a.shape) is tuple and type(b.shape) is tuple
    assert h.passes == json.loads(json.dumps(g.passes))
    assert set(h.constants) == set(g.constants)
    for k in g.constants:
        np.testing.assert_array_equal(h.constants[k], g.constants[k])
        assert h.constants[k].dtype == g.constants[k].dtype
    # attrs with tuples: getitem index and transpose axes come back as tuples
    gi = next(n for n in h.nodes if n.op == "getitem")
    assert isinstance(gi.attrs["index"], tuple) and gi.attrs["index"][0] == ("s", 1, None, None)
    tr = next(n for n in h.nodes if n.op == "transpose")
    assert tr.attrs["axes"] == (2, 0, 1)
    w = h.find("w")
    assert w.meta["init"] == "kaiming_normal" and w.meta["layer"] == "fc1" and w.meta["role"] == "weight"
    assert h.find("table").meta["init_args"] == {"std": 0.02}
    # the re-loaded graph runs to the same values
    outs = [y, *grads]
    want = at.run(outs, feeds)
    got = at.run([at.Tensor(h, t.node_id) for t in outs], {h.find(k.name).id: v for k, v in feeds.items()})
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a, b)
    # and it can be extended and differentiated again
    with h:
        xh = at.Tensor(h, h.find("x").id)
        (dx2,) = at.grad(at.Tensor(h, y.node_id), [xh])
    np.testing.assert_allclose(at.run(dx2, {h.find(k.name).id: v for k, v in feeds.items()}), want[1])
    once = at.load_graph(h.to_json()).to_json()   # (the new gradient's shortcut mark is not loaded)
    assert at.load_graph(once).to_json() == once


def test_json_without_constants_and_bad_documents() -> None:
    g, *_ = _rich_graph()
    doc = json.loads(g.to_json(include_constants=False))
    assert not any("value" in n for n in doc["nodes"])
    with pytest.raises(ValueError, match="asgteach-graph"):
        at.load_graph(json.dumps({"nodes": []}))


def test_every_node_records_the_users_line() -> None:
    with at.Graph() as g:
        line = caller_line() + 1
        x = at.input("x", (2, 3))
        y = at.sum(2 * x + 1.0)    # the constants, mul, add and sum all come from this line
        (dx,) = at.grad(y, [x])    # backward nodes point at the grad call
    assert x.node.source.endswith(f"test_graph.py:{line}")
    fwd = [n for n in g.nodes if n.phase == "forward" and n.id != x.node_id]
    assert fwd and all(n.source.endswith(f"test_graph.py:{line + 1}") for n in fwd), [n.source for n in fwd]
    bwd = [n for n in g.nodes if n.phase == "backward"]
    assert bwd and all(n.source.endswith(f"test_graph.py:{line + 2}") for n in bwd), [n.source for n in bwd]
    assert all("test_graph.py:" in n.source for n in g.nodes)


def test_graph_context_nesting_and_default() -> None:
    outer, inner = at.Graph("outer"), at.Graph("inner")
    before = at.default_graph()
    with outer as g1:
        assert g1 is outer and at.default_graph() is outer
        a = at.input("a", (1,))
        with inner:
            b = at.input("b", (1,))
            assert at.default_graph() is inner
        c = at.input("c", (1,))
        assert at.default_graph() is outer
    assert at.default_graph() is before
    assert a.graph is outer and c.graph is outer and b.graph is inner
    assert [n.name for n in outer.nodes] == ["a", "c"]
    # outside any block, ops go to the default graph
    d = at.input("d_default_graph_test", (2,))
    assert d.graph is at.default_graph() and d.graph.name == "default"
    # an explicit graph= wins over the context
    with outer:
        e = at.input("e", (1,), graph=inner)
    assert e.graph is inner


def test_graph_stack_is_per_thread() -> None:
    g = at.Graph("main-thread")
    seen = []
    with g:
        t = threading.Thread(target=lambda: seen.append(at.default_graph()))
        t.start()
        t.join()
    assert seen and seen[0] is not g


def test_graph_exit_restores_after_an_exception() -> None:
    g = at.Graph()
    before = at.default_graph()
    with pytest.raises(at.ShapeError):
        with g:
            at.input("a", (2,)) + at.input("b", (3,))
    assert at.default_graph() is before


def test_lookup_helpers() -> None:
    g, y, grads, _ = _rich_graph()
    assert [n.name for n in g.inputs()] == ["x", "ids"]
    assert [n.name for n in g.parameters()] == ["w", "table"]
    with pytest.raises(KeyError, match="known: ids, table, w, x"):
        g.find("nope")
    cons = g.consumers()
    x_id = g.find("x").id
    assert len(cons[x_id]) >= 2  # matmul and max (and backward uses)
    anc = g.ancestors([y.node_id])
    assert anc == sorted(anc) and y.node_id in anc and all(g.nodes[i].phase == "forward" for i in anc)
    assert "rich" in repr(g) and "backward" in repr(g)
    n = g.nodes[y.node_id]
    assert n.size == 1 and f"#{n.id}" in n.describe()


def test_extract_copies_a_subgraph() -> None:
    g, y, grads, feeds = _rich_graph()
    sub, mapping = g.extract([y.node_id])
    assert len(sub) == len(g.ancestors([y.node_id]))
    assert all(sub.nodes[mapping[i]].op == g.nodes[i].op for i in mapping)
    assert sub.nodes[mapping[y.node_id]].meta["copied_from"] == y.node_id
    v = at.run(at.Tensor(sub, mapping[y.node_id]), {mapping[k.node_id]: a for k, a in feeds.items()})
    np.testing.assert_array_equal(v, at.run(y, feeds))


def test_add_node_validates() -> None:
    g = at.Graph()
    with pytest.raises(ValueError, match="dtype"):
        g.add_node("input", (), {}, (2,), "float32")
    with pytest.raises(ValueError, match="dtype"):
        g.add_node("input", (), {}, (2,), np.dtype("float64"))
    with pytest.raises(ValueError, match="not a node"):
        g.add_node("neg", (3,), {}, (2,), "float")
    with pytest.raises(ValueError, match="phase"):
        with g.phase("sideways"):
            pass


def test_constant_nodes_hold_the_kind_not_a_numpy_dtype() -> None:
    """np.dtype('float64') == 'float' is True in numpy: the node must still store the string."""
    with at.Graph() as g:
        x = at.input("x", (2, 2))
        c = at.constant(np.ones((2, 2)))
        i = at.constant(np.array([1, 2]))
        b = at.constant(np.array([True, False]))
        y = at.concat([x, c], axis=0)  # would "mix float and int" if the kinds differed in type
    assert c.dtype == "float" and type(c.dtype) is str
    assert i.dtype == "int" and type(i.dtype) is str
    assert b.dtype == "float"
    assert y.dtype == "float"
    assert all(type(n.dtype) is str for n in g.nodes)


def test_graph_listing_one_line_per_node() -> None:
    with at.Graph("listing") as g:
        x = at.input("x", (4, 3))
        w = at.parameter("w", (3, 2))
        y = at.sum(x @ w, axis=1)
        (dw,) = at.grad(at.mean(y), [w])
    lines = str(g).splitlines()   # print(g)
    assert lines[0] == repr(g) and len(lines) == len(g.nodes) + 1
    assert lines[1].startswith("  %0 = input 'x'  (4, 3) float  # test_graph.py:")
    assert lines[3].startswith("  %2 = matmul %0 %1  (4, 2) float  # test_graph.py:")
    assert "%3 = sum %2 axis=(1,) keepdims=False  (4,) float" in lines[4]
    last = lines[-1]
    assert last.startswith(f"  %{dw.node_id} = matmul ") and "backward of %2" in last
    only = g.listing(g.ancestors([y.node_id])).splitlines()
    assert len(only) == 1 + 4   # header + x, w, matmul, sum
