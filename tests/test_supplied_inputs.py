"""Inputs a runner supplies are declared, not hidden in ``Node.meta`` (issue 37, item 3).

A dropout mask, a BatchNorm's training flag and its running statistics are inputs whose value the runner
(``at.run``, a Trainer) supplies by itself. What each is, and the numbers the runner needs (a dropout
probability, a first value, the node of the next value), is ``node.supplied``, an ``at.Supplied``: made where
the input is made, saved with the graph, checked when a graph file is loaded. ``Node.meta`` only describes:
every key any part of the library writes is named once in ``graph.META_KEYS``, and none changes a result.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import asgteach as at
from asgteach.graph import META_KEYS, GraphLoadError


def _model() -> tuple[at.Graph, at.Tensor]:
    with at.Graph("supplied") as g:
        x = at.input("x", (8, 4))
        h = at.nn.Linear(4, 6, name="lin")(x)
        h = at.nn.BatchNorm1d(6, name="bn")(h)
        h = at.nn.Dropout(0.3, name="drop")(at.relu(h))
        loss = at.mean(h * h)
    return g, loss


def test_each_supplied_input_declares_what_it_is() -> None:
    g, _ = _model()
    supplied = {n.name: n.supplied for n in g.nodes if n.supplied is not None}
    assert supplied["drop.mask"] == at.Supplied("dropout_mask", p=0.3)
    assert supplied["bn.training"] == at.Supplied("training_flag")
    mean, var = supplied["bn.running_mean"], supplied["bn.running_var"]
    assert (mean.kind, mean.fill, var.kind, var.fill) == ("running_stat", 0.0, "running_stat", 1.0)
    assert g.nodes[mean.next].op != "input" and g.nodes[var.next].op != "input"
    assert all(n.supplied is None for n in g.nodes if n.op != "input" or n.name in ("x",))
    # a description, not behaviour: no meta key of these inputs is read to decide a value
    for n in g.nodes:
        assert not {"random", "p", "mode", "buffer", "fill", "next"} & set(n.meta), (n.name, n.meta)


def test_a_wrong_declaration_is_refused_where_it_is_made() -> None:
    with pytest.raises(ValueError, match="kind must be one of"):
        at.Supplied("dropout")
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\)"):
        at.Supplied("dropout_mask", p=1.0)
    with pytest.raises(ValueError, match="only a training flag refuses training"):
        at.Supplied("dropout_mask", p=0.5, refuse="a mask cannot refuse")
    with at.Graph(), pytest.raises(ValueError, match="only an input"):
        at.Graph().add_node("parameter", (), {}, (2,), "float", supplied=at.Supplied("training_flag"))


def test_the_declaration_travels_with_the_graph_and_runs_the_same() -> None:
    g, loss = _model()
    h = at.load_graph(g.to_json())
    assert [n.supplied for n in h.nodes] == [n.supplied for n in g.nodes]
    rng = np.random.default_rng(0)
    feeds = {"x": rng.normal(size=(8, 4)), **{p.name: rng.normal(size=p.shape) for p in g.parameters()}}
    for training in (False, True):
        a = at.run(loss, feeds, training=training, rng=5)
        b = at.run(at.Tensor(h, loss.node_id), feeds, training=training, rng=5)
        np.testing.assert_array_equal(a, b)
    # a copy keeps them; a running statistic whose next value was not copied says so when a Trainer needs it
    copy, ids = g.extract([loss.node_id])
    assert copy.nodes[ids[g.find("drop.mask").id]].supplied.p == 0.3


@pytest.mark.parametrize(("edit", "words"), [
    (lambda r: r.update(supplied={"kind": "dropout_mask", "p": 1.5, "fill": 0, "next": None}), r"p must be in"),
    (lambda r: r.update(supplied={"kind": "rootkit", "p": 0, "fill": 0, "next": None}), "kind must be one of"),
    (lambda r: r.update(supplied={"kind": "running_stat", "p": 0, "fill": float("nan"), "next": None}),
     "finite numbers"),
    (lambda r: r.update(supplied={"kind": "running_stat", "p": 0, "fill": 0, "next": 0}), "later node"),
    (lambda r: r.update(supplied={"kind": "running_stat", "p": 0, "fill": 0, "next": 10**6}), "not in the graph"),
    (lambda r: r.update(supplied={"kind": "training_flag"}), "an object with kind, p, fill and next"),
    (lambda r: r.update(supplied={"kind": "training_flag", "p": 0, "fill": 0, "next": None, "refuse": 5}),
     "refuse must be a string"),
    (lambda r: r.update(supplied={"kind": "running_stat", "p": 0, "fill": 0, "next": None, "refuse": "no"}),
     "only a training flag refuses"),
    (lambda r: r.update(supplied={"kind": "training_flag", "p": 0, "fill": 0, "next": None, "why": "no"}),
     "an object with kind, p, fill and next"),
])
def test_a_graph_file_cannot_declare_nonsense(edit, words) -> None:
    g, _ = _model()
    doc = json.loads(g.to_json())
    rec = next(r for r in doc["nodes"] if r["name"] == "x")
    edit(rec)
    with pytest.raises(GraphLoadError, match=words):
        at.load_graph(json.dumps(doc))


def test_only_an_input_is_supplied_in_a_file_too() -> None:
    g, _ = _model()
    doc = json.loads(g.to_json())
    rec = next(r for r in doc["nodes"] if r["op"] == "parameter")
    rec["supplied"] = {"kind": "training_flag", "p": 0, "fill": 0, "next": None}
    with pytest.raises(GraphLoadError, match="only an input"):
        at.load_graph(json.dumps(doc))


def test_every_meta_key_the_library_writes_is_named_once() -> None:
    """Build what writes meta (layers, an optimizer's in-graph update, grad, jvp, vmap, a loss's ids, a copy)
    and find no key that graph.META_KEYS does not name."""
    with at.Graph("everything") as g:
        x = at.input("x", (8, 4))
        t = at.input("t", (8,), dtype="int")
        h = at.nn.TransformerBlock(4, 2, name="blk")(at.reshape(x, (1, 8, 4)))
        h = at.nn.Linear(4, 3, name="lin")(at.reshape(h, (8, 4)))
        h = at.nn.BatchNorm1d(3, name="bn")(at.nn.Dropout(0.1, name="drop")(h))
        loss = at.nn.cross_entropy(h, t)
        at.jvp(loss, [x], [at.input("dx", (8, 4))])
        at.vmap(lambda r: at.sum(r * r))(x)
    tr = at.Trainer(loss, optimizer=at.optim.Adam(lr=1e-3), seed=0)
    copy, _ = tr.graph.extract([loss.node_id])
    written = {k for graph in (g, copy) for n in graph.nodes for k in n.meta}
    assert {"layer", "vjp_of", "jvp_of", "update", "ids_for", "copied_from", "module"} <= written   # (it looked)
    unnamed = written - set(META_KEYS)
    assert not unnamed, f"meta keys not in graph.META_KEYS: {sorted(unnamed)}"
