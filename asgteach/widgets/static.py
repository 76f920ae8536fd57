"""A static HTML/SVG picture of a graph, for places with no widget frontend.

nbconvert, GitHub's notebook preview and plain HTML exports cannot run widgets; there the
view falls back to this: the same elements, colours and labels as the GraphView, laid out
top to bottom in layers (a node sits one layer below its deepest input), as inline SVG.
Hovering a node shows its op, name and shape (an SVG ``<title>``). No JavaScript.

Labels hold user text (names, layer names). JupyterLab typesets ``text/html`` outputs with
MathJax, and an SVG ``<text>`` cannot hold a ``<span>``: every label goes through
:func:`~asgteach.usertext.plain_text` (escaped, ``$`` and ``\\`` as references) and the whole
picture carries the no-maths class :data:`~asgteach.usertext.NO_MATH` (it has no maths of its own).
"""

from __future__ import annotations

from typing import Any

from .elements import COLLAPSE_DEFAULT, MODES, Scope, build_elements, scope_of, visible_ids
from .styles import BACKWARD_BORDER, colour, legend_html
from ..usertext import NO_MATH, plain_text

__all__ = ["static_html", "layered_layout"]

_CHAR_W, _LINE_H, _PAD, _GAP_X, _GAP_Y = 6.2, 13, 8, 14, 34


def _size(label: str) -> tuple[float, float]:
    lines = label.split("\n")
    return max(len(s) for s in lines) * _CHAR_W + 2 * _PAD, len(lines) * _LINE_H + 2 * _PAD - 4


def layered_layout(elements: list[dict]) -> dict[str, tuple[float, float, float, float]]:
    """(x, y, width, height) of every drawable node: layers by longest path, ordered by the mean x of inputs."""
    nodes = [e for e in elements if e["group"] == "nodes" and e["data"].get("kind") != "compound"]
    ids = [e["data"]["id"] for e in nodes]
    preds: dict[str, list[str]] = {i: [] for i in ids}
    for e in elements:
        if e["group"] == "edges" and e["data"]["target"] in preds and e["data"]["source"] in preds:
            preds[e["data"]["target"]].append(e["data"]["source"])
    layer: dict[str, int] = {}

    def depth(i: str) -> int:
        stack = [i]
        while stack:
            j = stack[-1]
            todo = [p for p in preds[j] if p not in layer]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            layer[j] = 1 + max((layer[p] for p in preds[j]), default=-1)
        return layer[i]

    for i in ids:
        depth(i)
    sizes = {e["data"]["id"]: _size(e["data"]["label"]) for e in nodes}
    rows: dict[int, list[str]] = {}
    for i in ids:
        rows.setdefault(layer[i], []).append(i)
    pos: dict[str, tuple[float, float, float, float]] = {}
    y = 10.0
    for k in sorted(rows):
        row = rows[k]
        if k:  # order by where the inputs are: fewer crossings
            row.sort(key=lambda i: sum(pos[p][0] for p in preds[i]) / max(1, len(preds[i])) if preds[i] else 0.0)
        x = 10.0
        h = max(sizes[i][1] for i in row)
        for i in row:
            w_, h_ = sizes[i]
            pos[i] = (x, y, w_, h_)
            x += w_ + _GAP_X
        y += h + _GAP_Y
    return pos


