"""Notebook cells and the default graph: re-running a cell is the same as running it once.

In a notebook, ops called outside ``with at.Graph()`` go to one default graph that lives
as long as the kernel. Students re-run cells all the time - again, out of order, after
editing them - so that graph must not remember old runs in ways that change new ones:

* **Each cell owns the names it binds.** When a cell starts, the input and parameter
  names its previous run bound are released (``Session.begin_cell``), so re-building
  ``at.nn.MLP(..., name="mlp")`` makes ``mlp.0.weight`` again as if for the first time,
  unnamed layers get the same automatic names, and ``{"x": X}`` feeds the newest ``x``.
* **What no live Tensor reaches is released** after each cell (``graph.collect()``): the
  constants of old runs and the plans compiled for them go, so memory stays bounded.

A cell is known by Jupyter's cell id when the front end sends one, else by its text (the
same text typed again in a terminal IPython is the same cell). Outside IPython nothing
here runs: a script gets the plain rules of the default graph's session (:mod:`asgteach.session`:
newest name wins, with a notice; the default graph collects when its constants grow).

This module hooks IPython's ``pre_run_cell`` / ``post_run_cell`` events the first time
the default graph is used inside a shell (it hands its look for a shell down
as ``hooks.on_default_use``); ``attach(shell)`` does it by hand.
"""

from __future__ import annotations

import hashlib
import sys
import weakref
from typing import Any

from . import hooks
from .backends import cached_plans
from .session import global_default_graph

__all__ = ["attach", "cell_key"]

_attached: "weakref.WeakSet[Any]" = weakref.WeakSet()   # the shells whose events we listen to
#: how many nodes each default graph had after the last cell (no new nodes: nothing to sweep)
_nodes_after_cell: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()


def cell_key(info: Any) -> str:
    """Which cell is running: Jupyter's cell id, else a digest of the cell's text."""
    cell_id = getattr(info, "cell_id", None)
    if cell_id:
        return f"id:{cell_id}"
    text = (getattr(info, "raw_cell", "") or "").strip()  # history keeps it stripped of end newlines
    return "text:" + hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()


def _pre_run_cell(info: Any) -> None:
    g = global_default_graph()  # the default graph itself, even inside a `with`
    g.session.begin_cell(g, cell_key(info))


def _post_run_cell(result: Any) -> None:
    g = global_default_graph()
    g.session.end_cell()
    if len(g.nodes) != _nodes_after_cell.get(g, 0):  # nothing new: nothing to sweep
        g.collect()
        _nodes_after_cell[g] = len(g.nodes)
        cached_plans(g)  # drop the plans of what was released now, not at the next compile


def attach(shell: Any) -> bool:
    """Listen to ``shell``'s cell events (once per shell); True if newly attached."""
    if shell is None or shell in _attached:
        return False
    shell.events.register("pre_run_cell", _pre_run_cell)
    shell.events.register("post_run_cell", _post_run_cell)
    _attached.add(shell)
    return True


def _current_cell(shell: Any) -> str | None:
    """The key of the cell running now, found after its ``pre_run_cell`` already fired.

    ipykernel keeps the request being executed (its metadata carries Jupyter's cell id);
    IPython stores a cell's text in its history before running it.
    """
    get_parent = getattr(shell, "get_parent", None)
    try:
        cell_id = (get_parent() or {}).get("metadata", {}).get("cellId") if get_parent else None
    except Exception:  # noqa: BLE001 - an unusual kernel: fall back to the text
        cell_id = None
    if cell_id:
        return f"id:{cell_id}"
    history = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None)
    if history:
        return cell_key(type("Info", (), {"cell_id": None, "raw_cell": history[-1]})())
    return None


def _notice_shell() -> None:
    """Attach to the running IPython shell, if there is one (cheap when there is none)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return
    shell = ipython.get_ipython()
    if shell is not None and shell not in _attached:
        attach(shell)
        # this cell's pre_run_cell fired before we listened: make it the current cell now
        key = _current_cell(shell)
        if key is not None:
            g = global_default_graph()
            g.session.begin_cell(g, key)


hooks.on_default_use = _notice_shell
