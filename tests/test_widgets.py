"""The Python side of the notebook widgets: styles, elements, inspector HTML, steps, collapse, static view."""

from __future__ import annotations

import re

import numpy as np
import pytest

import asgteach as at
from asgteach.ops.registry import CATEGORIES, REGISTRY
from asgteach.widgets import elements as E
from asgteach.widgets.inspector import InspectorData, group_html, node_html
from asgteach.widgets.static import static_html
from asgteach.widgets.steps import steps_of
from asgteach.widgets.styles import CATEGORY_COLOURS, cytoscape_style, legend_html
from asgteach.widgets.values import heatmap_png, stats

HOSTILE = "<img src=x onerror=alert(1)>"


def _mlp(hostile: bool = False):
    with at.Graph("mlp") as g:
        x = at.input(HOSTILE if hostile else "x", (4, 2))
        t = at.input("t", (4, 1))
        net = at.nn.MLP([2, 8, 1], activation="tanh", name="mlp")
        h = net(x)
        pred = at.sigmoid(h) + 0.1 * h  # fan-out: h is read twice
        loss = at.nn.mse_loss(pred, t)
        params = net.parameters()
        at.grad(loss, params)
    rng = np.random.default_rng(0)
    feeds = {x: rng.standard_normal((4, 2)), t: rng.random((4, 1)), **{p: rng.standard_normal(p.shape) for p in params}}
    return g, x, h, loss, params, feeds


def test_every_category_has_a_colour_and_a_style_rule():
    assert set(CATEGORY_COLOURS) == set(CATEGORIES)
    assert len(set(CATEGORY_COLOURS.values())) == len(CATEGORIES), "two categories share a colour"
    selectors = {rule["selector"] for rule in cytoscape_style()}
    for cat in CATEGORIES:
        assert f"node.cat-{cat}" in selectors
    for cls in ("node.backward", "edge.broadcast", "node.step-current", "node.selected", "node.group", ":parent"):
        assert cls in selectors


def test_legend_lists_categories_and_escapes():
    html = legend_html(["input", "activation"], "en")
    assert CATEGORY_COLOURS["input"] in html and CATEGORY_COLOURS["activation"] in html
    assert CATEGORY_COLOURS["loss"] not in html


def test_elements_labels_categories_and_broadcast_edges():
    with at.Graph():
        x = at.input("x", (4, 3))
        b = at.parameter("b", (3,), init="zeros")
        y = at.sum(at.relu(x + b))
    els = E.build_elements(E.scope_of(y), "forward")
    nodes = {e["data"]["nid"]: e for e in els if e["group"] == "nodes"}
    assert nodes[x.node_id]["data"]["label"] == "x\n(4, 3)"
    assert nodes[b.node_id]["data"]["label"] == "b\n(3,)"
    assert "cat-parameter" in nodes[b.node_id]["classes"] and "leaf" in nodes[b.node_id]["classes"]
    assert nodes[y.node_id]["data"]["label"] == "sum\nscalar" and "output" in nodes[y.node_id]["classes"]
    edges = [e for e in els if e["group"] == "edges"]
    bcast = [e for e in edges if "broadcast" in e["classes"]]
    assert [(e["data"]["source"], e["data"]["label"]) for e in bcast] == [(f"n{b.node_id}", "(3,) → (4, 3)")]
    assert len(edges) == 4


def test_modes_filter_phases_and_keep_read_forward_values():
    g, x, h, loss, params, _ = _mlp()
    scope = E.scope_of(loss)
    fwd = E.build_elements(scope, "forward", None)
    bwd = E.build_elements(scope, "backward", None)
    both = E.build_elements(scope, "both", None)
    nid = lambda els: {e["data"]["nid"] for e in els if e["data"].get("kind") == "node"}  # noqa: E731
    assert all(g.nodes[i].phase == "forward" for i in nid(fwd))
    context = {e["data"]["nid"] for e in bwd if "context" in e.get("classes", "")}
    assert context and all(g.nodes[i].phase == "forward" for i in context)
    assert all(g.nodes[i].phase == "backward" for i in nid(bwd) - context)
    assert nid(both) == nid(fwd) | nid(bwd)
    reads = [e for e in bwd if e["group"] == "edges" and "reads" in e["classes"]]
    assert reads, "backward nodes read forward values: those edges are drawn (dotted)"


