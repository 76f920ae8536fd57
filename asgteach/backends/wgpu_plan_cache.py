"""Reusing a lowered GPU plan: a second compile of the same graph *shape* only rebinds buffers.

Compiling a wgpu plan is two kinds of work:

* **pure work** that depends only on the graph's structure: which nodes fuse, the WGSL of
  every kernel, every uniform block, which value lives in which buffer (the memory plan),
  where each output sits in the staging buffer. For the GPT-style benchmark that is
  hundreds of dispatches of Python string and dict work;
* **device work**: creating the buffers and bind groups that one Plan owns (a plan keeps
  its parameters and optimizer state on the GPU, so two plans never share buffers).

A notebook cell re-run, or a second Trainer on a fresh model of the same sizes, builds a
new graph with the same nodes in the same order. Its pure work would come out identical,
so it is done once and kept here (a :class:`Lowered`), keyed by a *structural signature*:
for every node the plan reads, its id, op, inputs, shape, element kind and attributes
(and a constant's value: scalar constants become uniform words), and which OpSpec object
each op had. Names, source lines and metadata do not take part: no kernel depends on them (the
passes, ``wgpu_passes``, look at ops, inputs, shapes, attributes and constants only).

The key also holds everything else the generated code depends on, so a hit is exactly
what a fresh compile would produce:

* ``ops.registry.generation()`` — a re-registered op (a notebook cell redefining its
  formula) changes its kernel;
* the shader files' modification times (``wgpu_device.shaders_stamp``) — an edited
  ``shaders/*.wgsl`` changes the generated WGSL;
* the matmul tile (``ASGTEACH_WGPU_MATMUL_TILE``) and the device limits the lowering
  reads (storage buffers per kernel, uniform alignment).

The cache keeps the last few plans' work (:data:`MAX_ENTRIES`); ``stats`` counts hits
and misses (tests read it: a second Trainer must not lower again).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..graph import Graph
from ..ops.registry import REGISTRY, spec

__all__ = ["Lowered", "signature", "lookup", "clear", "stats", "MAX_ENTRIES"]

#: how many lowered plans are kept (the GPT-style benchmark's training step: ~3 MB, mostly WGSL text)
MAX_ENTRIES = 8

_CACHE: OrderedDict[tuple, "Lowered"] = OrderedDict()
#: counts since the process started (or since ``clear()``): hits, misses, and bind_updates rewrites reused
stats: dict[str, int] = {"hits": 0, "misses": 0, "update_hits": 0, "update_misses": 0}


@dataclass
class Lowered:
    """Everything a Plan computes before it touches the device (node ids, no Node objects of a graph,
    except the ``node`` each Dispatch names: a Plan re-points those at its own graph's nodes)."""

    node_ids: list[int]
    leaves: list[int]
    constants: list[int]                      # the constants a kernel binds (they get buffers and uploads)
    fusion: Any                               # wgpu_passes.Fusion (read-only once built); None: the plain plan
    fixed: dict[int, np.ndarray]              # values of nodes whose inputs are empty (computed by numpy)
    failing: dict[int, str]
    dispatches: list[Any]                     # wgpu_kernels.Dispatch, in run order
    chain_at: dict[int, int]                  # chain root -> index of its dispatch
    node_sources: dict[int, tuple[str, ...]]  # node -> the WGSL that computes it, in parts (plan.shader_for
    #                                           joins them: a chain's 10 kB kernel is stored once, not per member)
    indexing: list[int]                       # nodes whose integer inputs are range-checked before a run
    slot_sizes: list[int]                     # bytes of each device buffer the plan creates
    slot_of: dict[int, int]                   # node id (or scratch id < 0) -> its buffer's slot
    binds: list[list[tuple[int, int, int]]]   # per dispatch: (binding, buffer owner id, bytes) after the uniform
    params: np.ndarray                        # the uniform buffer's words, one row per dispatch
    out_offsets: list[int]
    staging_size: int
    bytes_owned: int
    bytes_pooled: int
    scratch_bytes: dict[int, int]
    partials: dict[int, dict] = field(default_factory=dict)   # chain root -> the sums whose last stage it does
    updates: dict[tuple, Any] = field(default_factory=dict)   # bind_updates pairs -> its rewrite (pure too)
    launches: dict[tuple, Any] = field(default_factory=dict)  # (pairs, limits) -> wgpu_batch's launches
    passes: list = field(default_factory=list)  # wgpu_passes.PassRecord: what each pass did (plan.passes)
    keep: Any = None                                          # what the key names by id() (see lookup)


def _freeze(v: Any) -> Any:
    """A hashable, exact stand-in for an attribute value (1, 1.0, True and -0.0 vs 0.0 all stay distinct)."""
    if v is None or isinstance(v, (bool, int, str)):
        return (type(v).__name__, v)
    if isinstance(v, float):
        return ("float", repr(v))
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_freeze(x) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple(sorted((str(k), _freeze(x)) for k, x in v.items())))
    if isinstance(v, (np.ndarray, np.generic)):
        a = np.asarray(v)
        return ("ndarray", a.dtype.str, a.shape, a.tobytes())
    if isinstance(v, slice):
        return ("slice", _freeze(v.start), _freeze(v.stop), _freeze(v.step))
    return (type(v).__name__, repr(v))


def _value_key(value: Any) -> Any:
    """A constant's value, exactly (small ones as bytes, large ones by a 128-bit digest of their bytes)."""
    if value is None:
        return None
    a = value if isinstance(value, np.ndarray) else np.asarray(value)
    data = a.tobytes()   # (C order, whatever the strides)
    if len(data) > 64:
        data = hashlib.blake2b(data, digest_size=16).digest()
    return (a.dtype.str, a.shape, data)


def signature(graph: Graph, node_ids: list[int], outputs: list[int]) -> tuple[tuple, tuple]:
    """(key, specs): the structure a plan of ``outputs`` is lowered from — one row per node it reads, in id
    order — and the OpSpec objects of its ops.

    The key names each spec by ``id()``: ``ops.patched`` swaps a spec without a new registry generation,
    and a swapped spec is another object. (An id is only unique while its object lives, so the cache
    entry keeps ``specs`` alive: see :func:`lookup`.)
    """
    nodes, consts = graph.nodes, graph.constants
    rows = []
    ops: dict[str, None] = {}
    for i in node_ids:
        n = nodes[i]
        attrs = _freeze(n.attrs) if n.attrs else None
        value = _value_key(consts.get(i)) if n.op == "constant" else None
        rows.append((i, n.op, tuple(n.inputs), tuple(n.shape), n.dtype, attrs, value))
        ops[n.op] = None
    if "mean" in ops and "layer_norm_dx" in REGISTRY:   # (the pass layer_norm_dx may run that op's kernel)
        ops["layer_norm_dx"] = None
    specs = tuple(spec(op) for op in sorted(ops))
    return (tuple(outputs), tuple(rows), tuple(map(id, specs))), specs


def lookup(key: tuple, build: Callable[[], Lowered], keep: Any = None) -> Lowered:
    """The cached :class:`Lowered` for ``key``, or ``build()``'s (kept for next time, with ``keep``: objects
    whose ``id()`` is part of the key must outlive the entry)."""
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        stats["hits"] += 1
        return hit
    stats["misses"] += 1
    lowered = build()
    lowered.keep = keep
    _CACHE[key] = lowered
    while len(_CACHE) > MAX_ENTRIES:
        _CACHE.popitem(last=False)
    return lowered


def clear() -> None:
    """Forget every lowered plan and reset ``stats``."""
    _CACHE.clear()
    for k in stats:
        stats[k] = 0
