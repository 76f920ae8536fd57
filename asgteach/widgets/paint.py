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
from typing import Any, Sequence

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
    """Records drawn as one group: a node (hover text: SVG ``<title>``; ``data-id``), or the legend (``cls``)."""

    id: str
    title: str
    items: list["Item"] = field(default_factory=list)
    cls: str = "asg-node"


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
    """One ``<text>`` per line (no ``<tspan>``: the fewer SVG tags, the less a sanitizer or checker must know)."""
    first = t.y - (len(t.lines) - 1) * t.line_height * t.size / 2
    style = (' font-weight="bold"' if t.bold else "") + (' font-style="italic"' if t.italic else "")
    style += f' opacity="{t.opacity:g}"' if t.opacity < 1 else ""
    return "".join(f'<text x="{t.x:.1f}" y="{first + k * t.line_height * t.size:.1f}" font-size="{t.size:g}" '
                   f'fill="{t.colour}" text-anchor="{t.anchor}" dominant-baseline="central"{style}>'
                   f'{plain_text(line)}</text>' for k, line in enumerate(t.lines))


def _svg_item(item: Item) -> str:
    if isinstance(item, Shape):
        return _svg_shape(item)
    if isinstance(item, Text):
        return _svg_text(item)
    inner = "".join(_svg_item(i) for i in item.items)
    title = f"<title>{plain_text(item.title)}</title>" if item.title else ""
    return f'<g class="{item.cls}" data-id="{plain_text(item.id)}">{title}{inner}</g>'


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
    """PNG bytes of ``items``: ``scale`` pixels per CSS px (1: screen resolution).

    Straight onto matplotlib's Agg renderer (no Figure, no artists: they would lay out and
    re-measure every text for nothing), then encoded by Pillow (matplotlib's own dependency).
    """
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.colors import to_rgba
    from matplotlib.path import Path as MplPath
    from matplotlib.transforms import Affine2D
    from PIL import Image

    w_px, h_px = max(1, round(width * scale)), max(1, round(height * scale))
    dpi = 100.0 * scale
    pt = 0.72   # one CSS px in points at 100 dpi (Agg turns points into pixels with dpi)
    r = RendererAgg(w_px, h_px, dpi)
    flip = Affine2D().scale(scale, -scale).translate(0, h_px)   # our y runs down; Agg's paths' up

    def path(points: list[Point], closed: bool) -> MplPath:
        verts = [*points, points[0]] if closed else list(points)
        codes = [MplPath.MOVETO] + [MplPath.LINETO] * (len(verts) - 1)
        if closed:
            codes[-1] = MplPath.CLOSEPOLY
        return MplPath(verts, codes)

    def stroke_fill(shape: Shape, stroke: str | None, width_px: float, fill: str | None) -> None:
        gc = r.new_gc()
        gc.set_antialiased(True)
        gc.set_joinstyle("round")
        gc.set_capstyle("butt")
        if shape.opacity < 1:
            gc.set_alpha(shape.opacity)
        if stroke and width_px > 0:
            gc.set_foreground(stroke)
            gc.set_linewidth(width_px * pt)
            if shape.dash:
                gc.set_dashes(0, [v * pt for v in shape.dash])
        else:
            gc.set_linewidth(0)
        r.draw_path(gc, path(shape.points, shape.closed), flip, to_rgba(fill) if fill else None)
        gc.restore()

    metrics: dict[tuple, tuple[float, float, float]] = {}

    def measure(text: str, prop: Any) -> tuple[float, float, float]:
        key = (text, prop.get_size(), prop.get_weight(), prop.get_style())
        if key not in metrics:
            metrics[key] = r.get_text_width_height_descent(text, prop, ismath=False)
        return metrics[key]

    stroke_fill(Shape([(0, 0), (width, 0), (width, height), (0, height)]), None, 0, "#ffffff")
    fonts: dict[tuple, Any] = {}
    for it in _flat(items):
        if isinstance(it, Shape):
            fill = it.fill if it.fill and it.closed else None
            stroke_fill(it, it.stroke, it.width, fill)
            if it.double and it.stroke:
                stroke_fill(it, it.fill or "#ffffff", it.width / 3, None)
            continue
        key = (it.size, it.bold, it.italic)
        if key not in fonts:
            from matplotlib.font_manager import FontProperties

            fonts[key] = FontProperties(family=_MPL_FONTS, size=it.size * pt, weight="bold" if it.bold else "normal",
                                        style="italic" if it.italic else "normal")
        prop = fonts[key]
        _, h, d = measure("Hg", prop)   # one height for every line: lines of a node sit level, as in SVG
        gc = r.new_gc()
        gc.set_foreground(it.colour)
        gc.set_antialiased(True)
        if it.opacity < 1:
            gc.set_alpha(it.opacity)
        first = it.y - (len(it.lines) - 1) * it.line_height * it.size / 2
        for k, line in enumerate(it.lines):
            if not line:
                continue
            w = measure(line, prop)[0]
            x = it.x * scale - (w / 2 if it.anchor == "middle" else 0.0)
            baseline = (first + k * it.line_height * it.size) * scale + h / 2 - d   # centred on its line
            r.draw_text(gc, x, baseline, line, prop, 0)
        gc.restore()
    rgb = Image.frombuffer("RGBA", (w_px, h_px), r.buffer_rgba(), "raw", "RGBA", 0, 1).convert("RGB")
    # 256 colours are plenty for flat fills, lines and anti-aliased text, and a notebook file carries every
    # picture: a palette PNG is about a third of the bytes (the MLP picture: 127 -> 43 KB), white stays white,
    # and no pixel moves more than ~10/255 (max-coverage keeps the colours that cover the most pixels exact)
    buf = io.BytesIO()
    rgb.quantize(colors=256, method=Image.Quantize.MAXCOVERAGE).save(buf, "PNG")
    return buf.getvalue()


def png_base64(png: bytes) -> str:
    """PNG bytes as the base64 text a notebook's ``image/png`` output holds."""
    return base64.b64encode(png).decode("ascii")
