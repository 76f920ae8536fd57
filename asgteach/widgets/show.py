"""``at.show``: draw a graph in a notebook — clickable where widgets run, and always as a picture.

Loading this module (``import asgteach`` does) also makes a Graph or Tensor that ends a notebook
cell draw itself: it hands :func:`notebook_bundle` down as ``asgteach.hooks.display``.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Mapping

from .. import frontend, hooks

__all__ = ["show", "widgets_available", "notebook_bundle", "view_bundle"]


def widgets_available() -> bool:
    """Can an interactive view be built here (anywidget and ipywidgets importable)?"""
    return _widgets_missing() is None


def _widgets_missing() -> str | None:
    """Why no interactive view can be built (the failed import), or None when it can."""
    try:
        import anywidget  # noqa: F401
        import ipywidgets  # noqa: F401
    except ImportError as e:
        return str(e)
    return None


def _in_kernel() -> bool:
    """True inside a Jupyter kernel (where a widget can be drawn), False in a terminal or script."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _in_marimo() -> bool:
    """True inside a running marimo notebook (it draws anywidgets, and knows no IPython display)."""
    mo = sys.modules.get("marimo")   # a marimo notebook has imported it; never import it here
    try:
        return bool(mo is not None and mo.running_in_notebook())
    except Exception:  # noqa: BLE001 - an older or half-loaded marimo: not a notebook we can draw in
        return False


def _picture_only() -> bool:
    """No browser will ever draw a widget here (``nbconvert --execute``...): keep each graph as its picture.

    ``ASGTEACH_VIEW=picture`` or ``=widget`` decides instead (a widget in an HTML export needs its
    state and a widget manager from a CDN; the picture shows offline).
    """
    choice = os.environ.get("ASGTEACH_VIEW", "").strip().lower()
    if choice in ("picture", "widget"):
        return choice == "picture"
    return _in_kernel() and frontend.headless_runner() is not None


def _why_picture() -> str | None:
    """One paragraph: why ``at.show`` gives a picture, not the clickable graph, and the fix (None if it need not)."""
    missing = _widgets_missing()
    if missing is not None:
        return (f"at.show: drawing a picture instead of the clickable graph, because the widget packages cannot be "
                f"imported ({missing}). Fix: `pip install 'anywidget>=0.9,<1' 'ipywidgets>=8.1,<9'` in the "
                f"environment of this kernel, restart the kernel, and run the cell again (`asgteach doctor` checks "
                f"the whole set-up).")
    if not (_in_kernel() or _in_marimo()):
        return ("at.show: this is not a notebook (a plain `python` or a terminal), so the clickable graph cannot be "
                "drawn here; at.show returns a GraphPicture instead. Keep it with `at.show(y).save('graph.svg')` "
                "(or .png, .html), or run this code in a notebook (`asgteach lab` opens JupyterLab).")
    return None


def view_bundle(view: Any, include: Any = None, exclude: Any = None) -> dict[str, Any]:
    """A GraphView's display data as ONE bundle: the widget view and the picture (PNG + SVG), no HTML.

    For a front-end that asks an object for one bundle. In IPython a view is displayed as two
    outputs instead (``GraphView.display_outputs``: the picture, then the widget), so that a
    notebook reopened after its kernel died still shows the picture. ``text/html`` is left out on
    purpose: JupyterLab shows the first *safe* type of an untrusted output, and sanitized HTML
    comes before ``image/png``.
    """
    bundle = view._repr_mimebundle_(include=include, exclude=exclude)
    data = dict(bundle[0] if isinstance(bundle, tuple) else bundle)
    data.pop("text/html", None)
    if "image/png" not in data or "image/svg+xml" not in data:
        from .picture import picture_mimebundle

        data.update(picture_mimebundle(view))
    return data


