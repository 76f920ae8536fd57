"""The numpy backend: the reference implementation every other backend is checked against.

Running a graph happens in two steps, as in every real framework:

``compile(graph, outputs) -> Plan`` does the work once:
    * **prune** — keep only the nodes the outputs depend on;
    * **order** — node ids are already a topological order, so sorting them is enough;
    * **bind** — look up each op's numpy kernel and freeze its attributes into a closure;
    * **plan memory** — find each value's last use, so the run can drop it right after
      (a value nobody reads any more should not sit in memory).

``plan.run(feeds)`` then just walks the list of bound kernels. Float precision follows
the feeds: float64 in, float64 out; float32 stays float32.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Mapping

import numpy as np

from ..graph import Graph, Node, source_line_text
from ..ops.registry import spec
from ..tensor import Tensor

__all__ = ["compile", "Plan", "FeedError", "NumericsError", "KernelError", "resolve_feeds"]

NAME = "numpy"


class FeedError(ValueError):
    """A feed is missing, or has the wrong shape or element type. Names the input."""


class NumericsError(FloatingPointError):
    """A NaN appeared. Names the first node that produced it, and why that op can."""


class KernelError(RuntimeError):
    """A kernel failed at run time (e.g. an embedding id out of range). Names the node."""


_NAN_HINTS = {
    "log": "log of a negative number is NaN (and log(0) = -inf); clamp the input or add a small epsilon",
    "sqrt": "sqrt of a negative number is NaN; check the input is >= 0 (e.g. a variance plus eps)",
    "div": "0/0 and inf/inf are NaN; check for a zero denominator",
    "pow": "a negative base to a fractional power is NaN",
    "sub": "inf - inf is NaN; an earlier value overflowed",
    "add": "inf + (-inf) is NaN; an earlier value overflowed",
    "mul": "0 * inf is NaN; an earlier value overflowed",
}


@dataclass
class Step:
    """One bound kernel: read ``args`` slots, write ``out`` slot, then drop ``free`` slots."""

    node: Node
    kernel: Callable[..., np.ndarray]
    args: tuple[int, ...]
    out: int
    free: tuple[int, ...]


def _where(node: Node) -> str:
    text = source_line_text(node.source)
    return f"{node.source}" + (f"\n      {text}" if text else "")


def resolve_feeds(graph: Graph, feeds: Mapping[Any, Any] | None) -> dict[int, Any]:
    """Map feed keys (Tensor, input/parameter name, or node id) to node ids."""
    out: dict[int, Any] = {}
    for key, value in (feeds or {}).items():
        if isinstance(key, Tensor):
            if key.graph is not graph:
                raise FeedError(f"feed key {key!r} belongs to a different graph than the outputs")
            node_id = key.node_id
        elif isinstance(key, str):
            try:
                node_id = graph.find(key).id
            except KeyError as e:
                raise FeedError(str(e.args[0])) from None
        elif isinstance(key, (int, np.integer)):
            node_id = int(key)
        else:
            raise FeedError(f"feed keys are Tensors or names; got {type(key).__name__}")
        out[node_id] = value
    return out


class Plan:
    """A compiled, ready-to-run list of kernels for some outputs of a graph."""

    backend = NAME

    def __init__(self, graph: Graph, outputs: list[int]) -> None:
        self.graph = graph
        self.outputs = list(outputs)
        self.node_ids = graph.ancestors(outputs)
        self.slot = {nid: k for k, nid in enumerate(self.node_ids)}
        self.leaves: list[Node] = []     # inputs and parameters, fed at run time
        self.constants: list[Node] = []
        self.steps: list[Step] = []
        last_use: dict[int, int] = {}
        compute = [graph.nodes[i] for i in self.node_ids if not spec(graph.nodes[i].op).leaf]
        for k, node in enumerate(compute):
            for i in node.inputs:
                last_use[i] = k
        keep = set(outputs)
        for k, node in enumerate(compute):
            op = spec(node.op)
            kernel = partial(op.numpy, **node.attrs) if node.attrs else op.numpy
            free = tuple(sorted({self.slot[i] for i in node.inputs if last_use[i] == k and i not in keep}))
            self.steps.append(Step(node, kernel, tuple(self.slot[i] for i in node.inputs), self.slot[node.id], free))
        for i in self.node_ids:
            node = graph.nodes[i]
            if node.op == "constant":
                self.constants.append(node)
            elif node.op in ("input", "parameter"):
                self.leaves.append(node)
        self._const_cache: dict[Any, list[tuple[int, np.ndarray]]] = {}
        self._fast = [(s.kernel, s.args, s.out, s.free) for s in self.steps]
        self._out_slots = [self.slot[i] for i in self.outputs]

    # -- memory planning, for the curious (and for lesson 13) ----------------------------
    def liveness(self, itemsize: int = 4) -> list[dict[str, Any]]:
        """Bytes alive after each step when values are dropped at their last use."""
        live: dict[int, int] = {}
        for n in self.leaves + self.constants:
            live[self.slot[n.id]] = n.size * itemsize
        rows = []
        for s in self.steps:
            live[s.out] = s.node.size * itemsize
            for f in s.free:
                live.pop(f, None)
            rows.append({"node": s.node.id, "op": s.node.op, "live_bytes": sum(live.values()), "live_values": len(live)})
        return rows

    def __repr__(self) -> str:
        return (f"<numpy Plan: {len(self.steps)} kernels, {len(self.leaves)} fed leaves, "
                f"{len(self.constants)} constants, outputs {self.outputs}>")

    # -- running ---------------------------------------------------------------------------
    def _prepare(self, feeds: Mapping[Any, Any] | None, dtype: Any) -> tuple[list[Any], np.dtype]:
        given = resolve_feeds(self.graph, feeds)
        for nid in given:
            if not 0 <= nid < len(self.graph.nodes):
                raise FeedError(f"feed key {nid} is not a node of this graph")
        env: list[Any] = [None] * len(self.node_ids)
        arrays: list[tuple[Node, np.ndarray]] = []
        for node in self.leaves:
            if node.id not in given:
                needed_by = ", ".join(f"#{o} {self.graph.nodes[o].op}" for o in self.outputs)
                raise FeedError(
                    f"missing feed for {node.op} '{node.name}' (shape {node.shape}, created at {_where(node)})\n"
                    f"  the requested outputs ({needed_by}) depend on it; pass it in feeds, "
                    f"e.g. {{{node.name}: array}}"
                )
            arrays.append((node, np.asarray(given[node.id])))
        run_dtype = np.dtype(dtype) if dtype is not None else None
        if run_dtype is None:
            float_dtypes = [a.dtype for n, a in arrays if n.dtype == "float" and a.dtype.kind == "f"]
            run_dtype = np.result_type(*float_dtypes) if float_dtypes else np.dtype(np.float64)
        if run_dtype not in (np.float32, np.float64):
            raise FeedError(f"asgteach runs in float32 or float64, not {run_dtype}")
        for node, arr in arrays:
            if arr.shape != node.shape:
                raise FeedError(
                    f"feed for {node.op} '{node.name}' has shape {arr.shape}, but the graph declared "
                    f"{node.shape} (at {_where(node)})"
                )
            kind = arr.dtype.kind
            if node.dtype == "float":
                if kind != "f" or arr.dtype.itemsize < 4:
                    raise FeedError(
                        f"feed for {node.op} '{node.name}' has dtype {arr.dtype}, but it is a float input; "
                        f"pass float32 or float64 values (e.g. x.astype(np.float32))"
                    )
                if arr.dtype != run_dtype:
                    arr = arr.astype(run_dtype)
            elif kind not in "iu":
                raise FeedError(
                    f"feed for {node.op} '{node.name}' has dtype {arr.dtype}, but it is an integer input "
                    f"(ids); pass an integer array"
                )
            env[self.slot[node.id]] = arr
        for slot, value in self._constants_for(run_dtype):
            env[slot] = value
        return env, run_dtype

    def _constants_for(self, dtype: np.dtype) -> list[tuple[int, np.ndarray]]:
        cached = self._const_cache.get(dtype)
        if cached is None:
            cached = []
            for node in self.constants:
                v = self.graph.constants[node.id]
                if v.dtype.kind == "f":
                    v = v.astype(dtype)
                cached.append((self.slot[node.id], v))
            self._const_cache[dtype] = cached
        return cached

    def run(
        self,
        feeds: Mapping[Any, Any] | None = None,
        params: Mapping[Any, Any] | None = None,
        dtype: Any = None,
        on_nan: str = "raise",
    ) -> list[np.ndarray]:
        """Compute the outputs. ``feeds``/``params``: {Tensor or name: array}.

        ``dtype`` forces the float precision (default: that of the float feeds).
        ``on_nan``: "raise" (default) explains the first node that produced a NaN;
        "warn" or "ignore" return NaNs as they are.
        """
        all_feeds = {**(feeds or {}), **(params or {})}
        env, _ = self._prepare(all_feeds, dtype)
        self._execute(env)
        outs = [env[s] for s in self._out_slots]
        if on_nan != "ignore":
            for o in outs:
                if o.dtype.kind == "f" and np.isnan(np.sum(o)) and np.isnan(o).any():
                    self._nan_found(all_feeds, dtype, on_nan)
                    break
        return outs

    def _execute(self, env: list[Any], watch: Callable[[Step, list[Any]], None] | None = None) -> None:
        k = 0
        try:
            with np.errstate(all="ignore"):
                if watch is None:
                    for k, (kernel, args, out, free) in enumerate(self._fast):
                        env[out] = kernel(*[env[a] for a in args])
                        for f in free:
                            env[f] = None
                else:
                    for k, step in enumerate(self.steps):
                        env[step.out] = step.kernel(*[env[a] for a in step.args])
                        watch(step, env)
        except (NumericsError, KernelError, _Stop):
            raise
        except Exception as e:
            node = self.steps[k].node
            shapes = ", ".join(str(self.graph.nodes[i].shape) for i in node.inputs)
            raise KernelError(
                f"{node.op} (node #{node.id} '{node.name}', inputs {shapes}) failed while running: {e}\n"
                f"  created at {_where(node)}"
            ) from e

    def _nan_found(self, feeds: Mapping[Any, Any], dtype: Any, on_nan: str) -> None:
        """Re-run step by step to find the first NaN, and explain it."""
        import warnings

        env, _ = self._prepare(feeds, dtype)
        for node in self.leaves:
            arr = env[self.slot[node.id]]
            if arr.dtype.kind == "f" and np.isnan(arr).any():
                where = tuple(int(i) for i in np.argwhere(np.isnan(arr))[0])
                msg = (f"the feed for {node.op} '{node.name}' contains NaN "
                       f"({int(np.isnan(arr).sum())} of {arr.size} values, first at index {where})")
                if on_nan == "raise":
                    raise NumericsError(msg)
                warnings.warn(msg, RuntimeWarning, stacklevel=3)
                return

        def watch(step: Step, env: list[Any]) -> None:
            out = env[step.out]
            if out.dtype.kind != "f" or not np.isnan(out).any():
                return
            node = step.node
            lines = []
            for i in node.inputs:
                v = env[self.slot[i]]
                src = self.graph.nodes[i]
                if v.dtype.kind == "f" and v.size:
                    lines.append(f"    input #{i} {src.op} '{src.name}' {v.shape}: min {np.nanmin(v):.4g}, "
                                 f"max {np.nanmax(v):.4g}, NaN {int(np.isnan(v).sum())}")
            first = tuple(int(i) for i in np.argwhere(np.isnan(out))[0])
            hint = _NAN_HINTS.get(node.op, "check this op's inputs for values outside its domain")
            msg = (f"NaN first appears in {node.op} (node #{node.id} '{node.name}', {node.phase} pass), "
                   f"created at {_where(node)}\n  {int(np.isnan(out).sum())} of {out.size} values are NaN, "
                   f"first at index {first}\n" + "\n".join(lines) + f"\n  why: {hint}")
            if on_nan == "raise":
                raise NumericsError(msg)
            warnings.warn(msg, RuntimeWarning, stacklevel=4)
            raise _Stop

        try:
            self._execute(env, watch)
        except _Stop:
            pass


class _Stop(Exception):
    pass


def compile(graph: Graph, outputs: list[int]) -> Plan:  # noqa: A001 - the verb every backend uses
    """Compile the outputs (node ids) of ``graph`` into a :class:`Plan`."""
    return Plan(graph, outputs)
