"""How the graph looks: one colour per node category, the cytoscape stylesheet, the legend.

Colour carries meaning, so a student can read a graph at a glance: green data flows in,
teal parameters are what training changes, blue is arithmetic, yellow activations, orange
reductions, grey the nodes that exist only to compute gradients. The palette follows
RustyASG's Node Inspector so both tools read alike.

Everything here is plain data (dicts and strings); the widget and the static renderer both
read it, so the notebook view and the HTML fallback look the same.
"""

from __future__ import annotations

from .. import explain
from ..ops.registry import CATEGORIES
from ..usertext import user_text
from .i18n import t

__all__ = [
    "CATEGORY_COLOURS", "CATEGORY_SHAPES", "PRESENT_SCALE", "BACKWARD_BORDER", "WALL", "colour", "cytoscape_style",
    "legend_html", "category_label",
]

#: Fill colour of each category of ``asgteach.ops.CATEGORIES``. Chosen so that every pair stays
#: apart (CIE76 distance >= 12) for normal vision AND under simulated deuteranopia and
#: protanopia (tests/test_widgets.py checks it with the Machado 2009 matrices), and light
#: enough for black text. Colour is never the only cue: see :data:`CATEGORY_SHAPES`.
CATEGORY_COLOURS: dict[str, str] = {
    "input": "#7cc26f",
    "parameter": "#1d9b9d",
    "constant": "#d9e2cd",
    "arithmetic": "#a8e5ea",
    "activation": "#ffff85",
    "comparison": "#c2c7ff",
    "reduction": "#fdae50",
    "normalisation": "#99b3cd",
    "linalg": "#6c89e0",
    "shape": "#cde380",
    "convolution": "#9f9cdb",
    "loss": "#c5877d",
    "gradient": "#b0b6af",
    "output": "#ffc8a2",
}
#: The second cue, for readers who cannot tell two colours apart (or a grey projector):
#: each category has its own (cytoscape node shape, border style, border width).
CATEGORY_SHAPES: dict[str, tuple[str, str, float]] = {
    "input": ("ellipse", "solid", 1.5),
    "parameter": ("ellipse", "double", 4.0),
    "constant": ("ellipse", "dotted", 2.0),
    "arithmetic": ("round-rectangle", "solid", 1.0),
    "activation": ("round-octagon", "solid", 1.5),
    "comparison": ("cut-rectangle", "solid", 1.0),
    "reduction": ("barrel", "solid", 1.5),
    "normalisation": ("round-hexagon", "solid", 1.5),
    "linalg": ("rectangle", "solid", 1.5),
    "shape": ("round-rectangle", "dotted", 2.0),
    "convolution": ("rectangle", "double", 4.0),
    "loss": ("round-octagon", "double", 4.0),
    "gradient": ("round-rectangle", "dashed", 2.0),
    "output": ("round-tag", "solid", 2.0),
}
#: Border of backward-phase nodes (drawn dashed): they were appended by ``at.grad``.
BACKWARD_BORDER = "#555555"
#: A gradient-category op in the FORWARD graph decides what autograd sees (``stop_gradient``): it is drawn as
#: the wall it is, a brick of the gradient ops' grey with a thick brick-red double border (shape, border style,
#: border width, border colour). Backward nodes are "gradient" too, but never forward: they keep their look.
WALL = ("rectangle", "double", 6.0, "#9c2f1c")
#: Colours of the step-through highlights.
STEP_CURRENT, STEP_RULE, STEP_SUM, STEP_DONE = "#d62728", "#9467bd", "#ff7f0e", "#2ca02c"
#: Presentation mode: fonts this much larger (and edges thicker) for a projector.
PRESENT_SCALE = 1.6

assert set(CATEGORY_COLOURS) == set(CATEGORIES), "every category needs a colour"
assert set(CATEGORY_SHAPES) == set(CATEGORIES), "every category needs a shape"


def colour(category: str) -> str:
    """The fill colour of ``category`` (unknown categories are drawn white)."""
    return CATEGORY_COLOURS.get(category, "#ffffff")


def category_label(category: str, lang: str = "en") -> str:
    """The legend word for ``category`` in ``lang`` (the category name if no text exists yet)."""
    try:
        return explain.category(category, lang).label
    except KeyError:  # a category nobody has written about yet (not even in English)
        return category


