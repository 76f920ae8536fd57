"""A graph's session: the Tensors alive now, the names that move on, notebook cells and memory.

A :class:`~asgteach.graph.Graph` is only a graph: nodes, in order, and the names of its inputs and
parameters. How people *use* it lives here, one :class:`Session` per graph (``graph.session``).
Students re-run notebook cells again, out of order, after editing them, and the default graph
lives as long as the kernel, so its session follows a notebook's rules (docs/DESIGN.md, "Names,
notebook cells and memory"): **re-running any cell any number of times gives what running it once
gave, and memory stays bounded.**

* **A name means the newest node of that name** (``graph.find``). In an explicit ``with at.Graph()``
  block a second parameter of an existing name is an error naming both lines. The default graph's
  session *rebinds* instead: the name now means the new parameter, with one
  :class:`NameReboundWarning` per re-built layer and source line.
* **A cell owns the names it bound.** ``cells.py`` tells the session when a notebook cell starts and
  ends (:meth:`Session.begin_cell`); a cell that starts again first unbinds what its previous run
  bound, so it re-creates ``mlp.0.weight`` silently and unnamed layers get the same automatic names.
* **What no live Tensor reaches is released.** Every Tensor registers itself, weakly, with its
  graph's session (:meth:`Session.track`). :meth:`Session.collect` (``graph.collect()``) walks back
  from the Tensors still alive and releases the rest: constants' arrays are dropped, names unbound,
  ids recorded in ``graph.released``. Nodes stay, so ids never change. The default graph's session
  collects by itself when its constants grew by ``COLLECT_BYTES`` (and ``cells.py`` after each cell).

The session also decides which graph ops append to (:func:`default_graph`): the innermost
``with at.Graph()`` block of this thread, else the default graph, which it owns (:func:`reset_default_graph`
starts a fresh one: ``at.reset()``).

This module is part of the graph unit. graph.py imports it (every Graph holds a Session), so it
imports graph.py back only inside the one function that makes a default graph.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from . import hooks
from .source import source_line_text

if TYPE_CHECKING:
    from .graph import Graph, Node
    from .tensor import Tensor

__all__ = ["Session", "NameReboundWarning", "default_graph", "global_default_graph", "reset_default_graph",
           "graph_stack"]


class NameReboundWarning(UserWarning):
    """A parameter name of the default graph now means a newer parameter (see :class:`Session`)."""


class Session:
    """How one graph is used: its live Tensors (weakly), which cell bound which name, and memory.

    ``rebind``: a second parameter of an existing name replaces the old one (with a notice) instead
    of being an error. ``auto_collect``: :meth:`collect` runs by itself when constants grew. The
    default graph's session has both (it is a notebook's); an explicit graph's has neither, and
    collects only when asked (it dies whole with its last Tensor).
    """

    #: an auto-collecting session sweeps when its constants grew by this much since the last sweep
    #: (or by as much as survived that sweep, if more): memory stays within ~2x of what is live
    COLLECT_BYTES = 64 * 2**20

    def __init__(self, *, rebind: bool = False, auto_collect: bool = False) -> None:
        self.rebind = rebind
        self.auto_collect = auto_collect
        #: the Tensors alive right now (weakly held): what they reach is what must be kept
        self.tensors: weakref.WeakSet[Tensor] = weakref.WeakSet()
        #: the notebook cell running now (set through ``begin_cell``), and the (name, id) each cell bound
        self.cell: Any = None
        self.bound_by_cell: dict[Any, list[tuple[str, int]]] = {}
        self.noticed: set[tuple[str, str]] = set()   # (name prefix, source line) already told about
        self.const_bytes_new = 0         # constant bytes added since the last sweep
        self.const_bytes_kept = 0        # constant bytes that survived the last sweep

    # -- what Graph.add_node asks ---------------------------------------------------
    def before_add(self, graph: Graph, op: str, name: str | None, inputs: Sequence[int],
                   value: np.ndarray | None, source: str) -> None:
        """A node is about to be added: sweep if constants grew too much; apply the parameter-name rule."""
        if (value is not None and self.auto_collect
                and self.const_bytes_new + value.nbytes > max(self.COLLECT_BYTES, self.const_bytes_kept)):
            self.collect(graph, keep=inputs)  # before appending: the new node has no Tensor yet
        if op == "parameter" and name:
            self._check_parameter_name(graph, name, source)

    def added(self, node: Node, value: np.ndarray | None) -> None:
        """A node was added: the running cell owns its name; a constant's bytes count towards the next sweep."""
        if self.cell is not None and node.op in ("input", "parameter"):
            self.bound_by_cell.setdefault(self.cell, []).append((node.name, node.id))
        if value is not None:
            self.const_bytes_new += value.nbytes

    def _check_parameter_name(self, graph: Graph, name: str, source: str) -> None:
        """The naming rule for parameters (see the module docstring)."""
        old = graph.bound(name)
        if old is None or old.op != "parameter":
            return
        if not self.rebind:
            raise ValueError(
                f"a parameter named {name!r} already exists in this graph:\n"
                f"  first  #{old.id} made at {_at(old.source)}\n"
                f"  second made at {_at(source)}\n"
                f"  two parameters of one name cannot be saved, loaded or fed apart: give one of them "
                f"another name (a layer's name=)"
            )
        # one notice per re-built layer and line, not one per parameter of it
        prefix = name.split(".")[0]
        if (prefix, source) in self.noticed:
            return
        self.noticed.add((prefix, source))
        if "." in name:
            text = (f"asgteach: the parameters of {prefix!r} now mean the new ones made here; the old ones "
                    f"(made at {old.source}) stay with the tensors built from them")
        else:
            text = (f"asgteach: parameter {name!r} now means the new one made here; the old one "
                    f"(made at {old.source}) stays with the tensors built from it")
        path, _, line = source.rpartition(":")
        warnings.warn_explicit(text, NameReboundWarning, path or source, int(line) if line.isdigit() else 0)

    # -- notebook cells ---------------------------------------------------------------
    def begin_cell(self, graph: Graph, key: Any) -> None:
        """A notebook cell ``key`` starts running: the names its previous run bound are unbound.

        So re-running a cell re-creates ``mlp.0.weight`` as if for the first time (no notice,
        the same automatic layer names), while names bound by other cells stay. Tensors made
        by the previous run keep working: only the *names* move on.
        """
        graph.unbind({node_id for _, node_id in self.bound_by_cell.pop(key, [])})
        self.cell = key

    def end_cell(self) -> None:
        """The running cell finished: nodes made from now on belong to no cell."""
        self.cell = None

    # -- memory -------------------------------------------------------------------------
    def track(self, tensor: Tensor) -> None:
        """Called by every new Tensor: live Tensors are the roots that :meth:`collect` keeps."""
        self.tensors.add(tensor)

    def live_ids(self, graph: Graph) -> set[int]:
        """Ids of the nodes some live Tensor depends on (itself included)."""
        return set(graph.ancestors([t.node_id for t in list(self.tensors)]))

    def collect(self, graph: Graph, keep: Sequence[int] = ()) -> int:
        """Release what no live Tensor can reach; return how many nodes were newly released.

        A node nobody can name any more (no Tensor of it or of anything built from it is
        alive) can never be run again, so its constant's array is dropped and its name
        unbound. The node itself stays, so ids (and the graph's drawing) do not change.
        Backends see ``graph.collections`` change and drop their plans for released nodes.
        ``keep``: more ids to treat as live (the inputs of a node being added).
        """
        live = self.live_ids(graph) | set(graph.ancestors(list(keep)))
        newly = [i for i in range(len(graph.nodes)) if i not in live and i not in graph.released]
        graph.released.update(newly)
        for i in newly:
            graph.constants.pop(i, None)
        graph.unbind(graph.released)
        self.const_bytes_kept = sum(v.nbytes for v in graph.constants.values())
        self.const_bytes_new = 0
        graph.collections += 1
        return len(newly)