def static_html(target: Any, lang: str = "en", mode: str | None = None, expanded: set[str] | None | str = "auto",
                max_width: int = 1100) -> str:
    """Self-contained HTML (inline SVG + legend) of a Tensor, a list of Tensors, a Graph or a Scope."""
    scope = target if isinstance(target, Scope) else scope_of(target)
    mode = mode or ("both" if scope.has_backward else "forward")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if expanded == "auto":
        expanded = set() if len(visible_ids(scope, mode)[0]) > COLLAPSE_DEFAULT else None
    els = build_elements(scope, mode, expanded)  # type: ignore[arg-type]
    pos = layered_layout(els)
    width = max((x + w for x, _, w, _ in pos.values()), default=100) + 10
    height = max((y + h for _, y, _, h in pos.values()), default=40) + 10
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="asg-static-graph {NO_MATH}" width="{width:.0f}" '
             f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" font-family="monospace" font-size="10" '
             f'style="max-width:{max_width}px;height:auto">',
             '<defs><marker id="asg-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" '
             'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#999"/></marker></defs>']
    for e in els:
        if e["group"] != "edges":
            continue
        d = e["data"]
        if d["source"] not in pos or d["target"] not in pos:
            continue
        x1, y1, w1, h1 = pos[d["source"]]
        x2, y2, w2, _ = pos[d["target"]]
        classes = e.get("classes", "")
        dash = ' stroke-dasharray="4 3"' if "backward" in classes or "reads" in classes else ""
        stroke = "#e6a23c" if "broadcast" in classes else "#999"
        parts.append(f'<line x1="{x1 + w1 / 2:.1f}" y1="{y1 + h1:.1f}" x2="{x2 + w2 / 2:.1f}" y2="{y2:.1f}" '
                     f'stroke="{stroke}" stroke-width="1.2"{dash} marker-end="url(#asg-arrow)"/>')
        if d.get("label"):
            parts.append(f'<text x="{(x1 + w1 / 2 + x2 + w2 / 2) / 2:.1f}" y="{(y1 + h1 + y2) / 2:.1f}" '
                         f'fill="#b35900" font-size="9">{plain_text(d["label"])}</text>')
    for e in els:
        d = e["data"]
        if e["group"] != "nodes" or d["id"] not in pos:
            continue
        x, y, w_, h_ = pos[d["id"]]
        classes = e.get("classes", "").split()
        fill = colour(d["cat"]) if d.get("cat") else "#eef3fb"
        stroke, extra = "#666", ""
        if "backward" in classes:
            stroke, extra = BACKWARD_BORDER, ' stroke-dasharray="4 2"'
        if "output" in classes:
            stroke = "#d35400"
        rx = h_ / 2 if "leaf" in classes else 5
        opacity = ' opacity="0.5"' if "context" in classes else ""
        title = plain_text(f"#{d.get('nid', '')} {d.get('op', 'layer')} — {d['label']}".replace("\n", " "))
        parts.append(f'<g class="asg-node" data-id="{plain_text(d["id"])}"{opacity}><title>{title}</title>'
                     f'<rect x="{x:.1f}" y="{y:.1f}" width="{w_:.1f}" height="{h_:.1f}" rx="{rx:.1f}" fill="{fill}" '
                     f'stroke="{stroke}" stroke-width="{3 if d.get("kind") == "group" else 1.2}"{extra}/>')
        for k, line in enumerate(d["label"].split("\n")):
            parts.append(f'<text x="{x + w_ / 2:.1f}" y="{y + _PAD + 8 + k * _LINE_H:.1f}" text-anchor="middle">'
                         f'{plain_text(line)}</text>')
        parts.append("</g>")
    parts.append("</svg>")
    cats = sorted({e["data"]["cat"] for e in els if e["data"].get("cat")})
    # Seen in JupyterLab/Notebook, this picture means the widget manager extension is missing or disabled
    note = ("static view (no widget frontend): run the notebook in Jupyter to click nodes. Seeing this inside "
            "JupyterLab or Notebook? The Jupyter widgets extension is not enabled there: run `asgteach doctor` "
            "in a terminal, it says what to install" if not lang.startswith("ru")
            else "статичный вид (нет фронтенда виджетов): запустите блокнот в Jupyter, чтобы щёлкать узлы. Видите "
            "это в JupyterLab или Notebook? Там не включено расширение виджетов Jupyter: выполните в терминале "
            "`asgteach doctor`, он скажет, что установить")
    return (f'<div class="asg-static {NO_MATH}" style="overflow:auto">{"".join(parts)}'
            f'{legend_html(cats or None, lang, backward=mode != "forward")}'
            f'<div style="font-size:10px;color:#888">{plain_text(note)}</div></div>')
