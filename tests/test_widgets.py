"""The Python side of the notebook widgets: styles, elements, inspector HTML, steps, collapse, static view."""

from __future__ import annotations

import re

import numpy as np
import pytest

import asgteach as at
from asgteach.ops import GPU, OpSpec, View, apply
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
    # parents come before their children (cytoscape.js needs a parent added before its members)
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


def test_inputs_the_runner_feeds_say_what_it_feeds_in_both_languages():
    with at.Graph() as g:
        x = at.input("x", (1, 3))
        h = at.nn.BatchNorm1d(3, name="bn<b>")(x)
        at.nn.Dropout(0.25, name="drop")(h)
    by_name = {n.name: n for n in g.nodes}
    mask, flag, mean = by_name["drop.mask"], by_name["bn<b>.training"], by_name["bn<b>.running_mean"]
    html = node_html(InspectorData(g), mask.id, "en")
    assert "Fed by the runner" in html and "p = 0.25" in html and "Evaluation: ones" in html
    html = node_html(InspectorData(g), flag.id, "en")
    assert "1.0 when the graph trains" in html
    # a batch of one: the flag says why the graph cannot train, the layer's name escaped
    assert "can only be evaluated" in html and "bn&lt;b&gt;" in html and "bn<b>" not in html
    html = node_html(InspectorData(g), mean.id, "en")
    assert f"node #{mean.supplied.next}" in html and "trainer.buffers" in html and "first 0" in html
    ru = node_html(InspectorData(g), mean.id, "ru")
    assert "Подаёт исполнитель" in ru and f"узла #{mean.supplied.next}" in ru
    assert "Fed by the runner" not in node_html(InspectorData(g), x.node_id, "en")


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


def _drawn(view) -> dict[str, set[str]]:
    """What the browser is told to draw: element id -> its classes (static and highlighted)."""
    lit = view.canvas.highlights
    return {e["data"]["id"]: set(e["classes"].split()) | set(lit.get(e["data"]["id"], "").split())
            for e in view.canvas.elements}


def _node_ids(view) -> set[str]:
    return {e["data"]["id"] for e in view.canvas.elements if e["group"] == "nodes"}


def _press(view, kind: str, value=None) -> None:
    """What the browser sends when the reader clicks something (the canvas's `event` traitlet)."""
    seq = (view.canvas.event or {}).get("seq", 0) + 1
    view.canvas.event = {"type": kind, "value": value, "seq": seq}


def test_graphview_state_machine_without_a_browser():
    g, x, h, loss, params, feeds = _mlp()
    from asgteach.widgets.view import GraphView

    view = GraphView(loss, feeds=feeds)
    assert view.mode == "both" and view.expanded is None
    assert f"n{params[0].node_id}" in _node_ids(view)
    _press(view, "click", f"n{params[0].node_id}")  # as the browser reports a tap on the node
    assert "selected" in _drawn(view)[f"n{params[0].node_id}"]
    assert "mlp.0.weight" in view.canvas.inspector_html
    _press(view, "click", "g:mlp")  # all open -> close this one
    assert "g:mlp" in _node_ids(view) and f"n{params[0].node_id}" not in _node_ids(view)
    view.click("g:mlp")
    assert f"n{params[0].node_id}" not in _node_ids(view) and "g:mlp.0" in _node_ids(view)
    _press(view, "mode", "forward")
    assert view.canvas.toolbar["mode"] == "forward"
    assert all(g.nodes[e["data"]["nid"]].phase == "forward" for e in view.canvas.elements if "nid" in e["data"])
    _press(view, "step", 1)
    s = view.steps[view.step_index]
    assert view.mode == "both" and s.node == loss.node_id
    assert "step-current" in _drawn(view)[view.rep_of(loss.node_id)]
    assert view.canvas.status_html.count("Step 1 of") == 1
    _press(view, "lang", "ru")
    assert view.mode == "both" and "Шаг 1" in view.canvas.inspector_html
    assert view.canvas.toolbar["words"]["fit"] == "Вписать" and view.canvas.toolbar["lang"] == "ru"
    before = view.canvas.fit_seq
    view.fit()
    assert view.canvas.fit_seq == before + 1
    _press(view, "reset")
    assert not any("step-current" in classes for classes in _drawn(view).values())
    assert view.canvas.status_html == ""


