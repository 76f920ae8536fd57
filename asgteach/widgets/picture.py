"""The graph as a picture: what a notebook shows before anything runs.

A lesson opened in JupyterLab is *untrusted* until its cells run, and an untrusted output may
only show what cannot run code: ``image/png`` yes; ``image/svg+xml`` and HTML holding SVG no (the
sanitizer strips the SVG and leaves its text as a garbled run of words). So every graph output
carries a PNG, and beside it the same drawing as SVG, which trusted views, GitHub, nbviewer and
``nbconvert`` prefer (sharp at any zoom, text you can search). A live kernel shows the clickable
widget instead; the picture's one line of text says so: "run this cell to click the nodes".

The picture is the widget's drawing, not a second one:

* the same elements (:func:`.elements.build_elements`: what is drawn, folded glue, closed layers),
* the same positions (:func:`.layout.mirror_layout`: forward column top-down, gradients mirrored on
  the right at their node's height),
* the same look, read from the widget's own stylesheet (:func:`.styles.cytoscape_style`): fill
  colours of the colour-blind-safe palette, node shapes, border styles, edge colours and dashes.

A picture cannot be panned, zoomed or hovered, so it takes three liberties: a layer's name is left
out where it would cover a node, an edge label slides along its edge (or just above or below it)
to a spot free of nodes and other labels, and a faded context node keeps its label readable.

Sizes are CSS pixels at 100 % zoom: node labels are 12 px (19 px in presentation mode) and edge
labels 11 px, as in the widget, so the PNG is drawn at screen resolution and nothing in it is
smaller than 11 px. The two painters (SVG by hand, PNG through matplotlib's Agg) live in
:mod:`.paint`, which says why matplotlib.

Use: :func:`picture_mimebundle` (what a display hook returns), :func:`picture_svg`,
:func:`picture_png`, or :class:`GraphPicture` (an object that displays itself and can be saved).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .elements import COLLAPSE_DEFAULT, MODES, Scope, build_elements, scope_of, visible_ids
from .i18n import t
from .layout import FONT_PX, mirror_layout
from .paint import MONO, Node, Shape, Text, png_base64, to_png, to_svg
from .styles import CATEGORY_SHAPES, PRESENT_SCALE, category_label, colour, cytoscape_style

__all__ = ["GraphPicture", "picture_mimebundle", "picture_svg", "picture_png", "picture_hint", "HINTS"]

#: The one line above the picture: the graph is clickable once its cell runs. (No claim about what
#: is installed: the picture cannot know why it is the one being shown.)
HINTS = {"en": "▶ run this cell to click the nodes", "ru": "▶ выполните эту ячейку, чтобы щёлкать по узлам"}
#: Space around the drawing, between the hint, the graph and the legend (px).
MARGIN, SECTION_GAP = 12.0, 14.0
#: Width of the legend before it wraps, at the least (px): a small graph still gets a readable legend.
LEGEND_MIN_WIDTH = 560.0
_EDGE_LABEL_PX = 11.0
_CHIP_W, _CHIP_H = 22.0, 14.0


def picture_hint(lang: str = "en") -> str:
    """The line the picture carries, in ``lang`` (English when there is no text in that language)."""
    return HINTS.get((lang or "en").lower()[:2], HINTS["en"])


# -- what to draw: the view's settings ----------------------------------------------------------------------

def _settings(target: Any, lang: str | None, mode: str | None, expanded: Any, details: bool | None,
              present: bool | None) -> tuple[Scope, str, str, set[str] | None, bool, bool]:
    """(scope, lang, mode, expanded, details, present): a GraphView's own, or the defaults a new view starts with."""
    if hasattr(target, "scope") and not isinstance(target, Scope):   # a GraphView: draw what it draws now
        view = target
        scope = view.scope
        lang = lang or getattr(view, "lang", None)
        mode = mode or getattr(view, "mode", None)
        if expanded == "auto" and hasattr(view, "expanded"):
            expanded = view.expanded
        if details is None:
            details = getattr(view, "details", None)
        if present is None:
            present = getattr(view, "present", None)
    else:
        scope = target if isinstance(target, Scope) else scope_of(target)
    mode = mode or ("both" if scope.has_backward else "forward")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    n_drawn = len(visible_ids(scope, mode)[0])
    if expanded == "auto":   # the widget's defaults: big graphs start with layers closed and glue drawn
        expanded = set() if n_drawn > COLLAPSE_DEFAULT else None
    if details is None:
        details = n_drawn > COLLAPSE_DEFAULT
    return scope, (lang or "en"), mode, expanded, bool(details), bool(present)


