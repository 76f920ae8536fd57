"""Row ids: where they came from, and the one error every backend gives when one is out of range.

``embedding(ids, table)`` picks rows ``table[ids]``; its gradient adds rows back at ``ids``;
``cross_entropy`` with integer targets picks each row's class the same way (a lookup into an
identity matrix, ``one_hot``). An id outside ``[0, V)`` has no row. numpy's kernel notices
(``ops.nn.IdsOutOfRange``); a GPU kernel cannot raise, so the wgpu backend looks at the ids
before it runs (:func:`host_ids`). Both then raise :func:`ids_error`, so the student reads the
same message on every backend:

* it says what the ids are *for* in words the student used: "the targets of cross_entropy",
  not the ``embedding`` node that cross_entropy built inside (a node says so in
  ``meta["ids_for"]``);
* it names the input the ids came from, with its line, even when they were reshaped, sliced
  or concatenated on the way (:func:`id_sources`);
* it says what PyTorch's ``-100`` ignore index means here (nothing: there is none).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..graph import Graph, Node
from ..ops.nn import IdsOutOfRange
from .common import KernelError, created_at

__all__ = ["ids_error", "id_sources", "host_ids", "check", "IdsOutOfRange"]


def id_sources(graph: Graph, node_id: int) -> list[Node]:
    """The leaves (inputs, constants) whose numbers the integer value ``node_id`` is made of.

    Walks back through integer nodes only (a reshape, slice or concat of ids is still those ids);
    an integer value computed from floats (``argmax``) is its own source.
    """
    out: list[Node] = []
    seen: set[int] = set()
    stack = [node_id]
    while stack:
        n = graph.nodes[stack.pop()]
        if n.id in seen:
            continue
        seen.add(n.id)
        int_inputs = [i for i in n.inputs if graph.nodes[i].dtype == "int"]
        if not n.inputs or len(int_inputs) != len(n.inputs):
            out.append(n)
        else:
            stack.extend(reversed(int_inputs))
    return sorted(out, key=lambda m: m.id)


def host_ids(graph: Graph, node_id: int) -> bool:
    """Whether the integer value ``node_id`` can be computed on the host from fed or constant ids alone
    (every node between them is an integer node), so its ids can be checked before a GPU run."""
    return all(s.op in ("input", "parameter", "constant") and s.dtype == "int" for s in id_sources(graph, node_id))


def _reshaped_from(graph: Graph, node_id: int) -> Node | None:
    """The leaf ``node_id`` is a reshape of (through reshapes only), so an index can be given in its terms."""
    n = graph.nodes[node_id]
    while n.op == "reshape":
        n = graph.nodes[n.inputs[0]]
    return n if n.id != node_id and n.op in ("input", "parameter", "constant") else None


def _what(graph: Graph, node: Node) -> tuple[str, str, Node]:
    """What the ids of ``node`` are for and what they count, in the student's words, and the node the student
    made (``embedding_grad`` is the backward of the student's ``embedding``)."""
    made = node
    vjp_of = node.meta.get("vjp_of")
    if vjp_of is not None and node.phase == "backward":
        made = graph.nodes[vjp_of]
    purpose = made.meta.get("ids_for")
    if purpose:
        return purpose, made.meta.get("ids_count", "rows"), made
    return f"the ids of {made.op} '{made.name}'", "rows in its table", made


def ids_error(graph: Graph, node: Node, ids_input: int, problem: IdsOutOfRange) -> KernelError:
    """The error for ids of ``node`` (its input ``ids_input``) outside ``[0, problem.bound)``."""
    purpose, count, made = _what(graph, node)
    reader = made.meta.get("ids_by", f"{made.op} '{made.name}'")
    ids_node = graph.nodes[ids_input]
    src = _reshaped_from(graph, ids_input)
    first = problem.first
    if src is not None:   # the index in the array the student fed, not in its reshaped copy
        first = [(v, tuple(int(k) for k in np.unravel_index(np.ravel_multi_index(at, ids_node.shape), src.shape)))
                 for v, at in first]
    where = f" of '{src.name}'" if src is not None else ""
    bad = ", ".join(f"{val} at index {at}{where}" for val, at in first)
    lines = [f"{purpose}: ids must be in [0, V) with V = {problem.bound} {count}; "
             f"{problem.count} of {problem.total} are not: {bad}"]
    for leaf in id_sources(graph, ids_input):
        what = f"{leaf.op} '{leaf.name}' {leaf.shape}" if leaf.op != "constant" else f"a constant {leaf.shape}"
        lines.append(f"  the ids come from {what}, created at {created_at(leaf)}")
    if ids_node.op not in ("input", "parameter", "constant"):
        lines.append(f"    (and are {ids_node.op} '{ids_node.name}' {ids_node.shape} when {reader} reads them)")
    lines.append(f"  {reader} (node #{made.id}) was called at {created_at(made)}")
    if any(val == -100 for val, _ in problem.first):
        lines.append("  note: -100 is PyTorch's ignore_index; asgteach has no ignore index. Leave those positions "
                     "out of the ids (and the logits), or weight each row's loss with a 0/1 mask "
                     "(cross_entropy(..., reduction='none') * mask).")
    return KernelError("\n".join(lines))


def check(graph: Graph, node: Node, ids_input: int, ids: Any, bound: int) -> None:
    """Raise :func:`ids_error` when some of ``ids`` (the value of ``node``'s input ``ids_input``) has no row."""
    try:
        IdsOutOfRange.check(np.asarray(ids), bound)
    except IdsOutOfRange as e:
        raise ids_error(graph, node, ids_input, e) from None