def cytoscape_style(present: bool = False, font: float = 12.0) -> list[dict]:
    """The cytoscape.js stylesheet: selectors on the classes that ``elements.py`` assigns.

    ``font`` is the node label size in model units (the view keeps zoom near 1, so about CSS
    px); ``present`` scales it by :data:`PRESENT_SCALE`, thickens edges and borders and
    darkens lines and text (high contrast, for a projector).
    """
    k = PRESENT_SCALE if present else 1.0
    fs = round(font * k, 1)
    ink, line, faint = ("#000000", "#333333", "#555555") if present else ("#111111", "#8a8a8a", "#9a9a9a")
    ew = 3.0 if present else 1.5
    border = 1.6 if present else 1.0
    style: list[dict] = [
        {"selector": "node", "style": {
            "label": "data(label)", "text-wrap": "wrap", "text-valign": "center", "text-halign": "center",
            "font-size": fs, "font-family": "monospace", "shape": "round-rectangle", "line-height": 1.25,
            "padding": "6px", "border-width": border,
            "border-color": "#333333" if present else "#666666", "background-color": "#ffffff", "color": ink,
            "font-weight": "bold" if present else "normal",
        }},
        # the body's size comes with each drawn node (data w, h: layout.node_size less the padding), so the
        # drawing is exactly what the layout placed (cytoscape's own "label" sizing is deprecated); layer
        # boxes have no w: they wrap their members
        {"selector": "node[w]", "style": {"width": "data(w)", "height": "data(h)"}},
        {"selector": "node.backward", "style": {"border-color": "#222222" if present else BACKWARD_BORDER}},
        {"selector": "node.context", "style": {"opacity": 0.55 if present else 0.45}},
        {"selector": "node.output", "style": {"border-width": 3 * k, "border-color": "#d35400",
                                              "border-style": "solid"}},
        {"selector": "node.group", "style": {
            "shape": "round-rectangle", "background-color": "#eef3fb", "border-style": "double", "border-width": 4,
            "border-color": "#4a6fa5", "font-size": fs, "font-weight": "bold",
        }},
        {"selector": ":parent", "style": {
            "background-opacity": 0.06, "background-color": "#4a6fa5", "border-color": "#4a6fa5",
            "border-style": "solid", "border-width": border, "text-valign": "top", "text-halign": "center",
            "label": "data(label)", "font-size": fs, "color": "#23406b" if present else "#4a6fa5", "padding": "10px",
            "z-compound-depth": "bottom",   # a layer's box lies under the edges crossing it (they stay clickable)
        }},
        {"selector": "edge", "style": {
            "width": ew, "line-color": line, "target-arrow-color": line, "target-arrow-shape": "triangle",
            # straight: no two edges join the same pair of elements (build_elements keeps one), and it is
            # cytoscape's cheapest edge to lay out and draw (the 1,309 edges of a 1,015-node graph)
            "curve-style": "straight", "arrow-scale": 0.9 if present else 0.8,
        }},
        {"selector": "edge.backward", "style": {"line-color": "#6d5a8a" if not present else "#3b2a5a",
                                                "target-arrow-color": "#6d5a8a" if not present else "#3b2a5a"}},
        # a backward node reading a forward value: faint and dashed, so the two passes stay apart
        {"selector": "edge.reads", "style": {"line-color": faint, "target-arrow-color": faint, "line-style": "dashed",
                                             "opacity": 0.5 if present else 0.35, "width": ew * 0.8}},
        {"selector": "edge[label]", "style": {
            "label": "data(label)", "font-size": round(11 * k, 1), "color": "#7a3d00" if present else "#b35900",
            "text-background-color": "#ffffff", "text-background-opacity": 0.9, "text-background-padding": "2px",
            "font-family": "monospace", "text-rotation": "none", "text-events": "yes",  # the label is clickable
        }},
        {"selector": "edge.broadcast", "style": {"line-color": "#e6a23c", "target-arrow-color": "#e6a23c"}},
        {"selector": "edge.folded", "style": {"opacity": 0.8 if not present else 0.9}},
        # a long edge from the forward column: its label next to the gradient that reads it, not
        # halfway, where it would hide under the forward nodes
        {"selector": "edge.folded-read", "style": {"label": "", "target-label": "data(label)",
                                                   "target-text-offset": "data(label_offset)"}},
        {"selector": "node.selected", "style": {"border-width": 4 * k, "border-color": "#f1c40f",
                                                "border-style": "solid"}},
        {"selector": "edge.incident", "style": {"line-color": "#f39c12", "target-arrow-color": "#f39c12",
                                                "width": 2 * ew, "opacity": 1}},
        {"selector": "node.step-done", "style": {"border-color": STEP_DONE, "border-width": 3 * k}},
        {"selector": "node.step-rule", "style": {"border-color": STEP_RULE, "border-width": 4 * k,
                                                 "border-style": "solid"}},
        {"selector": "node.step-sum", "style": {"border-color": STEP_SUM, "border-width": 4 * k,
                                                "border-style": "solid"}},
        {"selector": "node.step-current", "style": {"border-color": STEP_CURRENT, "border-width": 5 * k,
                                                    "border-style": "solid"}},
        # the gradient of the node being visited: the same red, so the eye finds the pair
        {"selector": "node.step-mirror", "style": {"border-color": STEP_CURRENT, "border-width": 5 * k,
                                                   "border-style": "solid"}},
        {"selector": "edge.step-flow", "style": {"line-color": STEP_CURRENT, "target-arrow-color": STEP_CURRENT,
                                                 "width": 2 * ew}},
    ]
    for cat, col in CATEGORY_COLOURS.items():
        shape, bstyle, bwidth = CATEGORY_SHAPES[cat]
        style.insert(1, {"selector": f"node.cat-{cat}", "style": {
            "background-color": col, "shape": shape, "border-style": bstyle, "border-width": bwidth * (1.4 if present
                                                                                                      else 1.0)}})
    # after the category rules (it wins over the gradient ops' dashed border), before output, selection and steps
    shape, bstyle, bwidth, bcolour = WALL
    style.insert(1 + len(CATEGORY_COLOURS), {"selector": "node.cat-gradient.forward", "style": {
        "shape": shape, "border-style": bstyle, "border-width": bwidth * k, "border-color": bcolour}})
    return style