def test_groups_follow_layers_and_collapse_expand():
    g, x, h, loss, params, _ = _mlp()
    scope = E.scope_of(loss)
    groups = E.groups_of(g, scope.ids)
    assert {"mlp", "mlp.0", "mlp.1", "∇ mlp", "∇ mlp.0", "∇ mlp.1"} <= set(groups)
    # a matmul built inside Linear "mlp.0" belongs to it (meta["module"] set by Module.__call__)
    mm = next(n for n in g.nodes if n.op == "matmul" and n.phase == "forward")
    assert E.group_path(g, mm) == ("mlp", "mlp.0")
    closed = E.build_elements(scope, "forward", set())
    ids = {e["data"]["id"] for e in closed if e["group"] == "nodes"}
    assert "g:mlp" in ids and not any(i.startswith("g:mlp.") for i in ids)
    assert f"n{params[0].node_id}" not in ids
    group = next(e for e in closed if e["data"]["id"] == "g:mlp")
    assert group["data"]["size"] == len([i for i in groups["mlp"] if g.nodes[i].phase == "forward"])
    # edges into a collapsed layer are redrawn to it, once
    assert ("n%d" % x.node_id, "g:mlp") in {(e["data"]["source"], e["data"]["target"]) for e in closed
                                           if e["group"] == "edges"}
    half = E.build_elements(scope, "forward", {"mlp"})
    ids2 = {e["data"]["id"]: e for e in half if e["group"] == "nodes"}
    assert ids2["g:mlp"]["classes"] == "compound"
    assert ids2["g:mlp.0"]["data"]["parent"] == "g:mlp" and ids2["g:mlp.0"]["classes"] == "group"
    # parents come before their children (ipycytoscape adds elements one by one)
    order = [e["data"]["id"] for e in half if e["group"] == "nodes"]
    for e in half:
        if e["group"] == "nodes" and "parent" in e["data"]:
            assert order.index(e["data"]["parent"]) < order.index(e["data"]["id"])


def test_step_through_order_is_the_engines_reverse_topological_order():
    g, x, h, loss, params, _ = _mlp()
    p = g.passes[-1]
    steps = steps_of(g, p)
    visited = [s.node for s in steps]
    assert visited == sorted(visited, reverse=True), "reverse topological = descending node ids"
    assert [i for i in visited if i in set(p["order"])] == p["order"]
    assert set(visited) == {int(k) for k in p["grads"]}
    fan = next(s for s in steps if s.node == h.node_id)
    assert len(fan.contributions) == 2 and len(fan.sums) == 1, "h is read twice: two contributions, one add"
    assert sorted(fan.senders) == sorted(c for c in g.consumers()[h.node_id] if g.nodes[c].phase == "forward")
    first = steps[0]
    assert first.node == loss.node_id and first.senders == [loss.node_id]  # the seed
    assert all(g.nodes[i].meta.get("vjp_of") == first.node for i in first.rule)


@pytest.mark.parametrize("category", CATEGORIES)
def test_inspector_html_for_each_category(category):
    ops = [name for name, spec in REGISTRY.items() if spec.category == category]
    g, x, h, loss, params, feeds = _mlp()
    if not ops:  # categories no op has: drawn for backward nodes ("gradient") and the shown output
        node = next(n for n in g.nodes if n.phase == "backward") if category == "gradient" else loss.node
        html = node_html(InspectorData(g), node.id, "en")
        assert f"#{node.id}" in html
        return
    with at.Graph() as g2:
        node = g2.add_node(ops[0], (), {}, (2, 3), "float", name="n")
    html = node_html(InspectorData(g2), node.id, "en")
    assert 'class="asg-inspector"' in html and "Technical details" in html and f"#{node.id}" in html
    assert "No explanation yet" in html or "asg-formula" in html