def show(
    x: Any,
    values: Mapping[Any, Any] | None = None,
    lang: str = "en",
    *,
    feeds: Mapping[Any, Any] | None = None,
    trainer: Any = None,
    mode: str | None = None,
    collapse: bool | None = None,
    static: bool = False,
    display: bool = True,
    present: bool = False,
    details: bool | None = None,
) -> Any:
    """Show ``x`` (a Tensor, a list of Tensors or a Graph) as a clickable graph.

    Args:
        x: what to draw. A Tensor shows what it depends on, plus the gradient nodes that
            ``at.grad`` appended for it.
        values: arrays to show in the inspector, ``{Tensor | node id | name: array}``.
        lang: "en" or "ru" (switchable in the toolbar).
        feeds: ``{x: X, ...}``: run the graph (numpy) and attach every drawn node's value
            and gradient, e.g. ``at.show(loss, feeds={x: X, w: W})``.
        trainer: a Trainer: use its current parameters (``feeds`` then holds the batch).
        mode: "forward", "backward" or "both" (default: both when gradients exist).
        collapse: start with every layer collapsed (default: when > 150 nodes are drawn).
        static: draw the picture only (PNG + SVG), not the clickable graph (also what happens
            outside a notebook, without the widget packages, and in a kernel that no browser
            watches: ``jupyter nbconvert --execute``, ``jupyter execute``, papermill; the
            environment variable ``ASGTEACH_VIEW=picture|widget`` decides instead).
        display: display the view now (in IPython) as well as returning it.
        present: presentation mode, for a projector: 1.6x fonts, thicker edges, high
            contrast, a large legend (also a toolbar toggle).
        details: draw every node (True), or fold glue (reshape, transpose, scalar constants,
            the seed ...) into edge labels (False). Default: folded up to 150 drawn nodes.

    Returns:
        In a Jupyter notebook with ``display=True``: None (the view is displayed: the clickable
        graph, with its picture beside it for where no widget runs). With ``display=False``, and
        in marimo: the :class:`~asgteach.widgets.view.GraphView`. When static, in a script or
        without the widget packages: a :class:`~asgteach.widgets.picture.GraphPicture`
        (``.save("graph.svg")``); in a Jupyter kernel it is displayed and None returned.
    """
    static = static or _picture_only()
    why = None if static or not display else _why_picture()
    if why is not None:  # said once per call, on stderr, so a script's own output stays clean
        print(why, file=sys.stderr)
    if static or why is not None or not widgets_available():
        from .picture import GraphPicture

        expanded: Any = "auto" if collapse is None else (set() if collapse else None)
        picture = GraphPicture(x, lang=lang, mode=mode, expanded=expanded, details=details, present=present)
        if display and _in_kernel():   # shown now, like the view (a loop's every graph shows); not twice
            from IPython.display import display as _display

            _display(picture)
            return None
        return picture
    from .view import GraphView

    view = GraphView(x, values=values, feeds=feeds, trainer=trainer, lang=lang, mode=mode, collapse=collapse,
                     present=present, details=details)
    if display and _in_kernel():
        view._ipython_display_()   # two outputs: the picture, then the live view (which hides it)
        return None
    return view


def notebook_bundle(x: Any, include: Any = None, exclude: Any = None) -> dict[str, Any]:
    """The display data of a Graph or Tensor that ends a notebook cell.

    In a kernel with the widget packages: the GraphView, as its two outputs
    (``GraphView.display_outputs``): the picture is displayed first, here, and the widget view is
    what this returns, so a notebook reopened after its kernel died still shows the picture.
    Elsewhere, and where no browser is attached (``nbconvert --execute``): the picture (PNG + SVG)
    and the plain repr. Never a claim about what is installed: the picture says "run this cell
    to click the nodes".
    """
    plain = repr(x)
    if _in_kernel() and widgets_available() and not _picture_only():
        from IPython.display import display as _display

        from .view import GraphView

        picture, data = GraphView(x).display_outputs()
        _display(picture, raw=True)
    else:
        from .picture import picture_mimebundle

        data = dict(picture_mimebundle(x))
    data["text/plain"] = plain
    return data


# A Graph or Tensor ending a notebook cell draws itself with notebook_bundle. graph.py sits at the
# bottom of the stack and cannot import the widgets, so the drawing is handed down to it here.
hooks.display = notebook_bundle