def _at(source: str) -> str:
    """``file:line`` and, when it can be read, the text of that line."""
    text = source_line_text(source)
    return f"{source}  ({text})" if text else source


# -- which graph ops use: the ``with`` blocks of this thread, else the default graph --------------
_local = threading.local()
_DEFAULT: Graph | None = None   # made when first asked (see reset_default_graph)


def graph_stack() -> list[Graph]:
    """The graphs of the ``with at.Graph()`` blocks open in this thread, innermost last."""
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


def default_graph() -> Graph:
    """The graph that ops use right now: the innermost ``with Graph()``, else the default."""
    stack = graph_stack()
    if stack:
        return stack[-1]
    if hooks.on_default_use is not None:  # (cells.py: notice a notebook shell and hook its cells)
        hooks.on_default_use()
    return _DEFAULT if _DEFAULT is not None else reset_default_graph()


def global_default_graph() -> Graph:
    """The default graph itself, even inside a ``with Graph()`` block: the graph whose names the
    notebook cells own (:mod:`asgteach.cells`). Unlike :func:`default_graph` it notices no shell."""
    return _DEFAULT if _DEFAULT is not None else reset_default_graph()


def reset_default_graph() -> Graph:
    """Start a fresh, empty default graph (``at.reset()``) and return it.

    Tensors made before keep their old graph and still run; they cannot be mixed with
    new ones (the error says so: the old graph is marked ``retired``).
    """
    from .graph import Graph   # (graph.py imports this module: a Graph holds a Session)

    global _DEFAULT
    if _DEFAULT is not None:
        _DEFAULT.retired = True
    _DEFAULT = Graph("default", rebind=True, auto_collect=True)
    return _DEFAULT