# -- the stylesheet, read as cytoscape reads it ---------------------------------------------------------------

def _matches(selector: str, group: str, classes: set[str], data: dict) -> bool:
    if selector == ":parent":
        return data.get("kind") == "compound"
    if selector.endswith("]"):   # "edge[label]": the element has that data field
        kind, _, key = selector[:-1].partition("[")
        return kind == group[:-1] and bool(data.get(key))
    kind, *need = selector.split(".")
    return kind == group[:-1] and set(need) <= classes


def _style(sheet: list[dict], element: dict) -> dict:
    """The element's style: every matching rule of ``sheet`` in order, later rules winning."""
    classes = set(element.get("classes", "").split())
    out: dict = {}
    for rule in sheet:
        if _matches(rule["selector"], element["group"], classes, element["data"]):
            out.update(rule["style"])
    return out


def _px(value: Any, default: float = 0.0) -> float:
    try:
        return float(str(value).removesuffix("px"))
    except ValueError:
        return default


# -- outlines -------------------------------------------------------------------------------------------------

def _arc(cx: float, cy: float, r: float, a0: float, a1: float, n: int = 5) -> list[tuple[float, float]]:
    return [(cx + r * math.cos(a0 + (a1 - a0) * k / n), cy + r * math.sin(a0 + (a1 - a0) * k / n))
            for k in range(n + 1)]


def outline(shape: str, cx: float, cy: float, w: float, h: float) -> list[tuple[float, float]]:
    """The points around a node of cytoscape shape ``shape`` centred at (cx, cy), ``w`` x ``h`` px."""
    x0, y0, x1, y1 = cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2
    if shape == "ellipse":
        return [(cx + w / 2 * math.cos(2 * math.pi * k / 48), cy + h / 2 * math.sin(2 * math.pi * k / 48))
                for k in range(48)]
    if shape == "round-rectangle":
        r = min(w / 4, h / 4, 8.0)
        pi = math.pi
        return (_arc(x1 - r, y0 + r, r, -pi / 2, 0) + _arc(x1 - r, y1 - r, r, 0, pi / 2)
                + _arc(x0 + r, y1 - r, r, pi / 2, pi) + _arc(x0 + r, y0 + r, r, pi, 3 * pi / 2))
    if shape in ("cut-rectangle", "round-octagon"):
        c = min(8.0, h / 4, w / 4) if shape == "cut-rectangle" else min(h * 0.3, w * 0.15)
        return [(x0 + c, y0), (x1 - c, y0), (x1, y0 + c), (x1, y1 - c), (x1 - c, y1), (x0 + c, y1), (x0, y1 - c),
                (x0, y0 + c)]
    if shape == "barrel":
        b = h * 0.15
        top = [(x0 + w * k / 12, y0 + b - 4 * b * (k / 12) * (1 - k / 12)) for k in range(13)]
        bottom = [(x1 - w * k / 12, y1 - b + 4 * b * (k / 12) * (1 - k / 12)) for k in range(13)]
        return top + bottom
    if shape == "round-hexagon":
        c = min(h / 2, w * 0.15)
        return [(x0 + c, y0), (x1 - c, y0), (x1, cy), (x1 - c, y1), (x0 + c, y1), (x0, cy)]
    if shape == "round-tag":
        c = min(h / 2, w * 0.15)
        return [(x0, y0), (x1 - c, y0), (x1, cy), (x1 - c, y1), (x0, y1)]
    return [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]   # rectangle, and any shape not listed