def test_a_rebuild_is_one_message_of_plain_data():
    """The whole graph goes to the browser as ONE change of one traitlet (not a widget per element)."""
    import json

    g, x, h, loss, params, feeds = _mlp()
    from asgteach.widgets.view import GraphView

    view = GraphView(loss, feeds=feeds)
    changes = []
    view.canvas.observe(lambda ch: changes.append(ch["name"]), names=["elements", "highlights"])
    view.set_details(True)
    assert changes.count("elements") == 1
    els = view.canvas.elements
    json.dumps(els)  # plain JSON: what the comm message carries
    nodes = [e for e in els if e["group"] == "nodes" and e["data"]["kind"] != "compound"]
    assert nodes and all(set(e["position"]) == {"x", "y"} for e in nodes), "positions come from layout.py"
    changes.clear()
    view.click(nodes[0]["data"]["id"])
    assert changes == ["highlights"], "a click sends the highlights and the inspector, never the graph again"


def test_the_browser_module_is_bundled_and_loads_nothing_from_elsewhere():
    from asgteach.widgets.canvas import BUNDLE, GraphCanvas

    src = BUNDLE.read_text(encoding="utf-8")
    assert len(src) > 100_000 and "export" in src, "cytoscape.js and KaTeX are inside the module"
    assert "cytoscape" in src.lower() and "katex" in src.lower()
    # no CDN at run time: no import of a URL, no fetch of a script or a font
    assert not re.search(r"""(import\s*\(?\s*["']https?:|from\s*["']https?:)""", src)
    assert "cdn.jsdelivr" not in src and "unpkg.com" not in src and "esm.sh" not in src
    assert GraphCanvas().get_state()["_esm"] == src, "the widget sends the bundled module"


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
    assert len(_node_ids(view)) < 30
    full = E.build_elements(E.scope_of(loss), "both", None)
    assert len([e for e in full if e["group"] == "nodes"]) > E.BOX_LIMIT
    assert not any(e["classes"] == "compound" or "parent" in e["data"] for e in full), \
        "no layer boxes on huge views: they would cost the layout and stop helping the eye"
    view.click("g:block1")
    assert "g:block1.attn" in _node_ids(view)
    # every edge joins two drawn nodes (the browser adds them all in one batch)
    ids = _node_ids(view)
    assert all(e["data"]["source"] in ids and e["data"]["target"] in ids
               for e in view.canvas.elements if e["group"] == "edges")


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
    assert "<svg" in bundle["image/svg+xml"] and "image/png" in bundle and "text/plain" in bundle
    assert "image/png" in g._repr_mimebundle_()
    # the view itself: the widget for a live front-end, and the picture of what it draws now beside it
    # (an untrusted or reopened notebook shows the PNG; no text/html, which would come first there)
    shown = view._repr_mimebundle_()
    assert shown["application/vnd.jupyter.widget-view+json"]["model_id"] == view.widget.model_id
    assert "<svg" in shown["image/svg+xml"] and shown["image/png"] and "text/html" not in shown


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


# --- issue 13: a graph view a class can read ---------------------------------------------------------
from asgteach.ops.registry import registered  # noqa: E402
from asgteach.widgets.layout import mirror_layout, node_size  # noqa: E402
from asgteach.widgets.styles import CATEGORY_SHAPES  # noqa: E402

# Machado, Oliveira & Fernandes (2009), severity 1.0, applied to linear RGB
PROTANOPIA = np.array([[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
                       [-0.003882, -0.048116, 1.051998]])
DEUTERANOPIA = np.array([[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
                         [-0.011820, 0.042940, 0.968881]])


def _lab(hex_colours: list[str], matrix: np.ndarray | None) -> np.ndarray:
    """CIE L*a*b* of sRGB colours as seen through ``matrix`` (a colour-vision-deficiency simulation)."""
    rgb = np.array([[int(h[i:i + 2], 16) / 255 for i in (1, 3, 5)] for h in hex_colours])
    lin = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    if matrix is not None:
        lin = np.clip(lin @ matrix.T, 0, 1)
    xyz = lin @ np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]).T
    xyz /= np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.stack([116 * f[:, 1] - 16, 500 * (f[:, 0] - f[:, 1]), 200 * (f[:, 1] - f[:, 2])], axis=1)