# the legend's little shapes (an SVG path in a 22 x 14 box) for each cytoscape shape used above
_SVG_SHAPES = {
    "ellipse": "M1 7 A10 6 0 1 0 21 7 A10 6 0 1 0 1 7 Z",
    "round-rectangle": "M4 1 H18 Q21 1 21 4 V10 Q21 13 18 13 H4 Q1 13 1 10 V4 Q1 1 4 1 Z",
    "rectangle": "M1 1 H21 V13 H1 Z",
    "round-octagon": "M5 1 H17 L21 4 V10 L17 13 H5 L1 10 V4 Z",
    "cut-rectangle": "M4 1 H18 L21 4 V10 L18 13 H4 L1 10 V4 Z",
    "barrel": "M1 3 Q11 -1 21 3 V11 Q11 15 1 11 Z",
    "round-hexagon": "M5 1 H17 L21 7 L17 13 H5 L1 7 Z",
    "round-tag": "M1 1 H16 L21 7 L16 13 H1 Z",
}
_SVG_DASH = {"solid": "", "dotted": ' stroke-dasharray="1.5 2"', "dashed": ' stroke-dasharray="4 2"', "double": ""}


def _chip(category: str, present: bool) -> str:
    shape, bstyle, bwidth = CATEGORY_SHAPES.get(category, ("round-rectangle", "solid", 1.0))
    w, h = (33, 21) if present else (22, 14)
    sw = 2.2 if bstyle == "double" else min(bwidth, 2.0)
    return (f'<svg width="{w}" height="{h}" viewBox="0 0 22 14" style="vertical-align:middle">'
            f'<path d="{_SVG_SHAPES[shape]}" fill="{colour(category)}" stroke="#333" stroke-width="{sw}"'
            f'{_SVG_DASH[bstyle]}/></svg>')


def legend_html(categories: list[str] | None = None, lang: str = "en", backward: bool = True,
                present: bool = False) -> str:
    """A row of chips, one per category shown (all categories by default): its colour AND its shape.

    ``present``: large type, for a projector.
    """

    cats = categories if categories is not None else list(CATEGORIES)
    chips = [
        f'<span class="asg-chip" style="display:inline-block;margin:1px 10px 1px 0;white-space:nowrap">'
        f'{_chip(c, present)} {user_text(category_label(c, lang))}</span>'
        for c in cats
    ]
    if backward:
        size = 'width="33" height="21"' if present else 'width="22" height="14"'
        chips.append('<span class="asg-chip" style="display:inline-block;margin-right:10px;white-space:nowrap">'
                     f'<svg {size} viewBox="0 0 22 14" style="vertical-align:middle"><rect x="1" y="1" width="20" '
                     f'height="12" rx="3" fill="{colour("gradient")}" stroke="#555" stroke-width="2" '
                     f'stroke-dasharray="4 2"/></svg> {user_text(t("legend_backward", lang))}</span>')
        chips.append('<span class="asg-chip" style="display:inline-block;white-space:nowrap">'
                     f'<svg {size} viewBox="0 0 22 14" style="vertical-align:middle"><line x1="1" y1="7" x2="21" '
                     'y2="7" stroke="#999" stroke-width="2" stroke-dasharray="4 2"/></svg> '
                     f'{user_text(t("legend_reads", lang))}</span>')
    fs = "19px" if present else "12px"
    return f'<div class="asg-legend" style="font-size:{fs};line-height:1.7">{"".join(chips)}</div>'
