"""Step-through backward: replay, one node at a time, the reverse sweep ``at.grad`` made.

``at.grad`` records each sweep in ``graph.passes``: which node was differentiated (``y``),
the seed, and ``grads`` — forward node id -> the node holding dL/d(that node). The engine
visits the nodes with a gradient in *reverse topological order* (largest id first, since
node order is a topological order). At each visit two things happen, and a step shows both:

1. **Sum.** The node's gradient is complete: every consumer of the node has sent its
   contribution, and they are added up (``add`` nodes with ``meta["accumulates"]``).
   A node used three times (fan-out 3) gets three contributions.
2. **Pass on.** The node's backward rule (``OpSpec.vjp``) turns that gradient into
   contributions for its inputs (nodes with ``meta["vjp_of"]``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..graph import Graph

__all__ = ["Step", "grad_passes", "steps_of"]


@dataclass
class Step:
    """One visit of the reverse sweep.

    Attributes:
        node: the forward node whose gradient is now complete.
        grad: the node that holds dL/d(node).
        contributions: the nodes that were summed into ``grad`` (one per use of ``node``).
        senders: for each contribution, the forward node whose backward rule produced it
            (or the differentiated output itself for the seed).
        sums: the ``add`` nodes that did the summing (empty when there was one contribution).
        rule: the backward nodes the node's own rule appended (what it sends to its inputs).
    """

    node: int
    grad: int
    contributions: list[int] = field(default_factory=list)
    senders: list[int | None] = field(default_factory=list)
    sums: list[int] = field(default_factory=list)
    rule: list[int] = field(default_factory=list)


def grad_passes(graph: Graph) -> list[dict[str, Any]]:
    """The recorded reverse sweeps (``at.grad`` calls) of ``graph``, oldest first."""
    return [p for p in graph.passes if p.get("kind", "grad") == "grad"]


def _sender(graph: Graph, contribution: int) -> int | None:
    meta = graph.nodes[contribution].meta
    for key in ("vjp_of", "seed_of"):
        if isinstance(meta.get(key), int):
            return int(meta[key])
    return None


def steps_of(graph: Graph, pass_record: dict[str, Any]) -> list[Step]:
    """The steps of one recorded sweep, in the order the engine visited the nodes.

    That order is the reverse topological order: descending node id over the nodes that
    received a gradient. Leaves (inputs, parameters) are visited too — their gradient is
    summed like any other — but they have no rule to apply, so ``pass_record["order"]``
    (the non-leaf visits) is exactly this sequence with the leaves left out.
    """
    grads = {int(k): int(v) for k, v in pass_record["grads"].items()}
    lo = min(grads.values(), default=0)
    hi = max(grads.values(), default=-1)
    # the nodes appended by this sweep lie between the seed and the last gradient
    start = int(pass_record.get("seed", lo))
    sums: dict[int, list[int]] = {}
    rules: dict[int, list[int]] = {}
    for n in graph.nodes[start: hi + 1]:
        if n.phase != "backward":
            continue
        if isinstance(n.meta.get("accumulates"), int):
            sums.setdefault(n.meta["accumulates"], []).append(n.id)
        elif isinstance(n.meta.get("vjp_of"), int):
            rules.setdefault(n.meta["vjp_of"], []).append(n.id)
    steps = []
    for node_id in sorted(grads, reverse=True):
        total = grads[node_id]
        adds = sums.get(node_id, [])
        if adds:  # ((c0 + c1) + c2) + ...: the first add reads two contributions, later ones one new
            chain = set(adds)
            contributions = [i for i in graph.nodes[adds[0]].inputs]
            for a in adds[1:]:
                contributions += [i for i in graph.nodes[a].inputs if i not in chain]
            contributions = [c for c in contributions if c not in chain]
        else:
            contributions = [total]
        steps.append(Step(node_id, total, contributions, [_sender(graph, c) for c in contributions], adds,
                          rules.get(node_id, [])))
    return steps