@pytest.mark.parametrize("vision", ["normal", "deuteranopia", "protanopia"])
def test_category_colours_stay_apart_under_colour_blindness(vision):
    matrix = {"normal": None, "deuteranopia": DEUTERANOPIA, "protanopia": PROTANOPIA}[vision]
    cats = list(CATEGORY_COLOURS)
    lab = _lab([CATEGORY_COLOURS[c] for c in cats], matrix)
    d = np.linalg.norm(lab[:, None] - lab[None], axis=-1)
    np.fill_diagonal(d, np.inf)
    i, j = np.unravel_index(np.argmin(d), d.shape)
    assert d[i, j] >= 12, f"{vision}: {cats[i]} and {cats[j]} are only ΔE {d[i, j]:.1f} apart"
    assert (lab[:, 0] >= 55).all(), "fills must stay light enough for black label text"


def test_every_category_has_its_own_shape_or_border():
    assert set(CATEGORY_SHAPES) == set(CATEGORIES)
    assert len(set(CATEGORY_SHAPES.values())) == len(CATEGORIES), "two categories look alike without colour"
    rules = {r["selector"]: r["style"] for r in cytoscape_style()}
    for cat, (shape, border, _) in CATEGORY_SHAPES.items():
        assert rules[f"node.cat-{cat}"]["shape"] == shape and rules[f"node.cat-{cat}"]["border-style"] == border


def test_presentation_style_is_bigger_and_bolder():
    base = {r["selector"]: r["style"] for r in cytoscape_style()}
    big = {r["selector"]: r["style"] for r in cytoscape_style(present=True)}
    assert big["node"]["font-size"] == pytest.approx(1.6 * base["node"]["font-size"])
    assert big["edge"]["width"] > base["edge"]["width"]
    assert big["node"]["color"] == "#000000"
    assert "font-size:19px" in legend_html(["input"], present=True)


def test_every_node_element_has_a_phase_and_gradients_name_their_node():
    g, x, h, loss, params, _ = _mlp()
    scope = E.scope_of(loss)
    for expanded in (None, set()):
        els = E.build_elements(scope, "both", expanded)
        assert all(e["data"].get("phase") in ("forward", "backward") for e in els if e["group"] == "nodes")
    els = E.build_elements(scope, "both", None)
    mirrored = {e["data"]["nid"]: e["data"]["mirror"] for e in els if e["data"].get("mirror")}
    grads = {int(k): v for k, v in g.passes[-1]["grads"].items()}
    for p in params:  # every parameter's gradient mirrors that parameter
        assert mirrored[grads[p.node_id]] == f"n{p.node_id}"
    for gid, f in mirrored.items():
        assert g.nodes[gid].phase == "backward" and g.nodes[int(f[1:])].phase == "forward"
    closed = E.build_elements(scope, "both", set())
    assert {e["data"]["id"]: e["data"].get("mirror") for e in closed if e["data"].get("kind") == "group"}[
        "g:∇ mlp"] == "g:mlp"


def test_glue_comes_from_the_registry_and_folds_into_edges():
    g, x, h, loss, params, _ = _mlp()
    scope = E.scope_of(loss)
    full = E.build_elements(scope, "both", None, details=True)
    lean = E.build_elements(scope, "both", None, details=False)
    nodes = lambda els: {e["data"]["nid"] for e in els if e["data"].get("kind") == "node"}  # noqa: E731
    hidden = nodes(full) - nodes(lean)
    assert hidden and hidden == E.glue_ids(scope, nodes(full))
    for i in hidden:
        n = g.nodes[i]
        spec = REGISTRY[n.op]
        assert spec.view.glue or (spec.category == "constant" and n.size == 1) or "seed_of" in n.meta
    assert {g.nodes[i].op for i in hidden} & {s for s, spec in REGISTRY.items() if spec.view.glue}
    folded = [e for e in lean if e["group"] == "edges" and e["data"].get("folded")]
    assert folded and all(set(e["data"]["folded"]) <= hidden for e in folded)
    assert all(g.nodes[e["data"]["folded"][0]].op in e["data"]["label"] for e in folded)
    # final gradients and what the user asked for are never folded, whatever their op
    assert not hidden & ({loss.node_id} | {n.id for n in g.nodes if "grad_of" in n.meta})