def test_inspector_has_explanations_role_values_and_local_derivative():
    g, x, h, loss, params, feeds = _mlp()
    from asgteach.widgets.view import GraphView

    view = GraphView(loss, feeds=feeds)
    w = params[0].node
    html = node_html(view.data, w.id, "en")
    assert "Role in this model" in html and "mlp.0" in html
    assert "$$" in html, "formulas are LaTeX for HTMLMath"
    assert "Value" in html and "Gradient" in html and "data:image/png;base64," in html
    tanh = next(n for n in g.nodes if n.op == "tanh")
    t_html = node_html(view.data, tanh.id, "en")
    assert "Local derivative" in t_html and "local slope" in t_html
    # the slope is tanh'(x) = 1 - tanh(x)^2 at entry 0, computed from the engine's numbers
    xin = view.data.values[tanh.inputs[0]].reshape(-1)[0]
    slope = float(re.search(r"local slope[^<]*<b>([-0-9.e]+)</b>", t_html).group(1))
    assert slope == pytest.approx(1 - np.tanh(xin) ** 2, rel=1e-3)


def test_hostile_names_are_escaped_everywhere():
    g, x, h, loss, params, feeds = _mlp(hostile=True)
    html = node_html(InspectorData(g), x.node_id, "en")
    assert HOSTILE not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert HOSTILE not in static_html(loss)
    assert HOSTILE not in group_html(InspectorData(g), "mlp", E.groups_of(g, E.scope_of(loss).ids)["mlp"])
    with at.Graph() as g3:
        p = at.parameter(HOSTILE, (2,), layer=HOSTILE, role="weight")
        y = at.sum(p * p)
    assert HOSTILE not in node_html(InspectorData(g3), p.node_id, "ru")
    assert HOSTILE not in static_html(y)


def test_graphview_state_machine_without_a_browser():
    g, x, h, loss, params, feeds = _mlp()
    from asgteach.widgets.view import GraphView

    view = GraphView(loss, feeds=feeds)
    assert view.mode == "both" and view.expanded is None
    ids = lambda: {w.data["key"] for w in view.cyto.graph.nodes}  # noqa: E731
    # what the browser is told to draw: element key -> its classes
    drawn = lambda: {w.data["key"]: set(w.classes.split())  # noqa: E731
                     for w in [*view.cyto.graph.nodes, *view.cyto.graph.edges]}
    assert f"n{params[0].node_id}" in ids()
    view.click(f"n{params[0].node_id}")
    assert "selected" in drawn()[f"n{params[0].node_id}"]
    assert "mlp.0.weight" in view.inspector.value
    view.click("g:mlp")  # all open -> close this one
    assert "g:mlp" in ids() and f"n{params[0].node_id}" not in ids()
    view.click("g:mlp")
    assert f"n{params[0].node_id}" not in ids() and "g:mlp.0" in ids()
    view.set_mode("forward")
    assert all(g.nodes[w.data["nid"]].phase == "forward" for w in view.cyto.graph.nodes if "nid" in w.data)
    s = view.step()
    assert view.mode == "both" and s.node == loss.node_id
    assert "step-current" in drawn()[view.rep_of(loss.node_id)]
    view.set_lang("ru")
    assert view.mode == "both" and "Шаг 1" in view.inspector.value and view.fit_button.description == "Вписать"
    before = view.cyto.layout.height
    view.fit()
    assert view.cyto.layout.height != before
    view.reset()
    assert not any("step-current" in classes for classes in drawn().values())


