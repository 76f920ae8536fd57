"""Hooks: what a low layer is handed by a higher one, all on one screen.

Imports in asgteach only point *down* the layers (docs/DESIGN.md, "Layout"; tests/test_imports.py
checks every one). That keeps the bottom readable on its own: graph.py is a graph and nothing else,
and a student can read it without knowing that widgets, IPython or a GPU exist. But a few things at
the bottom need a piece of something above them:

* a Graph or Tensor that ends a notebook cell should draw itself, and the drawing is the widgets' (far up);
* the default graph should notice a notebook shell the first time it is used, and hooking the shell's
  cell events is ``cells.py``'s job (it also drops compiled plans, so it sits above the backends).

Importing the higher module from the lower one would make a cycle (the widgets import graph.py, so
graph.py cannot import the widgets). So the higher module *hands its piece down*: when it loads it
sets one of the names below; the lower module reads the name each time it
needs it, and does something plain when nothing was set. That is dependency injection in its
smallest form, a slot in a module. Keeping every slot here, in a leaf that imports nothing of ours,
means the package's upward reaches are all listed in one place instead of being assigned onto other
modules from afar, and a test can swap one and put it back. Only these two remain: whatever else once
reached up is now passed down as an argument (``at.load_graph`` hands the op registry to
``Graph.from_json``) or kept by its own layer (``autograd.accumulation``'s rule).

==================  ==========================  ==================================  ==========================
hook                set by                      read by                             when nothing set it
==================  ==========================  ==================================  ==========================
``display``         ``asgteach.widgets.show``   ``graph.notebook_display``          the plain ``repr``
``on_default_use``  ``asgteach.cells``          ``graph.default_graph``             nothing (a script)
==================  ==========================  ==================================  ==========================
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["display", "on_default_use"]

#: How a Graph or Tensor that ends a notebook cell draws itself: ``(obj, include, exclude) -> mime bundle``.
display: Callable[[Any, Any, Any], dict[str, Any]] | None = None

#: Called whenever the default graph is handed out (to notice a notebook shell and hook its cells).
on_default_use: Callable[[], None] | None = None
