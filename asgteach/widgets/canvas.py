"""GraphCanvas: the one widget a graph view sends to the browser (an anywidget).

Everything the browser draws is a traitlet here, synced as plain JSON: the elements with
their positions (ONE message for the whole graph, not one widget per node), the cytoscape
stylesheet, the highlight classes, the inspector's HTML, the toolbar's words. The browser
side is ``bundle/graphview.js``: cytoscape.js and KaTeX bundled into one ES module that
anywidget loads from the kernel, so no CDN and no JupyterLab extension of ours is needed
(anywidget's own front-end, installed with it, runs it in JupyterLab, Notebook 7, VS Code,
Colab and marimo). Its source is ``js/src/graphview.js`` in the repository.

What the reader does comes back as one traitlet, ``event``: ``{"type": "click", "value":
"n12", "seq": 7}`` (``seq`` makes two clicks on one node two changes). The
:class:`~asgteach.widgets.view.GraphView` listens to it and holds all the state; this module
knows nothing about graphs.
"""

from __future__ import annotations

from pathlib import Path

import anywidget
import traitlets

__all__ = ["GraphCanvas", "BUNDLE"]

#: The built ES module (committed; `cd js && npm ci && npm run build` remakes it).
BUNDLE = Path(__file__).with_name("bundle") / "graphview.js"


class GraphCanvas(anywidget.AnyWidget):
    """The drawn graph, the toolbar, the inspector panel and the legend, as synced state."""

    _esm = BUNDLE

    #: cytoscape elements: ``{"group", "data", "classes", "position"}`` each; all in one message
    elements = traitlets.List().tag(sync=True)
    #: the cytoscape stylesheet (``styles.cytoscape_style``; not `style`: DOMWidget has one of its own)
    stylesheet = traitlets.List().tag(sync=True)
    #: element id -> extra classes (selection, step-through), changed without resending the graph
    highlights = traitlets.Dict().tag(sync=True)
    #: zoom limits: the floor keeps labels legible (a bigger graph pans instead)
    min_zoom = traitlets.Float(0.5).tag(sync=True)
    max_zoom = traitlets.Float(2.0).tag(sync=True)
    #: space around the drawing when fitted (px)
    padding = traitlets.Int(16).tag(sync=True)
    #: the canvas height (CSS), the graph box's flex basis (px), the inspector's max height (CSS)
    height = traitlets.Unicode("240px").tag(sync=True)
    graph_width = traitlets.Int(600).tag(sync=True)
    inspector_height = traitlets.Unicode("420px").tag(sync=True)
    #: HTML made by Python (user text already escaped by ``usertext.user_text``)
    inspector_html = traitlets.Unicode("").tag(sync=True)
    status_html = traitlets.Unicode("").tag(sync=True)
    legend_html = traitlets.Unicode("").tag(sync=True)
    wgsl_html = traitlets.Unicode("").tag(sync=True)
    #: the toolbar: words in the reader's language, which buttons are on or enabled
    toolbar = traitlets.Dict().tag(sync=True)
    #: raised by one to ask the browser to fit the graph again
    fit_seq = traitlets.Int(0).tag(sync=True)
    #: what the reader did, set by the browser
    event = traitlets.Dict().tag(sync=True)
    #: the end of the base64 text of the picture displayed just before this view (see
    #: ``GraphView.display_outputs``): the browser hides that picture while the live view stands in for it
    picture_tail = traitlets.Unicode("").tag(sync=True)