def test_large_graph_starts_collapsed():
    with at.Graph() as g:  # six transformer blocks, forward and backward: over 1,000 nodes
        x = at.input("x", (2, 4, 8))
        out = x
        for k in range(6):
            out = at.nn.TransformerBlock(8, 2, name=f"block{k}")(out)
        loss = at.mean(out * out)
        at.grad(loss, [at.Tensor(g, p.id) for p in g.parameters()])
    from asgteach.widgets.view import GraphView

    view = GraphView(loss)
    assert len(E.scope_of(loss).ids) > 1000
    assert view.expanded == set()
    assert len(view.cyto.graph.nodes) < 30
    full = E.build_elements(E.scope_of(loss), "both", None)
    assert len([e for e in full if e["group"] == "nodes"]) > E.BOX_LIMIT
    assert not any(e["classes"] == "compound" or "parent" in e["data"] for e in full), \
        "no layer boxes on huge views: dagre's compound layout would freeze the browser"
    view.click("g:block1")
    keys = {w.data["key"] for w in view.cyto.graph.nodes}
    assert "g:block1.attn" in keys
    # cytoscape ids are new in every rebuild (the frontend removes old elements late)
    assert all(w.data["id"] != w.data["key"] and w.data["id"].startswith(w.data["key"] + "|")
               for w in view.cyto.graph.nodes)
    edge = view.cyto.graph.edges[0].data
    assert edge["source"].endswith("|2") and edge["target"].endswith("|2")


def test_static_html_is_svg_with_legend():
    g, x, h, loss, params, feeds = _mlp()
    page = static_html(loss)
    assert page.count("asg-static-graph") == 1 and "asg-legend" in page  # one picture (the legend's chips are svgs)
    assert page.count('class="asg-node"') == len([e for e in E.build_elements(E.scope_of(loss), "both", None)
                                                   if e["group"] == "nodes" and e["data"]["kind"] != "compound"])
    assert "<script" not in page


def test_values_stats_and_heatmap():
    a = np.array([[1.0, -2.0], [np.inf, 0.5]])
    s = stats(a)
    assert s["min"] == -2.0 and s["max"] == 1.0 and s["nonfinite"] == 1
    png = heatmap_png(np.arange(12.0).reshape(3, 4))
    assert png.startswith(b"\x89PNG") and heatmap_png(np.float64(3.0)) is None


def test_show_and_repr_hooks():
    g, x, h, loss, params, feeds = _mlp()
    view = at.show(loss, feeds=feeds, display=False)
    assert view.data.values and view.steps
    html = at.show(loss, static=True)
    assert "<svg" in html.data
    bundle = loss._repr_mimebundle_()
    assert "text/html" in bundle and "<svg" in bundle["text/html"] and "text/plain" in bundle
    assert "text/html" in g._repr_mimebundle_()


def test_values_from_a_trainer():
    with at.Graph() as g:
        x, t = at.input("x", (4, 2)), at.input("t", (4, 1))
        net = at.nn.MLP([2, 3, 1], activation="tanh", name="mlp")
        loss = at.nn.mse_loss(at.sigmoid(net(x)), t)
    tr = at.Trainer(loss, optimizer=at.optim.SGD(lr=0.1), seed=0)
    X, T = np.random.default_rng(1).random((4, 2)), np.random.default_rng(2).random((4, 1))
    tr.fit({x: X, t: T}, steps=3, progress=False)
    view = at.show(loss, trainer=tr, feeds={x: X, t: T}, display=False)
    (want,) = tr.run([loss], {x: X, t: T})
    assert float(view.data.values[loss.node_id]) == pytest.approx(float(want), rel=1e-5)
    w = g.find("mlp.0.weight").id
    np.testing.assert_allclose(view.data.values[w], tr.params["mlp.0.weight"])
    assert w in view.data.grads and view.data.grads[w] in view.data.values  # the trainer's grad pass is shown
