"""Notebook views: the graph widget with its Node Inspector, its picture, and plots.

* ``show.py``     — ``at.show``: the interactive view with its picture beside it, or the picture alone
* ``view.py``     — GraphView: the state and events of the graph, toolbar and inspector (one anywidget, canvas.py)
* ``elements.py`` — Graph -> drawable elements (scope, labels, layer groups, collapse)
* ``steps.py``    — the recorded backward sweep, one visit at a time
* ``inspector.py``— the HTML that explains one node; ``values.py`` — numbers and heatmaps
* ``styles.py``   — colours per category, the cytoscape stylesheet, the legend
* ``canvas.py``   — GraphCanvas: the one anywidget (elements as one message; the browser code in bundle/)
* ``picture.py``  — the same drawing as a PNG + SVG picture (``paint.py`` draws it; ``static.py`` puts it in a page)

(The matplotlib figures, gradcheck's and the live loss chart, are :mod:`asgteach.plots`: a leaf
module that gradcheck and the Trainer use; ``gradcheck_figure`` and ``LossChart`` are still
reachable from here.)

Nothing here imports anywidget or ipywidgets until a view is actually built.
"""

from __future__ import annotations

from typing import Any

__all__ = ["show", "GraphView", "static_html", "gradcheck_figure", "LossChart"]


def __getattr__(name: str) -> Any:  # lazy: `import asgteach` must not pull in the widget stack
    if name == "show":
        from .show import show

        return show
    if name == "GraphView":
        from .view import GraphView

        return GraphView
    if name == "static_html":
        from .static import static_html

        return static_html
    if name in ("gradcheck_figure", "LossChart"):
        from .. import plots

        return getattr(plots, name)
    raise AttributeError(f"module 'asgteach.widgets' has no attribute {name!r}")
