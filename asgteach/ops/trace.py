"""Traces: a scratch graph that extends another, where ``at.vmap`` records the function it batches.

``at.vmap(fn)`` calls ``fn`` once, on stand-ins of ONE example's shape, and must record what ``fn``
does without adding a per-example copy of it to the user's graph. So ``fn``'s nodes go to a scratch
graph that starts as the user's graph's node list (the same Node objects under the same ids: a list
copy, nothing else). Everything ``fn`` can reach is there already -- a weight it closes over, a value
computed before the call, and what that value was computed from -- so ``at.grad`` inside ``fn``
differentiates the whole computation, exactly as it would outside.

While a trace is open (:func:`tracing`), :func:`common_graph`, which ``apply`` (every op) and
``at.grad`` / ``at.jvp`` ask for the graph of their Tensors, lifts a Tensor of the extended graph
into the innermost trace (:func:`lift`: the same node id, now in the scratch graph). So every op
``fn`` calls lands in the trace, even one that reads only captured values. Traces nest
(``vmap(vmap(f))``): a trace may extend a trace.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from ..graph import Graph, default_graph
from ..tensor import Tensor

__all__ = ["Extension", "tracing", "lift", "extends", "common_graph"]


@dataclass(frozen=True)
class Extension:
    """An open trace: a scratch ``graph`` whose first ``shared`` nodes ARE the nodes of ``base`` (same ids,
    same objects); what the traced function does is appended after them."""

    graph: Graph
    base: Graph
    shared: int


#: the traces open now, innermost last (vmap inside vmap opens one inside another)
_TRACES: list[Extension] = []


@contextmanager
def tracing(base: Graph, name: str = "trace") -> Iterator[Extension]:
    """Open a scratch graph extending ``base`` for the block: ops called inside land in it (see :class:`Extension`)."""
    scratch = Graph(name)
    scratch.nodes = list(base.nodes)            # the same Node objects under the same ids: nothing is copied
    scratch.constants = dict(base.constants)
    scratch.released = set(base.released)
    trace = Extension(scratch, base, len(base.nodes))
    _TRACES.append(trace)
    try:
        with scratch:                           # ops without a Tensor input (at.constant) land there too
            yield trace
    finally:
        _TRACES.remove(trace)


def _open_trace(graph: Graph) -> Extension | None:
    return next((t for t in reversed(_TRACES) if t.graph is graph), None)


def lift(t: Tensor, graph: Graph) -> Tensor | None:
    """``t`` as a Tensor of ``graph``: itself if it is one; the same node if ``graph`` is an open trace that
    extends ``t``'s graph (through any number of traces) and shares the node; else None."""
    if t.graph is graph:
        return t
    g, shared = graph, len(graph.nodes)
    while (trace := _open_trace(g)) is not None:
        shared, g = min(shared, trace.shared), trace.base
        if g is t.graph:
            return Tensor(graph, t.node_id) if t.node_id < shared else None
    return None


def extends(graph: Graph, base: Graph) -> bool:
    """True when ``graph`` is ``base`` or an open trace that extends it (a layer of ``base`` may be called on it)."""
    g = graph
    while g is not base:
        trace = _open_trace(g)
        if trace is None:
            return False
        g = trace.base
    return True


def common_graph(values: Sequence[Any]) -> tuple[Graph, list[Any]]:
    """The graph an op on ``values`` belongs to, and the values with every Tensor as a Tensor of it.

    Outside a trace that is the one graph of the Tensors (mixing graphs is an error that says so).
    Inside one (``at.vmap`` tracing its function), Tensors of the graphs the trace extends are lifted
    into the innermost trace: the function's whole computation is recorded there.
    """
    values = list(values)
    tensors = [v for v in values if isinstance(v, Tensor)]
    if _TRACES:
        top = _TRACES[-1].graph
        lifted = [lift(v, top) if isinstance(v, Tensor) else v for v in values]
        if all(v is not None for v in lifted):
            return top, lifted
    graphs = {id(t.graph): t.graph for t in tensors}
    if len(graphs) <= 1:
        return (tensors[0].graph if tensors else default_graph()), values
    for g in graphs.values():   # a trace's stand-ins beside Tensors it extends (a rule run after its trace closed)
        lifted = [lift(v, g) if isinstance(v, Tensor) else v for v in values]
        if all(v is not None for v in lifted):
            return g, lifted
    if any(g.retired for g in graphs.values()):
        raise ValueError(
            "these tensors live in different graphs: some were made before at.reset(), which started "
            "a fresh default graph; re-run the cells that made them"
        )
    if _TRACES:
        raise ValueError(
            "these tensors live in different graphs: at.vmap is recording its function in a scratch graph, and "
            "one of them was made in another graph while it ran (a Tensor made inside the function with "
            "graph=..., or in a graph the vmapped tensors do not live in). Make it before calling vmap, "
            "or inside the function without graph="
        )
    raise ValueError(
        "these tensors live in different graphs; build one computation inside one "
        "`with at.Graph():` block"
    )
