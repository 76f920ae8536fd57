"""What every backend shares: the interface it implements, its errors, and how feeds are read.

A backend is a module with a ``NAME`` and a ``compile(graph, outputs) -> Plan``; a Plan has
``run(feeds, ...) -> list of arrays`` (:class:`Backend` and :class:`Plan` below spell it out
as Protocols: ``asgteach.backends.reference`` is the shortest thing that does the same job). One
capability is optional, and asked for through the backend: :class:`ResidentTraining`, training state
kept on a device between runs (``resident_training(plan)``: wgpu's layer, or None).
Feeds arrive the same way on every backend — ``{Tensor or name: array}`` — and are checked
the same way, with the same messages, by the functions here:

* :func:`resolve_feeds` turns the keys into node ids (and refuses to feed a computed node, or
  one leaf twice: :func:`fed_twice_error`);
* :func:`feed_array` checks one value against its node's declared shape and element type;
* :func:`missing_feed_error` explains a leaf the outputs need that nobody fed.

The errors are public as ``at.FeedError``, ``at.KernelError`` and ``at.NumericsError``.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

from ..graph import Graph, Node, source_line_text
from ..tensor import Tensor

__all__ = ["Backend", "Plan", "ResidentTraining", "FeedError", "NumericsError", "KernelError", "resolve_feeds",
           "fed_twice_error", "feed_array", "missing_feed_error", "created_at"]


@runtime_checkable
class Plan(Protocol):
    """A compiled run of some outputs of a graph: compile once, run many times."""

    graph: Graph
    outputs: list[int]   # node ids, in the order ``run`` returns their values

    def run(self, feeds: Mapping[Any, Any] | None = None, params: Mapping[Any, Any] | None = None,
            dtype: Any = None, on_nan: str = "raise") -> list[np.ndarray]:
        """The values of ``outputs`` for these feeds ({Tensor or name: array})."""
        ...


@runtime_checkable
class ResidentTraining(Protocol):
    """A layer over a Plan that keeps parameters and optimizer state where the plan computes (a GPU's memory)
    between runs, so a training step ships only its batch: the one capability a Trainer asks a backend for
    (``backends.resident_training(plan)``; ``wgpu_resident`` has it, numpy's plans compute in host memory
    and say they have none)."""

    def bind_updates(self, updates: Mapping[Any, Any]) -> None:
        """After each run, the output ``new`` replaces the leaf ``old`` on the device ({old: new})."""
        ...

    def run(self, feeds: Mapping[Any, Any] | None = None, params: Mapping[Any, Any] | None = None,
            dtype: Any = None, on_nan: str = "raise") -> list[np.ndarray | None]:
        """One run with the updates applied on the device (None for the outputs bound to a leaf)."""
        ...

    @property
    def updates_skipped(self) -> bool:
        """Whether the last run's updates were refused (a value that is not finite, found on the device)."""
        ...

    def read_params(self) -> dict[str, np.ndarray]:
        """The device values of the leaves it holds, by name."""
        ...


@runtime_checkable
class Backend(Protocol):
    """A backend module: ``numpy_backend`` and ``wgpu_backend`` are two (``isinstance`` works on modules)."""

    NAME: str

    def compile(self, graph: Graph, outputs: list[int]) -> Plan:
        """Everything that does not depend on the numbers, done once for these outputs (node ids)."""
        ...

    def resident_training(self, plan: Plan) -> ResidentTraining | None:
        """The layer that keeps ``plan``'s training state on its device, or None where there is none."""
        ...


class FeedError(ValueError):
    """A feed is missing, or has the wrong shape or element type. Names the input."""


class NumericsError(FloatingPointError):
    """A NaN appeared. Names the first node that produced it, and why that op can."""


class KernelError(RuntimeError):
    """A kernel failed at run time (e.g. an embedding id out of range). Names the node."""


def created_at(node: Node) -> str:
    """Where the user made ``node``: ``file:line``, and that line's text when it can be read."""
    text = source_line_text(node.source)
    return f"{node.source}" + (f"\n      {text}" if text else "")


def resolve_feeds(graph: Graph, feeds: Mapping[Any, Any] | None,
                  params: Mapping[Any, Any] | None = None) -> dict[int, Any]:
    """Map feed keys (Tensor, input/parameter name, or node id) to node ids.

    ``params`` is a second mapping of the same kind (``plan.run(feeds, params=...)``): both are
    read, in that order, as one set of feeds. Give them separately, not merged as
    ``{**feeds, **params}``: a merged dict keeps only the last value of a key found in both, so
    a leaf fed twice would go unnoticed.

    Two rules make a feed mean what it says:

    * Only inputs and parameters can be fed. A computed node (or a constant) has its value
      decided by the graph; a feed for it used to be dropped without a word, so a student
      who fed ``h = x @ w`` to "try a value" got results that ignored it. Now it is an error.
    * Each leaf is fed once. ``{x: A, "x": B}`` (its Tensor and its name), a name and a node
      id, or the same leaf in ``feeds`` and in ``params``: two keys for one node. Which value
      was meant? Nothing can tell; the last one used to win without a word. Now it is an
      error naming both keys (:func:`fed_twice_error`).
    """
    out: dict[int, Any] = {}
    first: dict[int, tuple[Any, str]] = {}   # node id -> (the key that fed it, "feeds" or "params")
    for where, group in (("feeds", feeds), ("params", params)):
        for key, value in (group or {}).items():
            node_id = _feed_node_id(graph, key)
            if node_id in first:
                raise fed_twice_error(graph.nodes[node_id], first[node_id], (key, where), params is not None)
            first[node_id] = (key, where)
            out[node_id] = value
    return out


def _feed_node_id(graph: Graph, key: Any) -> int:
    """The node one feed key names, or a FeedError (also for a computed node or a constant)."""
    if isinstance(key, Tensor):
        if key.graph is not graph:
            raise FeedError(f"feed key {key!r} belongs to a different graph than the outputs")
        node_id = key.node_id
    elif isinstance(key, str):
        try:
            node_id = graph.find(key).id
        except KeyError as e:
            raise FeedError(str(e.args[0])) from None
    elif isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        node_id = int(key)
        if not 0 <= node_id < len(graph.nodes):
            raise FeedError(f"feed key {node_id} is not a node of this graph (it has {len(graph.nodes)} nodes)")
    else:
        raise FeedError(f"feed keys are Tensors or names; got {type(key).__name__}")
    node = graph.nodes[node_id]
    if node.op not in ("input", "parameter"):
        what = "a constant: its value is part of the graph" if node.op == "constant" else \
            "computed by the graph from its inputs"
        raise FeedError(
            f"cannot feed {node.op} (node #{node.id} '{node.name}', shape {node.shape}, created at "
            f"{created_at(node)}): it is {what}, so a fed value would be ignored.\n"
            f"  Only inputs and parameters take feeds. To choose this value yourself, make it an "
            f"input: at.input(\"{node.name}\", {node.shape})"
        )
    return node_id


def _feed_key_text(key: Any) -> str:
    """How a feed key reads in a message: ``its Tensor``, ``the name 'x'``, ``the node id 3``."""
    if isinstance(key, Tensor):
        return "its Tensor"
    if isinstance(key, str):
        return f"the name {key!r}"
    return f"the node id {int(key)}"


def fed_twice_error(node: Node, first: tuple[Any, str], second: tuple[Any, str], two_mappings: bool) -> FeedError:
    """The error for a leaf given two values: which leaf, where it was made, and both keys that fed it.

    ``first`` and ``second`` are (key, "feeds" or "params"); ``two_mappings`` says whether the
    caller passed ``params`` at all (if not, every key came from the one feed dict).
    """
    def where(k: tuple[Any, str]) -> str:
        return f"{_feed_key_text(k[0])}" + (f" in {k[1]}" if two_mappings else "")

    same_key = _feed_key_text(first[0]) == _feed_key_text(second[0])
    hint = ("the same key is in feeds and in params: pass it in one of them" if same_key else
            "two keys name the same node: keep one of them")
    return FeedError(
        f"{node.op} '{node.name}' (node #{node.id}, shape {node.shape}, created at {created_at(node)}) is fed twice: "
        f"by {where(first)} and by {where(second)}.\n"
        f"  A leaf takes one value per run, and which of the two was meant cannot be told; {hint}."
    )


def missing_feed_error(graph: Graph, node: Node, outputs: Sequence[int]) -> FeedError:
    """The error for a leaf the outputs need but nobody fed: which one, where it was made, and what to do.

    In a notebook the usual cause is a re-run cell: ``x = at.input("x", ...)`` made a NEW
    input called "x", so ``{"x": X}`` feeds the new one, while an output built before the
    re-run still reads the old one. The message says so when the name now means another node.
    """
    needed_by = ", ".join(f"#{o} {graph.nodes[o].op}" for o in outputs[:3])
    if len(outputs) > 3:   # (a Trainer's step has an output per parameter and per moment)
        needed_by += f" and {len(outputs) - 3} more"
    msg = (f"missing feed for {node.op} '{node.name}' (shape {node.shape}, created at {created_at(node)})\n"
           f"  the requested outputs ({needed_by}) depend on it; pass it in feeds, e.g. {{{node.name}: array}}")
    try:
        now = graph.find(node.name)
    except KeyError:
        now = None
    if now is not None and now.id != node.id:
        msg += (f"\n  note: the name '{node.name}' now means {now.op} #{now.id} (made at {now.source}); "
                f"this output reads the older {node.op} #{node.id} - re-run the cell that builds the output, "
                f"or feed it by its Tensor")
    return FeedError(msg)


def feed_array(node: Node, value: Any) -> np.ndarray:
    """``value`` as an ndarray of ``node``'s declared shape, or a FeedError that names the node.

    Checks the shape, and that the element type suits the node: a float input takes float32
    or float64 (float16 and longer floats are refused: asgteach computes in one of those
    two), an integer input (ids) takes integers. Converts nothing else.
    """
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as e:  # e.g. a ragged nested list: rows of different lengths
        raise FeedError(
            f"feed for {node.op} '{node.name}' is not a rectangular array of numbers ({e}); the graph declared "
            f"shape {node.shape} (at {created_at(node)}). Check that every row has the same length."
        ) from None
    if arr.dtype == object:
        raise FeedError(
            f"feed for {node.op} '{node.name}' is not a rectangular array of numbers (numpy made an object "
            f"array of shape {arr.shape}); the graph declared shape {node.shape} (at {created_at(node)}). "
            f"Check that every row has the same length."
        )
    if arr.shape != node.shape:
        raise FeedError(
            f"feed for {node.op} '{node.name}' has shape {arr.shape}, but the graph declared "
            f"{node.shape} (at {created_at(node)})"
        )
    kind = arr.dtype.kind
    if node.dtype == "float":
        if arr.dtype not in (np.float32, np.float64):
            raise FeedError(
                f"feed for {node.op} '{node.name}' has dtype {arr.dtype}, but it is a float input; "
                f"pass float32 or float64 values (e.g. x.astype(np.float32))"
            )
    elif kind not in "iu":
        raise FeedError(
            f"feed for {node.op} '{node.name}' has dtype {arr.dtype}, but it is an integer input "
            f"(ids); pass an integer array"
        )
    return arr