def _dash(style: str, width: float) -> tuple[float, ...] | None:
    if style == "dotted":
        return (max(1.0, width), max(2.0, 1.5 * width))
    if style == "dashed":
        return (5.0, 3.0)
    return None


def _exit(points: list[tuple[float, float]], a: tuple[float, float], b: tuple[float, float]) -> float:
    """The largest t in [0, 1] where a + t (b - a) crosses the outline ``points`` (0 if it never does)."""
    best = 0.0
    dx, dy = b[0] - a[0], b[1] - a[1]
    for (px, py), (qx, qy) in zip(points, points[1:] + points[:1]):
        ex, ey = qx - px, qy - py
        den = dx * ey - dy * ex
        if abs(den) < 1e-9:
            continue
        s = ((px - a[0]) * ey - (py - a[1]) * ex) / den     # along a -> b
        u = ((px - a[0]) * dy - (py - a[1]) * dx) / den     # along the outline's edge
        if 0.0 <= s <= 1.0 and 0.0 <= u <= 1.0:
            best = max(best, s)
    return best


# -- the drawing ----------------------------------------------------------------------------------------------

class _Drawing:
    """Records (see :mod:`.paint`) for one graph, its width and height, and its accessible name."""

    def __init__(self, target: Any, lang: str | None = None, mode: str | None = None, expanded: Any = "auto",
                 details: bool | None = None, present: bool | None = None) -> None:
        scope, self.lang, self.mode, expanded, details, present = _settings(target, lang, mode, expanded, details,
                                                                            present)
        k = PRESENT_SCALE if present else 1.0
        self.font = FONT_PX * k
        self.sheet = cytoscape_style(present, FONT_PX)
        self.elements = els = build_elements(scope, self.mode, expanded, details=details)
        self.layout = mirror_layout(els, self.font)
        self.items: list = []
        self._graph(els)
        self._frame(els)

    def _graph(self, els: list[dict]) -> None:
        lay = self.layout
        by_id = {e["data"]["id"]: e for e in els}
        outlines: dict[str, list[tuple[float, float]]] = {}
        nodes, compounds = [], []
        for e in els:
            if e["group"] != "nodes":
                continue
            (compounds if e["data"].get("kind") == "compound" else nodes).append(e)
        styles = {e["data"]["id"]: _style(self.sheet, e) for e in nodes}
        for e in nodes:
            eid = e["data"]["id"]
            if eid in lay.positions:
                (cx, cy), (w, h) = lay.positions[eid], lay.sizes[eid]
                outlines[eid] = outline(str(styles[eid].get("shape", "rectangle")), cx, cy, w, h)
        rects = [(cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
                 for (cx, cy), (w, h) in ((lay.positions[i], lay.sizes[i]) for i in outlines)]
        # open layers: a box around everything inside them (drawn first: underneath), its name above it
        # where that covers no node (the layout leaves no room for names; a node's label matters more)
        boxes = self._boxes(compounds, by_id)
        for eid in sorted(boxes, key=lambda b: boxes[b][0][1]):
            (x0, y0, x1, y1), st = boxes[eid]
            fs = _px(st.get("font-size"), self.font)
            self.items.append(Shape([(x0, y0), (x1, y0), (x1, y1), (x0, y1)], fill=st.get("background-color"),
                                    opacity=float(st.get("background-opacity", 1.0))))
            self.items.append(Shape([(x0, y0), (x1, y0), (x1, y1), (x0, y1)], stroke=st.get("border-color"),
                                    width=_px(st.get("border-width"), 1.0)))
            name = by_id[eid]["data"]["label"]
            half = len(name) * 0.62 * fs / 2 + 2
            r = ((x0 + x1) / 2 - half, y0 - 1.4 * fs, (x0 + x1) / 2 + half, y0 - 0.1 * fs)
            if any(r[0] < o[2] and o[0] < r[2] and r[1] < o[3] and o[1] < r[3] for o in rects):
                continue
            rects.append(r)
            self.items.append(Text((x0 + x1) / 2, y0 - fs * 0.75, [name], fs, colour=st.get("color", "#4a6fa5"),
                                   bold=st.get("font-weight") == "bold"))
        labels = []
        for e in els:
            if e["group"] == "edges" and e["data"]["source"] in outlines and e["data"]["target"] in outlines:
                labels += self._edge(e, outlines)
        for e in nodes:
            if e["data"]["id"] in outlines:
                self.items.append(self._node(e, styles[e["data"]["id"]], outlines[e["data"]["id"]]))
        self._place_labels(labels, outlines)   # edge labels on top, as cytoscape draws them

    def _boxes(self, compounds: list[dict], by_id: dict) -> dict[str, tuple[tuple[float, ...], dict]]:
        """Each open layer's box (x0, y0, x1, y1) around its members (nested boxes and their names included)."""
        lay = self.layout
        kids: dict[str, list[str]] = {}
        for eid, e in by_id.items():
            parent = e["data"].get("parent")
            if parent and e["group"] == "nodes":
                kids.setdefault(parent, []).append(eid)
        out: dict[str, tuple[tuple[float, ...], dict]] = {}

        def box(eid: str) -> tuple[float, ...] | None:
            if eid in out:
                return out[eid][0]
            if eid in lay.positions:
                (cx, cy), (w, h) = lay.positions[eid], lay.sizes[eid]
                return (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
            inside = [b for b in (box(k) for k in kids.get(eid, [])) if b is not None]
            if not inside:
                return None
            st = _style(self.sheet, by_id[eid])
            pad, fs = _px(st.get("padding"), 10.0), _px(st.get("font-size"), self.font)
            b = (min(i[0] for i in inside) - pad, min(i[1] for i in inside) - pad,
                 max(i[2] for i in inside) + pad, max(i[3] for i in inside) + pad)
            out[eid] = (b, st)
            # what encloses this box also encloses its name, written above it
            half = len(by_id[eid]["data"]["label"]) * 0.62 * fs / 2
            return (min(b[0], (b[0] + b[2]) / 2 - half), b[1] - 1.5 * fs, max(b[2], (b[0] + b[2]) / 2 + half), b[3])

        for e in compounds:
            box(e["data"]["id"])
        return out

    def _node(self, e: dict, st: dict, points: list[tuple[float, float]]) -> Node:
        d = e["data"]
        cx, cy = self.layout.positions[d["id"]]
        bstyle = str(st.get("border-style", "solid"))
        bw = _px(st.get("border-width"), 1.0)
        opacity = float(st.get("opacity", 1.0))
        shape = Shape(points, fill=st.get("background-color", "#ffffff"), stroke=st.get("border-color", "#666666"),
                      width=bw, dash=_dash(bstyle, bw), opacity=opacity, double=bstyle == "double")
        # a faded node (context: a forward value the backward graph reads) keeps a readable label: the widget
        # fades both, but a picture is read from the back of the room and cannot be hovered
        text = Text(cx, cy, str(d.get("label", "")).split("\n"), _px(st.get("font-size"), self.font),
                    colour=st.get("color", "#111111"), bold=st.get("font-weight") == "bold",
                    opacity=max(opacity, 0.8))
        one_line = str(d.get("label", "")).replace("\n", " ")
        title = f"#{d['nid']} {d.get('op', '')} — {one_line}" if "nid" in d else one_line
        return Node(d["id"], title, [shape, text])

    def _edge(self, e: dict, outlines: dict) -> list:
        d = e["data"]
        st = _style(self.sheet, e)
        a, b = self.layout.positions[d["source"]], self.layout.positions[d["target"]]
        t0, t1 = _exit(outlines[d["source"]], a, b), _exit(outlines[d["target"]], b, a)
        start = (a[0] + (b[0] - a[0]) * t0, a[1] + (b[1] - a[1]) * t0)
        end = (b[0] + (a[0] - b[0]) * t1, b[1] + (a[1] - b[1]) * t1)
        length = math.hypot(end[0] - start[0], end[1] - start[1])
        if length < 1.0:
            return []
        ux, uy = (end[0] - start[0]) / length, (end[1] - start[1]) / length
        width = _px(st.get("width"), 1.5)
        opacity = float(st.get("opacity", 1.0))
        arrow = (6.0 + 2.5 * width) * float(st.get("arrow-scale", 0.8)) / 0.8
        base = (end[0] - ux * arrow, end[1] - uy * arrow)
        line = Shape([start, (end[0] - ux * arrow * 0.8, end[1] - uy * arrow * 0.8)], stroke=st.get("line-color"),
                     width=width, dash=(6.0, 4.0) if st.get("line-style") == "dashed" else None, opacity=opacity,
                     closed=False)
        head = Shape([end, (base[0] - uy * arrow / 2, base[1] + ux * arrow / 2),
                      (base[0] + uy * arrow / 2, base[1] - ux * arrow / 2)],
                     fill=st.get("target-arrow-color", st.get("line-color")), opacity=opacity)
        self.items += [line, head]
        text = str(d.get("label", ""))
        if not text or not (st.get("label") == "data(label)" or st.get("target-label") == "data(label)"):
            return []
        fs = _px(st.get("font-size"), _EDGE_LABEL_PX)
        # where along the edge: halfway, or beside the node that reads it (the view's target-text-offset)
        back = min(0.5, (len(text) * 0.62 * fs / 2 + 12) / length)
        want = 0.5 if st.get("label") == "data(label)" else 1.0 - back
        return [(start, end, want, text, fs, st)]

    def _place_labels(self, labels: list, outlines: dict) -> None:
        """Edge labels where they cover no node and no other label, as near their wanted place as that allows.

        cytoscape puts every label at one fixed spot and lets them overlap; a picture cannot be
        panned or clicked to untangle them, so each label slides along its own edge to the first
        free spot (or the least covered one).
        """
        taken = [(min(p[0] for p in pts), min(p[1] for p in pts), max(p[0] for p in pts), max(p[1] for p in pts))
                 for pts in outlines.values()]

        def covered(r: tuple[float, float, float, float]) -> float:
            return sum(max(0.0, min(r[2], o[2]) - max(r[0], o[0])) * max(0.0, min(r[3], o[3]) - max(r[1], o[1]))
                       for o in taken)

        for start, end, want, text, fs, st in labels:
            w, h = len(text) * 0.62 * fs + 4, fs * 1.25 + 2
            best: tuple[float, tuple[float, float, float, float]] | None = None
            spots = [(want + (k + 1) // 2 * 0.06 * (1 if k % 2 else -1), side) for side in (0.0, -1.0, 1.0)
                     for k in range(13)]   # on the edge: want, then steps of 0.06 either side; then above, below
            for f, side in spots:
                if not 0.1 <= f <= 0.95:
                    continue
                cx, cy = start[0] + (end[0] - start[0]) * f, start[1] + (end[1] - start[1]) * f + side * (h + 1)
                r = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
                c = covered(r)
                if best is None or c < best[0] - 1e-6:
                    best = (c, r)
                if c == 0.0:
                    break
            if best is None:
                continue
            x0, y0, x1, y1 = best[1]
            taken.append(best[1])
            self.items.append(Shape([(x0, y0), (x1, y0), (x1, y1), (x0, y1)],
                                    fill=st.get("text-background-color", "#ffffff"),
                                    opacity=float(st.get("text-background-opacity", 0.9))))
            self.items.append(Text((x0 + x1) / 2, (y0 + y1) / 2, [text], fs, colour=st.get("color", "#b35900")))

    def _frame(self, els: list[dict]) -> None:
        """Move the graph below the hint line, add the legend below it, and size the page."""
        xs, ys = [], []
        for it in self.items:
            if isinstance(it, Shape):
                xs += [p[0] for p in it.points]
                ys += [p[1] for p in it.points]
            elif isinstance(it, Text):
                half = max((len(s) for s in it.lines), default=0) * 0.62 * it.size / 2
                xs += [it.x - half, it.x + half]
                ys += [it.y - len(it.lines) * it.size * 0.65, it.y + len(it.lines) * it.size * 0.65]
            else:
                for s in it.items:
                    if isinstance(s, Shape):
                        xs += [p[0] for p in s.points]
                        ys += [p[1] for p in s.points]
        gx0, gy0 = (min(xs), min(ys)) if xs else (0.0, 0.0)
        gw, gh = ((max(xs) - gx0), (max(ys) - gy0)) if xs else (0.0, 0.0)
        hint_px = max(12.0, self.font)
        top = MARGIN + hint_px * 1.25 + SECTION_GAP
        _shift(self.items, MARGIN - gx0, top - gy0)
        hint = Text(MARGIN, MARGIN + hint_px * 0.625, [picture_hint(self.lang)], hint_px, colour="#555555",
                    anchor="start", italic=True)
        width = max(gw, LEGEND_MIN_WIDTH, len(hint.lines[0]) * 0.62 * hint_px) + 2 * MARGIN
        cats = sorted({e["data"]["cat"] for e in els if e["data"].get("cat")})
        legend, legend_h = self._legend(cats, top + gh + SECTION_GAP, width - 2 * MARGIN)
        self.items = [hint, *self.items, Node("legend", "", legend, cls="asg-legend")]
        self.width, self.height = math.ceil(width), math.ceil(top + gh + SECTION_GAP + legend_h + MARGIN)
        n = sum(1 for e in els if e["group"] == "nodes" and e["data"].get("kind") != "compound")
        self.label = f"computation graph, {n} nodes ({self.mode}); {picture_hint(self.lang)}"

    def _legend(self, cats: list[str], y: float, width: float) -> tuple[list, float]:
        """The legend's chips (each category's colour AND shape, then the backward marks), wrapped to ``width``."""
        fs = 12.0 * (PRESENT_SCALE if self.font > FONT_PX else 1.0)
        k = fs / 12.0
        cw, ch = _CHIP_W * k, _CHIP_H * k
        entries: list[tuple[list, str]] = []
        for c in cats:
            shape, bstyle, bwidth = CATEGORY_SHAPES.get(c, ("round-rectangle", "solid", 1.0))
            sw = 2.2 if bstyle == "double" else min(bwidth, 2.0)
            entries.append(([Shape(outline(shape, cw / 2, ch / 2, cw - 2, ch - 2), fill=colour(c), stroke="#333333",
                                   width=sw, dash=_dash(bstyle, sw), double=bstyle == "double")],
                            category_label(c, self.lang)))
        if self.mode != "forward":
            entries.append(([Shape(outline("round-rectangle", cw / 2, ch / 2, cw - 2, ch - 2), fill=colour("gradient"),
                                   stroke="#555555", width=2.0, dash=(4.0, 2.0))], t("legend_backward", self.lang)))
            entries.append(([Shape([(1, ch / 2), (cw - 1, ch / 2)], stroke="#999999", width=2.0, dash=(4.0, 2.0),
                                   closed=False)], t("legend_reads", self.lang)))
        out: list = []
        x, row_h, rows = 0.0, fs * 1.7, 0
        for chip, text in entries:
            w = cw + 6 + len(text) * 0.62 * fs + 14
            if x > 0 and x + w > width:
                x, rows = 0.0, rows + 1
            ox, oy = MARGIN + x, y + rows * row_h + (row_h - ch) / 2
            _shift(chip, ox, oy)
            out += chip
            out.append(Text(ox + cw + 6, oy + ch / 2, [text], fs, colour="#222222", anchor="start"))
            x += w
        return out, (rows + 1) * row_h if entries else 0.0


def _shift(items: list, dx: float, dy: float) -> None:
    for it in items:
        if isinstance(it, Shape):
            it.points = [(x + dx, y + dy) for x, y in it.points]
        elif isinstance(it, Text):
            it.x, it.y = it.x + dx, it.y + dy
        else:
            _shift(it.items, dx, dy)


# -- the public entry points ----------------------------------------------------------------------------------

def picture_svg(graph_or_view: Any, *, lang: str | None = None, mode: str | None = None, expanded: Any = "auto",
                details: bool | None = None, present: bool | None = None) -> str:
    """The picture as an SVG document (text).

    ``graph_or_view``: a Tensor, a list of Tensors, a Graph, a Scope, or a GraphView (then its current
    mode, open layers, details and language are drawn unless given here). ``expanded``: the layers drawn
    open (None: all); "auto" as a new view starts.
    """
    d = _Drawing(graph_or_view, lang, mode, expanded, details, present)
    return to_svg(d.items, d.width, d.height, d.label)


def picture_png(graph_or_view: Any, *, lang: str | None = None, mode: str | None = None, expanded: Any = "auto",
                details: bool | None = None, present: bool | None = None, scale: float = 1.0) -> bytes:
    """The picture as PNG bytes, ``scale`` pixels per CSS px (1: screen resolution); the rest as :func:`picture_svg`."""
    d = _Drawing(graph_or_view, lang, mode, expanded, details, present)
    return to_png(d.items, d.width, d.height, scale)


def picture_mimebundle(graph_or_view: Any, *, lang: str | None = None, mode: str | None = None,
                       expanded: Any = "auto", details: bool | None = None,
                       present: bool | None = None) -> dict[str, str]:
    """``{"image/png": base64 text, "image/svg+xml": svg text}``: the picture, ready for a display bundle.

    Merge it into a ``_repr_mimebundle_``. Put no ``text/html`` beside it: an untrusted notebook
    shows the first *safe* type in JupyterLab's order, and sanitized HTML comes before PNG.
    Arguments as :func:`picture_svg`; one layout serves both images.
    """
    d = _Drawing(graph_or_view, lang, mode, expanded, details, present)
    return {"image/png": png_base64(to_png(d.items, d.width, d.height)),
            "image/svg+xml": to_svg(d.items, d.width, d.height, d.label)}


class GraphPicture:
    """A graph's picture that displays itself (PNG and SVG) and can be saved.

    What ``at.show`` returns where no clickable view can be drawn (a script, a terminal, no
    widget packages). ``.svg`` is the SVG text, ``.png`` the PNG bytes; ``save(path)`` writes
    ``.svg``, ``.png`` or ``.html`` (a page holding the SVG) by the file's suffix.
    """

    def __init__(self, graph_or_view: Any, *, lang: str | None = None, mode: str | None = None,
                 expanded: Any = "auto", details: bool | None = None, present: bool | None = None) -> None:
        d = _Drawing(graph_or_view, lang, mode, expanded, details, present)
        self.width, self.height, self.label = d.width, d.height, d.label
        self.svg = to_svg(d.items, d.width, d.height, d.label)
        self._items = d.items
        self._png: bytes | None = None

    @property
    def png(self) -> bytes:
        """The PNG (drawn the first time it is asked for)."""
        if self._png is None:
            self._png = to_png(self._items, self.width, self.height)
        return self._png

    @property
    def data(self) -> str:
        """The SVG text (``at.show(...).data`` was the HTML of an ``IPython.display.HTML`` before)."""
        return self.svg

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"image/png": png_base64(self.png), "image/svg+xml": self.svg, "text/plain": repr(self)}

    def __repr__(self) -> str:
        return f"<GraphPicture {self.width}x{self.height} px: {self.label}>"

    def save(self, path: str | Path) -> Path:
        """Write the picture to ``path``: .svg, .png, or .html (a page showing the SVG). Returns the path."""
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix == ".png":
            path.write_bytes(self.png)
        elif suffix == ".svg":
            path.write_text(self.svg, encoding="utf-8")
        elif suffix in (".html", ".htm"):
            path.write_text(f'<!doctype html><meta charset="utf-8"><title>graph</title>'
                            f'<body style="font-family:{MONO}">{self.svg}</body>', encoding="utf-8")
        else:
            raise ValueError(f"save: {path.name!r}: the suffix must be .svg, .png or .html")
        return path
