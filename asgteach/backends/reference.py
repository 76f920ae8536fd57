"""The reference interpreter: how a graph becomes numbers, in a dozen lines.

Read this first. Every backend does what :func:`interpret` does — visit the nodes the
outputs need in graph order (node ids are a topological order: a node's inputs always come
before it), and compute each one from its inputs' values with its op's numpy kernel::

    env[node] = kernel(*[env[i] for i in node.inputs], **node.attrs)

Set a breakpoint inside the loop and step through it with a debugger: ``env`` holds every
value computed so far, keyed by node id.

The numpy backend (``numpy_backend``, ``numpy_plan``) computes the same values, faster: it
does the bookkeeping once at compile time, frees values after their last use, writes in
place, and generates straight-line code. tests/test_reference_interpreter.py checks that it
agrees with this loop on random graphs. (This loop checks nothing on the way: no NaN hunt,
and an output may be the very array you fed.)
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..graph import Graph
from ..ops.registry import spec
from .common import feed_array, missing_feed_error, resolve_feeds

__all__ = ["interpret", "compile", "Plan", "NAME", "resident_training"]

NAME = "reference"


def interpret(graph: Graph, outputs: list[int], feeds: Mapping[Any, Any] | None = None,
              dtype: Any = None) -> list[np.ndarray]:
    """The values of ``outputs`` (node ids) given ``feeds`` ({Tensor or name: array})."""
    fed = _checked_feeds(graph, outputs, feeds)
    precision = _precision(fed, dtype)
    env: dict[int, Any] = {}                          # node id -> its value
    for node_id in graph.ancestors(outputs):          # in graph order: inputs before their users
        node = graph.nodes[node_id]
        if node.op in ("input", "parameter"):
            env[node_id] = _in(precision, fed[node_id])
        elif node.op == "constant":
            env[node_id] = _in(precision, graph.constants[node_id])
        else:
            kernel = spec(node.op).numpy
            env[node_id] = kernel(*[env[i] for i in node.inputs], **node.attrs)
    return [env[i] for i in outputs]


def _checked_feeds(graph: Graph, outputs: list[int], feeds: Mapping[Any, Any] | None) -> dict[int, np.ndarray]:
    """The fed arrays of the leaves the outputs need, checked (a FeedError names a missing or wrong one)."""
    given = resolve_feeds(graph, feeds)
    fed = {}
    for node_id in graph.ancestors(outputs):
        node = graph.nodes[node_id]
        if node.op in ("input", "parameter"):
            if node_id not in given:
                raise missing_feed_error(graph, node, outputs)
            fed[node_id] = feed_array(node, given[node_id])
    return fed


def _precision(fed: dict[int, np.ndarray], dtype: Any) -> np.dtype:
    """The float type of the run: ``dtype`` if given, else that of the float feeds (float64 if none)."""
    if dtype is not None:
        return np.dtype(dtype)
    floats = [a.dtype for a in fed.values() if a.dtype.kind == "f"]
    return np.result_type(*floats) if floats else np.dtype(np.float64)


def _in(precision: np.dtype, value: np.ndarray) -> np.ndarray:
    """A float leaf in the run's precision; integers (ids) stay as they are."""
    return value.astype(precision) if value.dtype.kind == "f" and value.dtype != precision else value


class Plan:
    """The interpreter behind the backend interface (``common.Plan``): nothing is prepared, every run walks."""

    backend = NAME

    def __init__(self, graph: Graph, outputs: list[int]) -> None:
        self.graph, self.outputs = graph, list(outputs)

    def run(self, feeds: Mapping[Any, Any] | None = None, params: Mapping[Any, Any] | None = None,
            dtype: Any = None, on_nan: str = "raise") -> list[np.ndarray]:
        """The outputs' values. A NaN among them is reported as the numpy backend reports it (``on_nan``:
        "raise", "warn" or "ignore"), so ``backend="reference"`` gives the same answer or the same error."""
        given = resolve_feeds(self.graph, feeds, params)   # (a leaf in both feeds and params is an error)
        with np.errstate(all="ignore"):   # inf and NaN are values here, as on every backend
            outs = interpret(self.graph, self.outputs, given, dtype)
        if on_nan != "ignore" and any(o.dtype.kind == "f" and np.isnan(o).any() for o in outs):
            from .numpy_backend import Plan as NumpyPlan   # (its search names the first node that made the NaN)

            NumpyPlan(self.graph, self.outputs)._nan_found(given, dtype, on_nan)
        return [np.array(o, copy=True) for o in outs]   # the caller's own arrays, never a feed or a constant


def compile(graph: Graph, outputs: list[int]) -> Plan:  # noqa: A001 - the verb every backend uses
    """A :class:`Plan` for the outputs (node ids) of ``graph``."""
    return Plan(graph, outputs)


def resident_training(plan: Plan) -> None:
    """None: the interpreter keeps nothing between runs (``common.ResidentTraining``)."""
    return None
