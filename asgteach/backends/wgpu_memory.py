"""Memory plan: a plan's kernel list becomes buffers, one uniform block per dispatch, and staging.

Both plans end here: the plain one (``wgpu_plain``, one kernel per node) and the optimised
one (``wgpu_passes``, the plain list rewritten by passes). What this module is given is a
:class:`KernelList`: the dispatches in run order, and for every node whose kernels run, the
buffers they read. It then decides, without touching the device:

* **buffers**: inputs, parameters, the constants a kernel binds and the requested outputs
  own a buffer each; every other value takes one from a pool when its kernel runs and gives
  it back after its last reader (liveness, as the numpy backend's memory plan);
* **uniform words**: one 256-byte row per dispatch (shapes, strides, counts), written once;
* **staging**: every requested output at its own offset in one mappable buffer.

The result, a :class:`wgpu_plan_cache.Lowered`, depends on no device object, so a plan of
the same structure reuses it (``wgpu_plan_cache``).
"""

from __future__ import annotations

import warnings
from bisect import bisect_left, insort
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..graph import Graph, Node
from ..ops.registry import spec
from . import wgpu_plan_cache as plan_cache
from .wgpu_kernels import Dispatch, index_bound_of

__all__ = ["KernelList", "memory_plan", "nbytes", "bind_entries", "empty_input_values"]


