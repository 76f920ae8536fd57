"""``at.show``: draw a graph in a notebook — interactive when widgets work, static otherwise.

Loading this module (``import asgteach`` does) also makes a Graph or Tensor that ends a notebook
cell draw itself: it hands :func:`notebook_bundle` down as ``asgteach.hooks.display``.
"""

from __future__ import annotations

import sys
from typing import Any, Mapping

from .. import hooks

__all__ = ["show", "widgets_available", "notebook_bundle"]


def widgets_available() -> bool:
    """Can an interactive view be built here (ipywidgets and ipycytoscape importable)?"""
    return _widgets_missing() is None


def _widgets_missing() -> str | None:
    """Why no interactive view can be built (the failed import), or None when it can."""
    try:
        import ipycytoscape  # noqa: F401
        import ipywidgets  # noqa: F401
    except ImportError as e:
        return str(e)
    return None


def _why_static() -> str | None:
    """One paragraph saying why ``at.show`` falls back to a static picture, with the fix; None if it need not."""
    missing = _widgets_missing()
    if missing is not None:
        return (f"at.show: drawing a static picture instead of the clickable graph, because the widget packages "
                f"cannot be imported ({missing}). Fix: `pip install ipywidgets 'ipycytoscape==1.3.3'` in the "
                f"environment of this kernel, restart the kernel, and run the cell again (`asgteach doctor` "
                f"checks the whole set-up).")
    if not _in_kernel():
        return ("at.show: this is not a Jupyter kernel (a plain `python` or a terminal), and the clickable graph "
                "is a Jupyter widget that only a notebook page can draw, so a static HTML picture is returned "
                "instead. Fix: run this code in a notebook (`asgteach lab` opens JupyterLab), or keep the picture: "
                "`open('graph.html', 'w').write(at.show(y).data)` and open graph.html in a browser.")
    return None


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
        static: draw HTML/SVG instead of a widget (also used when widgets are missing).
        display: display the view now (in IPython) as well as returning it.
        present: presentation mode, for a projector: 1.6x fonts, thicker edges, high
            contrast, a large legend (also a toolbar toggle).
        details: draw every node (True), or fold glue (reshape, transpose, scalar constants,
            the seed ...) into edge labels (False). Default: folded up to 150 drawn nodes.

    Returns:
        The :class:`~asgteach.widgets.view.GraphView` (``.widget`` is the ipywidgets box),
        or, when static, an ``IPython.display.HTML`` object.
    """
    why = None if static or not display else _why_static()
    if why is not None:  # said once per call, on stderr, so a script's own output stays clean
        print(why, file=sys.stderr)
    if static or why is not None or not widgets_available():
        from .static import static_html

        expanded: Any = "auto" if collapse is None else (set() if collapse else None)
        page = static_html(x, lang=lang, mode=mode, expanded=expanded)
        try:
            from IPython.display import HTML
        except ImportError:
            return page
        return HTML(page)
    from .view import GraphView

    view = GraphView(x, values=values, feeds=feeds, trainer=trainer, lang=lang, mode=mode, collapse=collapse,
                     present=present, details=details)
    if display:
        try:
            from IPython import get_ipython
            from IPython.display import display as _display
        except ImportError:
            return view
        if get_ipython() is not None:
            _display(view)
            return None
    return view


def _in_kernel() -> bool:
    """True inside a Jupyter kernel (where a widget can be drawn), False in a terminal or script."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def notebook_bundle(x: Any, include: Any = None, exclude: Any = None) -> dict[str, Any]:
    """The display data of a Graph or Tensor that ends a notebook cell.

    In a kernel with widgets: the GraphView (its widget view plus the static HTML, which
    nbconvert and GitHub show instead). Elsewhere: the static HTML and the plain repr.
    """
    plain = repr(x)
    if _in_kernel() and widgets_available():
        from .view import GraphView

        data = GraphView(x)._repr_mimebundle_(include=include, exclude=exclude)
        data["text/plain"] = plain
        return data
    from .static import static_html

    return {"text/plain": plain, "text/html": static_html(x)}


# A Graph or Tensor ending a notebook cell draws itself with notebook_bundle. graph.py sits at the
# bottom of the stack and cannot import the widgets, so the drawing is handed down to it here.
hooks.display = notebook_bundle
