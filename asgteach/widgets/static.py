"""The graph's picture as an HTML fragment, for pages that are not notebooks.

``asgteach demo`` writes a page, and a script may save one: there the picture of
:mod:`.picture` (the widget's own drawing: mirrored layout, palette, legend) goes into a
``<div>`` as inline SVG. No JavaScript, nothing loaded from anywhere.

A notebook output never carries this HTML: an untrusted notebook shows sanitized HTML before a
PNG, and the sanitizer strips inline SVG down to a garbled run of its text. Notebook outputs
carry :func:`.picture.picture_mimebundle` (PNG and SVG) instead.
"""

from __future__ import annotations

from typing import Any

from ..usertext import NO_MATH
from .picture import picture_svg

__all__ = ["static_html"]


def static_html(target: Any, lang: str = "en", mode: str | None = None, expanded: set[str] | None | str = "auto",
                max_width: int = 1100, details: bool | None = True) -> str:
    """Self-contained HTML (the picture as inline SVG) of a Tensor, a list of Tensors, a Graph or a Scope.

    ``expanded``: the layers drawn open (None: all; "auto": as a new view starts). ``details``: draw
    glue nodes (True, the default here: a page is read at leisure), fold them into edge labels (False),
    or None for the widget's default. The picture shrinks to ``max_width`` px in a narrow page.
    """
    svg = picture_svg(target, lang=lang, mode=mode, expanded=expanded, details=details)
    svg = svg.replace("<svg ", '<svg style="max-width:100%;height:auto" ', 1)
    style = f"overflow:auto;max-width:{max_width}px"
    return f'<div class="asg-static asg-static-graph {NO_MATH}" style="{style}">{svg}</div>'