def nbytes(node: Node) -> int:
    """Bytes of a node's buffer: float32/int32 elements, rounded up to 16 (and at least 16)."""
    return max(16, (node.size * 4 + 15) // 16 * 16)


def bind_entries(graph: Graph, d: Dispatch, scratch_bytes: dict[int, int]) -> list[tuple[int, int, int]]:
    """(binding, buffer owner, bytes bound) for each buffer binding of ``d``, in binding order."""
    return [(b, nid, scratch_bytes[nid] if nid < 0 else nbytes(graph.nodes[nid]))
            for b, nid in sorted(d.binds.items())]


@dataclass
class KernelList:
    """What a plan runs, in order, before any buffer is chosen (the plain plan's or the passes' result)."""

    dispatches: list[Dispatch]
    running: list[Node]                       # the nodes whose kernels run, in run order
    reads: dict[int, list[int]]               # such a node -> the buffers (owner nodes) its kernels read
    sources: dict[int, tuple[str, ...]]       # node -> the WGSL that computes it, in parts (plan.shader_for)
    fixed: dict[int, np.ndarray] = field(default_factory=dict)   # values of nodes whose inputs are empty
    failing: dict[int, str] = field(default_factory=dict)        # ... and the errors numpy raised for some
    writes_too: dict[int, dict[str, int]] = field(default_factory=dict)   # node -> by-products its kernel writes
    unbound: set[int] = field(default_factory=set)   # values no kernel writes (a sum a chain adds up itself)
    owner: Callable[[int], int] = lambda nid: nid   # the node whose buffer a value lives in (a free reshape's input)


def memory_plan(graph: Graph, outputs: list[int], node_ids: list[int], kernels: KernelList, uniform_align: int,
                **record: Any) -> plan_cache.Lowered:
    """Buffers, uniform words and staging offsets for ``kernels`` (``record``: more fields of the Lowered)."""
    nodes = [graph.nodes[i] for i in node_ids]
    leaves = [n for n in nodes if n.op in ("input", "parameter")]
    dispatches, running, reads, fixed_values = kernels.dispatches, kernels.running, kernels.reads, kernels.fixed
    slot_sizes: list[int] = []
    slot_of: dict[int, int] = {}

    def new_slot(size: int) -> int:
        slot_sizes.append(size)
        return len(slot_sizes) - 1

    bytes_owned = bytes_pooled = 0
    fixed = [graph.nodes[i] for i in fixed_values]
    # a scalar constant that fused kernels read as a uniform word is bound by no kernel: it needs no buffer
    # (nor an upload); in a transformer's training step that is half of the plan's ~1100 buffers
    bound = {nid for d in dispatches for nid in d.binds.values()} | set(outputs)
    constants = [n for n in nodes if n.op == "constant" and n.id in bound]
    for n in leaves + constants + fixed + [graph.nodes[i] for i in outputs]:
        if n.id not in slot_of:
            slot_of[n.id] = new_slot(nbytes(n))
            bytes_owned += nbytes(n)
    last_use: dict[int, int] = {}
    for k, n in enumerate(running):
        for i in reads[n.id]:
            last_use[i] = k
    # buffers free for reuse: a value takes the smallest one big enough (at most twice its size), of those the
    # one freed first; kept by size so that the choice is a bisection, not a scan of every free buffer
    free: dict[int, deque[int]] = {}   # bytes -> slots of that size, in the order they were freed
    free_sizes: list[int] = []         # the keys of ``free``, ascending
    outs = set(outputs)
    for k, n in enumerate(running):
        for nid in (n.id, *kernels.writes_too.get(n.id, {}).values()):   # (and the by-products its kernel writes)
            if nid in slot_of or nid in kernels.unbound:
                continue
            need = nbytes(graph.nodes[nid])
            j = bisect_left(free_sizes, need)
            if j < len(free_sizes) and free_sizes[j] <= 2 * need:
                size = free_sizes[j]
                slot_of[nid] = free[size].popleft()
                if not free[size]:
                    del free[size], free_sizes[j]
            else:
                slot_of[nid] = new_slot(need)
                bytes_pooled += need
        for i in set(reads[n.id]):   # values read for the last time give their buffer back
            if last_use.get(i) != k or i in outs:
                continue
            if graph.nodes[i].op in ("input", "parameter", "constant") or i in fixed_values:
                continue
            s = slot_of[i]
            if slot_sizes[s] not in free:
                free[slot_sizes[s]] = deque()
                insort(free_sizes, slot_sizes[s])
            free[slot_sizes[s]].append(s)
    for i in node_ids:   # a value living in another's buffer (a free reshape; not one of a constant without one)
        owner = kernels.owner(i)
        if owner != i and owner in slot_of and i not in slot_of:
            slot_of[i] = slot_of[owner]
    scratch_bytes: dict[int, int] = {}
    for d in dispatches:
        for sid, size in (d.scratch or {}).items():
            scratch_bytes[sid] = max(16, (size + 15) // 16 * 16)
            slot_of[sid] = new_slot(scratch_bytes[sid])
            bytes_owned += scratch_bytes[sid]

    # one uniform buffer for all dispatches, written once
    params = np.zeros((max(1, len(dispatches)), uniform_align // 4), dtype=np.uint32)
    for k, d in enumerate(dispatches):
        params[k, :64] = d.params

    # staging: every requested output at its own offset in one mappable buffer
    out_offsets: list[int] = []
    off = 0
    for i in outputs:   # (outputs later bound by bind_updates are simply not copied or mapped)
        out_offsets.append(off)
        off += nbytes(graph.nodes[i])
    indexing = [n.id for n in running if index_bound_of(n.op) is not None and n.size]
    return plan_cache.Lowered(
        node_ids=list(node_ids), leaves=[n.id for n in leaves], constants=[n.id for n in constants],
        fixed=fixed_values, failing=kernels.failing, dispatches=dispatches, node_sources=kernels.sources,
        indexing=indexing, slot_sizes=slot_sizes, slot_of=slot_of,
        binds=[bind_entries(graph, d, scratch_bytes) for d in dispatches], params=params,
        out_offsets=out_offsets, staging_size=max(off, 16), bytes_owned=bytes_owned, bytes_pooled=bytes_pooled,
        scratch_bytes=scratch_bytes, **record)


def empty_input_values(graph: Graph, nodes: list[Node]) -> tuple[dict[int, np.ndarray], dict[int, str]]:
    """Values (and errors) of the nodes whose every input is empty, computed once by numpy.

    A reduction over an empty axis reads no data, yet has a value: the sum of nothing is 0,
    the mean of nothing is NaN (0/0), and the max of nothing is an error. Those are
    numpy's conventions, and numpy is the reference, so such a node is not left to a GPU
    kernel looping zero times (which would give 0 for a variance, -inf for a max): its
    numpy kernel runs here on empty arrays. Returns (node id -> float32/int32 value, for
    non-empty results) and (node id -> the error numpy raised, raised again at run time).
    """
    fixed: dict[int, np.ndarray] = {}
    failing: dict[int, str] = {}
    for n in nodes:
        ins = [graph.nodes[i] for i in n.inputs]
        if not ins or any(i.size for i in ins):
            continue
        args = [np.zeros(i.shape, np.int32 if i.dtype == "int" else np.float32) for i in ins]
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")   # numpy's "Mean of empty slice": the NaN says it
                value = np.asarray(spec(n.op).numpy(*args, **n.attrs))
        except Exception as e:  # noqa: BLE001 - whatever numpy raises, the numpy backend would report
            failing[n.id] = str(e)
            continue
        if n.size:
            fixed[n.id] = np.ascontiguousarray(value, np.int32 if n.dtype == "int" else np.float32).reshape(n.shape)
    return fixed, failing
