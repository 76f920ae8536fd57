"""Loading a graph from a file: the op layer's job, since checking a file needs the op registry.

``Graph.to_json`` writes a graph; reading one back must check every node against the ops it claims to
use (``asgteach.graph_json``), and the registry of ops lives here, one layer above graphs. So the
loader that knows the registry is here too, and hands it down to ``Graph.from_json``.
"""

from __future__ import annotations

from ..graph import Graph
from .registry import REGISTRY

__all__ = ["load_graph"]


def load_graph(text: str | bytes) -> Graph:
    """The graph a JSON document (``graph.to_json()``) describes, every node checked against the ops
    registered here, yours included: ``g2 = at.load_graph(g.to_json())``.

    Nothing in the document is trusted (``Graph.from_json`` says what is checked); an op that is not
    registered, or a node its op could not have made, is a :class:`~asgteach.graph.GraphLoadError`
    naming the node.
    """
    return Graph.from_json(text, REGISTRY)
