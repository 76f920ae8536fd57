"""Hooks: what a low layer is handed by a higher one, all on one screen.

Imports in asgteach only point *down* the layers (docs/DESIGN.md, "Layout"; tests/test_imports.py
checks every one). That keeps the bottom readable on its own: graph.py is a graph and nothing else,
and a student can read it without knowing that widgets, IPython or a GPU exist. But a few things at
the bottom need a piece of something above them:

* a graph loaded from a file must check its op names against the op registry (``ops``, one layer up,
  built *on* graphs);
* a Graph or Tensor that ends a notebook cell should draw itself, and the drawing is the widgets' (far up);
* the default graph should notice a notebook shell the first time it is used, and hooking the shell's
  cell events is ``cells.py``'s job (it also drops compiled plans, so it sits above the backends);
* ``grad`` sums the contributions a node receives, and the bug-hunt lessons swap that sum for a wrong
  one (``autograd.accumulation``) to show what the bug looks like.

Importing the higher module from the lower one would make a cycle (the registry imports graph.py, so
graph.py cannot import the registry). So the higher module *hands its piece down*: when it loads (or
inside a ``with`` block) it sets one of the names below; the lower module reads the name each time it
needs it, and does something plain when nothing was set. That is dependency injection in its
smallest form, a slot in a module. Keeping every slot here, in a leaf that imports nothing of ours,
means the package's upward reaches are all listed in one place instead of being assigned onto other
modules from afar, and a test can swap one and put it back.

==================  ==========================  ==================================  ==========================
hook                set by                      read by                             when nothing set it
==================  ==========================  ==================================  ==========================
``registered_ops``  ``asgteach.ops.registry``   ``Graph.from_json``                 pass ``known_ops=``
``display``         ``asgteach.widgets.show``   ``graph.notebook_display``          the plain ``repr``
``on_default_use``  ``asgteach.cells``          ``graph.default_graph``             nothing (a script)
``accumulate``      ``autograd.accumulation``   ``autograd.grad``                   the sum (``accumulate``)
==================  ==========================  ==================================  ==========================
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping

if TYPE_CHECKING:
    from .graph import Graph
    from .tensor import Tensor

__all__ = ["registered_ops", "display", "on_default_use", "accumulate"]

#: The op registry (op name -> OpSpec). ``Graph.from_json`` checks a file's op names against it.
registered_ops: Mapping[str, Any] | None = None

#: How a Graph or Tensor that ends a notebook cell draws itself: ``(obj, include, exclude) -> mime bundle``.
display: Callable[[Any, Any, Any], dict[str, Any]] | None = None

#: Called whenever the default graph is handed out (to notice a notebook shell and hook its cells).
on_default_use: Callable[[], None] | None = None

#: How ``grad`` combines the contributions one node received: ``(parts, node_id, graph) -> Tensor``.
#: None means the true rule, their sum (``autograd.accumulate``).
accumulate: Callable[[list[Tensor], int, Graph], Tensor] | None = None
