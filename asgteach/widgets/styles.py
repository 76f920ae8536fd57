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

__all__ = ["CATEGORY_COLOURS", "BACKWARD_BORDER", "colour", "cytoscape_style", "legend_html", "category_label"]

#: Fill colour of each category of ``asgteach.ops.CATEGORIES``.
CATEGORY_COLOURS: dict[str, str] = {
    "input": "#7bc96f",
    "parameter": "#2aa198",
    "constant": "#d9d9d9",
    "arithmetic": "#9ecae1",
    "activation": "#fff09a",
    "comparison": "#d7c4ec",
    "reduction": "#fdae6b",
    "normalisation": "#f7b6d2",
    "linalg": "#6baed6",
    "shape": "#c9d29b",
    "convolution": "#b39ddb",
    "loss": "#ef8a87",
    "gradient": "#b0b0b0",
    "output": "#ffc8a2",
}
#: Border of backward-phase nodes (drawn dashed): they were appended by ``at.grad``.
BACKWARD_BORDER = "#555555"
#: Colours of the step-through highlights.
STEP_CURRENT, STEP_RULE, STEP_SUM, STEP_DONE = "#d62728", "#9467bd", "#ff7f0e", "#2ca02c"

assert set(CATEGORY_COLOURS) == set(CATEGORIES), "every category needs a colour"


def colour(category: str) -> str:
    """The fill colour of ``category`` (unknown categories are drawn white)."""
    return CATEGORY_COLOURS.get(category, "#ffffff")


def category_label(category: str, lang: str = "en") -> str:
    """The legend word for ``category`` in ``lang`` (the category name if no text exists yet)."""
    try:
        return explain.category(category, lang).label
    except KeyError:  # a category nobody has written about yet (not even in English)
        return category


def cytoscape_style() -> list[dict]:
    """The cytoscape.js stylesheet: selectors on the classes that ``elements.py`` assigns."""
    style: list[dict] = [
        {"selector": "node", "style": {
            "label": "data(label)", "text-wrap": "wrap", "text-valign": "center", "text-halign": "center",
            "font-size": 10, "font-family": "monospace", "shape": "round-rectangle",
            "width": "label", "height": "label", "padding": "6px", "border-width": 1, "border-color": "#666",
            "background-color": "#ffffff", "color": "#111",
        }},
        {"selector": "node.leaf", "style": {"shape": "ellipse"}},
        {"selector": "node.backward", "style": {
            "border-style": "dashed", "border-width": 2, "border-color": BACKWARD_BORDER, "background-opacity": 0.75,
        }},
        {"selector": "node.context", "style": {"opacity": 0.45}},
        {"selector": "node.output", "style": {"border-width": 3, "border-color": "#d35400"}},
        {"selector": "node.group", "style": {
            "shape": "round-rectangle", "background-color": "#eef3fb", "border-style": "double", "border-width": 4,
            "border-color": "#4a6fa5", "font-size": 11, "font-weight": "bold",
        }},
        {"selector": ":parent", "style": {
            "background-opacity": 0.06, "background-color": "#4a6fa5", "border-color": "#4a6fa5",
            "border-style": "solid", "border-width": 1, "text-valign": "top", "text-halign": "center",
            "label": "data(label)", "font-size": 10, "color": "#4a6fa5", "padding": "10px",
        }},
        {"selector": "edge", "style": {
            "width": 1.5, "line-color": "#9a9a9a", "target-arrow-color": "#9a9a9a", "target-arrow-shape": "triangle",
            "curve-style": "bezier", "arrow-scale": 0.8,
        }},
        {"selector": "edge.backward", "style": {"line-color": "#bbbbbb", "target-arrow-color": "#bbbbbb",
                                                "line-style": "dashed"}},
        {"selector": "edge.reads", "style": {"line-color": "#c6a0e8", "target-arrow-color": "#c6a0e8",
                                             "line-style": "dotted"}},
        {"selector": "edge.broadcast", "style": {
            "label": "data(label)", "font-size": 9, "color": "#b35900", "text-background-color": "#ffffff",
            "text-background-opacity": 0.9, "text-background-padding": "1px", "line-color": "#e6a23c",
            "target-arrow-color": "#e6a23c",
        }},
        {"selector": "node.selected", "style": {"border-width": 4, "border-color": "#f1c40f",
                                                "border-style": "solid"}},
        {"selector": "edge.incident", "style": {"line-color": "#f39c12", "target-arrow-color": "#f39c12", "width": 3}},
        {"selector": "node.step-done", "style": {"border-color": STEP_DONE, "border-width": 3}},
        {"selector": "node.step-rule", "style": {"border-color": STEP_RULE, "border-width": 4,
                                                 "border-style": "solid"}},
        {"selector": "node.step-sum", "style": {"border-color": STEP_SUM, "border-width": 4, "border-style": "solid"}},
        {"selector": "node.step-current", "style": {"border-color": STEP_CURRENT, "border-width": 5,
                                                    "border-style": "solid"}},
        {"selector": "edge.step-flow", "style": {"line-color": STEP_CURRENT, "target-arrow-color": STEP_CURRENT,
                                                 "width": 3}},
    ]
    for cat, col in CATEGORY_COLOURS.items():
        style.insert(1, {"selector": f"node.cat-{cat}", "style": {"background-color": col}})
    return style


def legend_html(categories: list[str] | None = None, lang: str = "en", backward: bool = True) -> str:
    """A row of coloured chips, one per category shown (all categories by default)."""
    cats = categories if categories is not None else list(CATEGORIES)
    chips = [
        f'<span class="asg-chip" style="display:inline-block;margin:1px 6px 1px 0;white-space:nowrap">'
        f'<span style="display:inline-block;width:11px;height:11px;border:1px solid #666;border-radius:3px;'
        f'vertical-align:middle;background:{colour(c)}"></span> {user_text(category_label(c, lang))}</span>'
        for c in cats
    ]
    if backward:
        word = "backward (autograd)" if not lang.lower().startswith("ru") else "обратный проход (autograd)"
        chips.append('<span class="asg-chip" style="display:inline-block;white-space:nowrap">'
                     '<span style="display:inline-block;width:11px;height:11px;border:2px dashed #555;'
                     f'border-radius:3px;vertical-align:middle"></span> {user_text(word)}</span>')
    return f'<div class="asg-legend" style="font-size:11px;line-height:1.6">{"".join(chips)}</div>'
