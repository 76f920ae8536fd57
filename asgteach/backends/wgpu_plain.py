"""The plain GPU plan: one kernel per compute node, each generated from its op's record.

``at.compile(outputs, backend="wgpu", optimize=False)`` runs this plan. It is the GPU
backend with nothing clever in it, and it reads top to bottom:

1. walk the compute nodes in graph order (every input is computed before its readers);
2. for each node, ask its op's record which kernel family computes it
   (``wgpu_kernels.family_of``: "elementwise", "reduce", "matmul", "copy"...) and let
   ``wgpu_kernels.lower`` write that kernel for this node: the WGSL (an elementwise op's
   formula pasted into ``shaders/elementwise.wgsl``), its 64 uniform words (shapes,
   strides) and which buffer sits at which binding. A node's kernel reads its inputs'
   buffers and writes its own;
3. give every value a buffer and write the uniform words (``wgpu_memory``).

A ``reshape`` is a copy kernel here, a ``transpose`` feeding a matmul is a real
transposed copy, a bias add after a matmul is a pass over memory of its own, and the
GELU backward is eleven kernels. Every one of those costs a trip through GPU memory;
the optimised plan (``wgpu_passes``) starts from exactly this list of kernels and
rewrites it, one pass at a time, and ``plan.passes`` says what each pass did. Compare
``plan.shader_for(node)`` in both plans to see what a pass changed for one node.

(Two kernel families sometimes need two dispatches for one node: a reduction too long
for one workgroup sums partial results first, ``embedding_grad`` clears its output
before adding rows into it. Those are still the node's own kernel.)
"""

from __future__ import annotations

from typing import Any

from ..graph import Graph
from ..ops.registry import spec
from . import wgpu_plan_cache as plan_cache
from .wgpu_kernels import Dispatch, family_of, lower
from .wgpu_matmul import Tile
from .wgpu_memory import KernelList, empty_input_values, memory_plan

__all__ = ["plain_kernels", "lower_plain"]


def plain_kernels(graph: Graph, node_ids: list[int], tile: Tile) -> KernelList:
    """One kernel (its dispatches) per compute node of ``node_ids`` (graph order), each reading its inputs."""
    compute = [graph.nodes[i] for i in node_ids if not spec(graph.nodes[i].op).leaf]
    # a node whose inputs are all empty (a sum over zero rows) has a value that depends on no data: numpy
    # computes it once, and it is uploaded like a constant (see wgpu_memory.empty_input_values)
    fixed, failing = empty_input_values(graph, compute)
    dispatches: list[Dispatch] = []
    running = []
    reads: dict[int, list[int]] = {}
    sources: dict[int, tuple[str, ...]] = {}
    for node in compute:
        if node.id in fixed:
            sources[node.id] = (f"// {node.op} (node #{node.id}) runs no kernel: its inputs are empty, so its value "
                                f"depends on no data; it was computed once, as numpy computes it\n",)
            continue
        kernel = lower(graph, node, family_of(node.op), tile)   # [] for a node with no elements
        dispatches.extend(kernel)
        running.append(node)
        reads[node.id] = list(node.inputs)
        if kernel:
            sources[node.id] = (kernel[-1].source,)
    return KernelList(dispatches, running, reads, sources, fixed, failing)


def lower_plain(graph: Graph, outputs: list[int], node_ids: list[int], tile: Tile, uniform_align: int,
                prefetch: Any = None) -> plan_cache.Lowered:
    """The plain plan's pure part: its kernels, then buffers and uniform words (``wgpu_memory``).

    ``prefetch(key, source, entry)`` is told each kernel (the driver compiles it on a worker thread).
    """
    kernels = plain_kernels(graph, node_ids, tile)
    for d in kernels.dispatches if prefetch is not None else ():
        prefetch(d.key, d.source, d.entry)
    return memory_plan(graph, outputs, node_ids, kernels, uniform_align, fusion=None, chain_at={}, passes=[])
