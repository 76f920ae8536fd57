"""Two painters for one drawing: SVG text, and PNG pixels through matplotlib's Agg.

:mod:`.picture` decides WHAT to draw (outlines, lines, text, in CSS pixels, y down) as a list of
the small records below; this module only knows HOW to write them down, twice:

* :func:`to_svg` writes an SVG document by hand: one ``<path>`` or ``<text>`` per record, text kept
  as text (searchable, sharp at any zoom, a ``<title>`` per node for hovering);
* :func:`to_png` draws the same records with matplotlib's Agg rasteriser (no browser, no display),
  one data unit = one pixel.

Why matplotlib for the PNG? It is already a dependency (the loss chart, gradcheck's plots), its Agg
backend needs no display and no browser, it anti-aliases lines and text, and it ships the DejaVu
fonts, which hold every glyph a label uses (∂, ∇, →, Cyrillic). Rasterising our own SVG would need
a second renderer (cairosvg needs the cairo C library, resvg a Rust wheel); a headless browser costs
seconds. Everything is a polygon (curves are flattened to points by :mod:`.picture`), so both
painters draw exactly the same outlines.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass, field
from typing import Sequence

from ..usertext import NO_MATH, plain_text

__all__ = ["Shape", "Text", "Node", "Item", "MONO", "to_svg", "to_png", "png_base64"]

Point = tuple[float, float]

#: The font of every label, as the browser is asked for it (SVG) and as matplotlib finds it (PNG).
MONO = "DejaVu Sans Mono, Menlo, Consolas, 'Liberation Mono', monospace"
_MPL_FONTS = ["DejaVu Sans Mono", "DejaVu Sans"]


@dataclass
class Shape:
    """A closed outline (``closed``) or an open line through ``points``.

    ``double``: drawn as two outlines (a thick dark one with a thin line of the fill colour inside),
    cytoscape's "double" border.
    """

    points: list[Point]
    fill: str | None = None
    stroke: str | None = None
    width: float = 1.0
    dash: tuple[float, ...] | None = None
    opacity: float = 1.0
    closed: bool = True
    double: bool = False


@dataclass
class Text:
    """Lines of text centred (``anchor="middle"``) or starting (``"start"``) at x, the block centred on y."""

    x: float
    y: float
    lines: list[str]
    size: float
    colour: str = "#111111"
    anchor: str = "middle"
    bold: bool = False
    italic: bool = False
    opacity: float = 1.0
    line_height: float = 1.25


@dataclass
class Node:
    """The records of one node, with a hover text (SVG ``<title>``) and an id (``data-id``)."""

    id: str
    title: str
    items: list["Item"] = field(default_factory=list)


Item = Shape | Text | Node


def _d(points: Sequence[Point], closed: bool) -> str:
    head, *rest = points
    path = f"M{head[0]:.1f} {head[1]:.1f}" + "".join(f"L{x:.1f} {y:.1f}" for x, y in rest)
    return path + ("Z" if closed else "")


def _svg_shape(s: Shape) -> str:
    dash = f' stroke-dasharray="{" ".join(f"{v:g}" for v in s.dash)}"' if s.dash else ""
    op = f' opacity="{s.opacity:g}"' if s.opacity < 1 else ""
    d = _d(s.points, s.closed)
    fill = s.fill if s.fill and s.closed else "none"
    if not s.stroke:
        return f'<path d="{d}" fill="{fill}"{op}/>'
    out = f'<path d="{d}" fill="{fill}" stroke="{s.stroke}" stroke-width="{s.width:g}"{dash}{op}/>'
    if s.double:
        out += f'<path d="{d}" fill="none" stroke="{s.fill or "#ffffff"}" stroke-width="{s.width / 3:g}"{op}/>'
    return out


def _svg_text(t: Text) -> str:
    n = len(t.lines)
    first = t.y - (n - 1) * t.line_height * t.size / 2
    style = (' font-weight="bold"' if t.bold else "") + (' font-style="italic"' if t.italic else "")
    style += f' opacity="{t.opacity:g}"' if t.opacity < 1 else ""
    spans = "".join(f'<tspan x="{t.x:.1f}" y="{first + k * t.line_height * t.size:.1f}">{plain_text(line)}</tspan>'
                    for k, line in enumerate(t.lines))
    return (f'<text font-size="{t.size:g}" fill="{t.colour}" text-anchor="{t.anchor}" '
            f'dominant-baseline="central"{style}>{spans}</text>')


def _svg_item(item: Item) -> str:
    if isinstance(item, Shape):
        return _svg_shape(item)
    if isinstance(item, Text):
        return _svg_text(item)
    inner = "".join(_svg_item(i) for i in item.items)
    return f'<g class="asg-node" data-id="{plain_text(item.id)}"><title>{plain_text(item.title)}</title>{inner}</g>'


def to_svg(items: list[Item], width: float, height: float, label: str = "") -> str:
    """An SVG document of ``items`` on a white ``width`` x ``height`` page (CSS px).

    It carries the no-maths class (:data:`~asgteach.usertext.NO_MATH`): inline in an HTML export,
    MathJax must not typeset a ``$`` of a user's name. ``label`` becomes its accessible name.
    """
    aria = f' role="img" aria-label="{plain_text(label)}"' if label else ""
    body = "".join(_svg_item(i) for i in items)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="asg-picture {NO_MATH}" width="{width:.0f}" '
            f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" font-family="{MONO}"{aria}>'
            f'<rect width="100%" height="100%" fill="#ffffff"/>{body}</svg>')


def _flat(items: list[Item]) -> list[Shape | Text]:
    out: list[Shape | Text] = []
    for i in items:
        out.extend(_flat(i.items) if isinstance(i, Node) else [i])
    return out


def to_png(items: list[Item], width: float, height: float, scale: float = 1.0) -> bytes:
    """PNG bytes of ``items``: ``scale`` pixels per CSS px (1: screen resolution)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Polygon

    dpi = 100.0 * scale
    pt = 72.0 / 100.0   # one CSS px in points at 100 dpi: sizes below are in px, matplotlib's in points
    fig = Figure(figsize=(width / 100.0, height / 100.0), dpi=dpi, facecolor="#ffffff")
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)   # y down, as in SVG and cytoscape
    ax.set_axis_off()
    z = 0
    for it in _flat(items):
        z += 1
        if isinstance(it, Shape):
            lw = it.width * pt
            # matplotlib scales a dash pattern (in points) by the line width; SVG's is in px
            dash = (0, tuple(v * pt / lw for v in it.dash)) if it.dash else "solid"
            ax.add_patch(Polygon(it.points, closed=it.closed, fill=bool(it.fill and it.closed),
                                 facecolor=it.fill if it.fill and it.closed else "none",
                                 edgecolor=it.stroke or "none", linewidth=lw if it.stroke else 0,
                                 linestyle=dash, alpha=it.opacity if it.opacity < 1 else None, zorder=z,
                                 joinstyle="round", capstyle="butt"))
            if it.double and it.stroke:
                ax.add_patch(Polygon(it.points, closed=True, fill=False, edgecolor=it.fill or "#ffffff",
                                     linewidth=lw / 3, alpha=it.opacity if it.opacity < 1 else None, zorder=z))
        else:
            ha = "center" if it.anchor == "middle" else "left"
            ax.text(it.x, it.y, "\n".join(it.lines), fontsize=it.size * pt, color=it.colour, ha=ha,
                    va="center", multialignment=ha, linespacing=it.line_height, family=_MPL_FONTS,
                    fontweight="bold" if it.bold else "normal", fontstyle="italic" if it.italic else "normal",
                    alpha=it.opacity if it.opacity < 1 else None, zorder=z)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, facecolor="#ffffff", metadata={"Software": None})
    return buf.getvalue()


def png_base64(png: bytes) -> str:
    """PNG bytes as the base64 text a notebook's ``image/png`` output holds."""
    return base64.b64encode(png).decode("ascii")