def test_a_registered_glue_op_folds_too():
    ident = dict(name="copy_through", category="shape", arity=1, view=View(glue=True), infer=lambda s, **_: s,
                 numpy=lambda x: x.copy(), vjp=lambda c, g: (g,), gpu=GPU(expr="x"))
    with registered(OpSpec(**ident)):
        with at.Graph():
            x = at.input("x", (3,))
            y = at.sum(at.exp(apply("copy_through", x)))
        lean = E.build_elements(E.scope_of(y), "forward", None, details=False)
    ops = [e["data"]["op"] for e in lean if e["data"].get("kind") == "node"]
    assert "copy_through" not in ops and ops == ["input", "exp", "sum"]
    (edge,) = [e for e in lean if e["data"].get("folded")]
    assert edge["data"]["label"].startswith("copy_through")


def test_mirror_layout_forward_left_backward_right_gradients_level_with_their_nodes():
    g, x, h, loss, params, _ = _mlp()
    for details in (True, False):
        els = E.build_elements(E.scope_of(loss), "both", None, details=details)
        lay = mirror_layout(els)
        data = {e["data"]["id"]: e["data"] for e in els if e["group"] == "nodes" and e["data"]["kind"] != "compound"}
        fwd = [i for i, d in data.items() if d["phase"] == "forward"]
        bwd = [i for i, d in data.items() if d["phase"] == "backward"]
        right = max(lay.positions[i][0] + lay.sizes[i][0] / 2 for i in fwd)
        left = min(lay.positions[i][0] - lay.sizes[i][0] / 2 for i in bwd)
        assert left > right, "every backward node sits right of every forward node"
        for i, d in data.items():
            if d.get("mirror"):
                assert lay.positions[i][1] == lay.positions[d["mirror"]][1], f"{i} is not level with {d['mirror']}"
        for e in els:  # forward edges go down, backward edges go up
            if e["group"] != "edges" or e["data"]["source"] not in data or e["data"]["target"] not in data:
                continue
            a, b = e["data"]["source"], e["data"]["target"]
            if data[a]["phase"] == data[b]["phase"] == "forward":
                assert lay.level[b] > lay.level[a]
            elif data[a]["phase"] == data[b]["phase"] == "backward":
                assert lay.level[b] < lay.level[a]
        # no two nodes of a row overlap
        for lv in set(lay.level.values()):
            row = sorted((lay.positions[i][0] - lay.sizes[i][0] / 2, lay.positions[i][0] + lay.sizes[i][0] / 2)
                         for i in lay.level if lay.level[i] == lv)
            assert all(b[0] >= a[1] for a, b in zip(row, row[1:]))


def test_layout_of_a_lesson_graph_fits_a_laptop_cell_at_full_size():
    # a two-layer MLP loss with the gradients of its two weights (issue 13's measured graph)
    with at.Graph():
        x, t = at.input("x", (4, 2)), at.input("t", (4, 1))
        net = at.nn.MLP([2, 8, 1], activation="tanh", name="mlp")
        loss = at.nn.mse_loss(at.sigmoid(net(x)), t)
        at.grad(loss, [p for p in net.parameters() if p.name.endswith("weight")])
    lay = mirror_layout(E.build_elements(E.scope_of(loss), "both", None, details=False))
    assert lay.width <= 900 and lay.height <= 900, (lay.width, lay.height)
    w, h = node_size("matmul\n(4, 8)")
    assert 50 < w < 80 and 30 < h < 50


