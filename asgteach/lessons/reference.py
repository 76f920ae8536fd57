"""Reference answers for lesson 13 (graph engineering), used by its checks and by its text.

Each function reads a compiled numpy :class:`~asgteach.backends.numpy_plan.Plan` and answers
one memory-planning question. They are written to be read: a student who is stuck may open
this file, as they would open a textbook's solutions.
"""

from __future__ import annotations

from typing import Any

from ..ops.registry import spec

__all__ = ["ELEMENTWISE", "no_reuse_bytes", "peak_bytes", "last_use", "fusible_values", "fusion_chains"]

#: op categories whose kernels are elementwise: output element i depends only on input elements i
ELEMENTWISE = ("arithmetic", "activation", "comparison")


def no_reuse_bytes(plan: Any, itemsize: int = 4) -> int:
    """Bytes if every value of the plan (fed leaves, constants, step results) stayed alive to the end."""
    nodes = [plan.graph.nodes[i] for i in plan.node_ids]
    return sum(n.size for n in nodes) * itemsize


def peak_bytes(plan: Any, itemsize: int = 4) -> int:
    """The most bytes alive at once when each value is dropped after its last use (``plan.liveness``)."""
    return max(row["live_bytes"] for row in plan.liveness(itemsize))


def last_use(plan: Any) -> dict[int, int]:
    """For every node a step reads: the index (in ``plan.steps``) of the last step that reads it."""
    out: dict[int, int] = {}
    for k, step in enumerate(plan.steps):
        for i in step.node.inputs:
            out[i] = k
    return out


def _consumers(plan: Any) -> dict[int, list[Any]]:
    users: dict[int, list[Any]] = {}
    for step in plan.steps:
        for i in step.node.inputs:
            users.setdefault(i, []).append(step.node)
    return users


def fusible_values(plan: Any) -> list[int]:
    """Node ids of the values a fusing compiler would never write to memory.

    A value qualifies when an elementwise step makes it, it is not an output, it is not folded
    (``plan.folded``: computed once from constants, not on every run), exactly one step reads it,
    and that step is elementwise with the same shape: the two kernels can be one loop that keeps
    the value in a register.
    """
    users = _consumers(plan)
    outputs, folded = set(plan.outputs), set(plan.folded)
    fusible = []
    for step in plan.steps:
        node = step.node
        if spec(node.op).category not in ELEMENTWISE or node.id in outputs or node.id in folded:
            continue
        readers = users.get(node.id, [])
        if len(readers) == 1 and spec(readers[0].op).category in ELEMENTWISE and readers[0].shape == node.shape:
            fusible.append(node.id)
    return fusible


def fusion_chains(plan: Any) -> list[list[int]]:
    """The groups of elementwise steps that would become one kernel each (node ids, in plan order).

    Join every fusible value to the one step that reads it; each connected group is one fused
    kernel. (A group may be a tree, e.g. ``(a * b) + (c * d)``: three steps, one loop.)
    """
    users = _consumers(plan)
    group: dict[int, int] = {}

    def root(i: int) -> int:
        while group.get(i, i) != i:
            i = group[i]
        return i

    for nid in fusible_values(plan):
        group[root(nid)] = root(users[nid][0].id)
    members: dict[int, list[int]] = {}
    for step in plan.steps:
        nid = step.node.id
        if nid in group or any(group.get(j) is not None and root(j) == root(nid) for j in group):
            members.setdefault(root(nid), []).append(nid)
    return [ids for ids in members.values() if len(ids) > 1]