def test_view_sizes_its_canvas_and_keeps_labels_legible():
    from asgteach.widgets.view import LEGIBLE_PX, MAX_HEIGHT, PRESENT_PX, GraphView, canvas_height

    g, x, h, loss, params, feeds = _mlp()
    v = GraphView(loss)
    assert v.details is False and v.canvas.toolbar["details"] is False
    assert v.canvas.min_zoom * v.font_px == pytest.approx(LEGIBLE_PX)
    nodes = [e for e in v.canvas.elements if e["data"].get("kind") == "node"]
    assert nodes and all(e["position"] for e in nodes), "every node is placed by the mirror layout"
    assert v.canvas.height == f"{canvas_height(v.layout.height, 1.0, 2)}px"
    assert canvas_height(10_000) == MAX_HEIGHT
    n_before = len(v.canvas.elements)
    _press(v, "details", True)
    assert len(v.canvas.elements) > n_before and v.canvas.toolbar["details"] is True
    _press(v, "present", True)
    assert v.canvas.min_zoom * v.font_px == pytest.approx(PRESENT_PX) and v.canvas.toolbar["present"] is True
    assert {r["selector"]: r["style"] for r in v.canvas.stylesheet}["node"]["font-size"] == pytest.approx(1.6 * 12)
    v.step(1)
    v.step(1)
    lit = {k for k, c in v.canvas.highlights.items() if "step-mirror" in c.split()}
    cur = {k for k, c in v.canvas.highlights.items() if "step-current" in c.split()}
    assert len(lit) == 1 and len(cur) == 1
    assert v.graph.nodes[int(next(iter(lit))[1:])].phase == "backward"


def test_folded_edge_inspector_explains_the_hidden_op():
    from asgteach.widgets.view import GraphView

    g, x, h, loss, params, feeds = _mlp()
    v = GraphView(loss)
    edge = next(e for e in v.canvas.elements if e["data"].get("folded"))
    _press(v, "click", edge["data"]["id"])
    hidden = g.nodes[edge["data"]["folded"][0]]
    assert "only move data" in v.canvas.inspector_html and f'data-node="{hidden.id}"' in v.canvas.inspector_html


def test_expand_all_over_2000_nodes_warns_with_count_and_estimate_first():
    from asgteach.widgets.view import EXPAND_WARN_AT, GraphView

    with at.Graph() as g:
        x = at.input("x", (2, 4, 8))
        out = x
        for k in range(13):
            out = at.nn.TransformerBlock(8, 2, name=f"block{k}")(out)
        loss = at.mean(out * out)
        at.grad(loss, [at.Tensor(g, p.id) for p in g.parameters()])
    v = GraphView(loss)
    small = len(v.canvas.elements)
    assert v.expanded == set() and small < 120
    n, m, secs = v.expand_all_cost()
    assert n > EXPAND_WARN_AT and secs > 1
    _press(v, "expand")
    assert len(v.canvas.elements) == small, "the first press only warns"
    assert f"{n:,}" in v.canvas.status_html and f"{secs:.1f}" in v.canvas.status_html
    _press(v, "expand")
    assert v.expanded is None and len(v.canvas.elements) > EXPAND_WARN_AT
    assert v.canvas.toolbar["expand_label"] == "Collapse layers"


def test_a_view_is_displayed_as_its_picture_then_the_widget_two_outputs() -> None:
    """One output holding both would show only the widget's "model not found" once the kernel is gone."""
    from asgteach.widgets.view import GraphView

    with at.Graph():
        x = at.input("x", (2, 3))
        y = at.sum(at.tanh(x))
        at.grad(y, [x])
    view = GraphView(y)
    picture, widget = view.display_outputs()
    assert set(picture) == {"image/png", "image/svg+xml"} and 'class="asg-picture' in picture["image/svg+xml"]
    assert "application/vnd.jupyter.widget-view+json" in widget and "image/png" not in widget
    assert widget["text/plain"] == "", "an untrusted notebook shows this output's text under the picture"
    tail = view.canvas.picture_tail
    assert len(tail) == 96 and picture["image/png"].strip().endswith(tail)
    other = GraphView(x * 2.0)
    other.display_outputs()
    assert other.canvas.picture_tail != tail, "the browser finds the picture by this tail: another picture differs"
