"""The optimised GPU plan: the plain plan's kernel list, rewritten by ordered passes.

``at.compile(outputs, backend="wgpu")`` starts where the plain plan (``wgpu_plain``) does:
one kernel per compute node. Each pass below then rewrites that list: it removes kernels
whose work another kernel can do on the way, or replaces a node's kernel by a better one.
Each pass is one module whose docstring says what it rewrites and why it pays, and
``plan.passes`` lists what each one did to this plan (kernels before and after):

====================  ================================================================
``layer_norm_dx``     LayerNorm's input gradient (a dozen nodes) -> its one kernel
``attention``         attention, forward and backward -> fused kernels (long sequences)
``causal_tiles``      causal attention's products leave out the tiles that add only zeros;
                      its softmax and softmax backward read only keys j <= i
``softmax_grad``      softmax's backward (last axis, * a scale) -> one kernel, a pass per row
``free_reshapes``     a reshape shares its input's buffer: no copy
``weight_gemm``       sum_to(transpose(x) @ g) -> one GEMM over the whole batch
``out_views``         a matmul writes straight into the layout of the transposes reading it
``transposes``        a matmul reads transposed operands in place; unread transposes vanish
``epilogue``          + bias, + residual, * scale applied as the matmul stores its result
``chains``            elementwise chains -> one generated kernel each
``products``          sum(a * b) multiplies while it reads
``wide_elementwise``  a large lone elementwise node -> four elements per thread
``partial_sums``      (on the lowered list) a chain adds up the split sums it reads
====================  ================================================================

The order matters: a later pass looks at what earlier ones did (``out_views`` and
``transposes`` leave alone the matmuls ``weight_gemm`` folded; ``products`` leaves alone a
mul a chain computes; ``softmax_grad`` takes the softmax backward as the rule built it, after
``causal_tiles`` has read that graph and before ``chains`` and ``products`` split it in two
kernels). At run time, ``wgpu_batch`` batches launches of the same code (the ``batch`` line of
``plan.passes``, once the plan has run) and ``bind_updates`` lets update kernels write in place
(``in_place``).

Every rewrite keeps the graph as it is (``plan.shader_for`` still answers for every
node) and changes only which kernels run; the GPU parity tests run both plans.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ...graph import Graph
from ...ops.registry import spec
from .. import wgpu_plan_cache as plan_cache
from ..wgpu_kernels import Dispatch
from ..wgpu_matmul import Tile
from ..wgpu_memory import KernelList, empty_input_values, memory_plan
from . import (attention, causal_tiles, chains, epilogue, free_reshapes, layer_norm_dx, out_views, partial_sums,
               products, softmax_grad, transposes, weight_gemm, wide_elementwise)
from .rewrites import Fusion, Rewriting

__all__ = ["PASSES", "NAMES", "PassRecord", "PassList", "Fusion", "Rewriting", "rewrite", "select", "lower_optimised"]

#: the passes over the kernel list, in the order they run (each module: ``NAME``, ``run(ctx) -> str``)
PASSES: tuple[ModuleType, ...] = (layer_norm_dx, attention, causal_tiles, softmax_grad, free_reshapes, weight_gemm,
                                  out_views, transposes, epilogue, chains, products, wide_elementwise)


#: every pass's name, in order: those of PASSES, then partial_sums (it runs on the lowered kernels)
NAMES: tuple[str, ...] = (*(p.NAME for p in PASSES), partial_sums.NAME)


def select(names: Any = None) -> tuple[str, ...]:
    """The passes named (any order; None: all of them), in the order they run. A test runs one alone this way."""
    if names is None:
        return NAMES
    names = {names} if isinstance(names, str) else set(names)
    unknown = names - set(NAMES)
    if unknown:
        raise ValueError(f"no GPU pass named {sorted(unknown)}; the passes are {', '.join(NAMES)}")
    return tuple(n for n in NAMES if n in names)


@dataclass(frozen=True)
class PassRecord:
    """What one pass did to one plan: its name, the size of the list before and after, and what it rewrote."""

    name: str
    before: int
    after: int
    rewrote: str
    unit: str = "kernels"

    def __str__(self) -> str:
        return f"{self.name:<17} {self.unit:<10} {self.before:>5} -> {self.after:<5} {self.rewrote}"


class PassList(list):
    """``plan.passes``: a list of :class:`PassRecord`, printed as a table (one line per pass)."""

    def __str__(self) -> str:
        if not self:
            return "no passes: the plain plan (one kernel per compute node)"
        return "\n".join(f"{i:>2}. {r}" for i, r in enumerate(self, 1))

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:   # IPython / Jupyter print the table
        p.text(str(self))


def rewrite(graph: Graph, compute: list, outputs: list[int], max_buffers: int,
            passes: tuple[ModuleType, ...] = PASSES) -> tuple[Rewriting, PassList]:
    """Run ``passes`` over the plain kernel list of ``compute`` (graph order); each is recorded."""
    ctx = Rewriting(graph, compute, outputs, max_buffers)
    records = PassList()
    for p in passes:
        before = ctx.running()
        what = p.run(ctx)
        records.append(PassRecord(p.NAME, before, ctx.running(), what))
    return ctx, records


def _make(ctx: Rewriting, tile: Tile, prefetch: Any) -> tuple[KernelList, dict[int, int]]:
    """Lower the rewritten list: each remaining entry's maker writes its dispatches."""
    g, f = ctx.graph, ctx.f
    compute = [n for n in ctx.compute if n.id in ctx.kernels]
    fixed, failing = empty_input_values(g, compute)
    dispatches: list[Dispatch] = []
    chain_at: dict[int, int] = {}   # chain root -> the index of its dispatch
    sources: dict[int, tuple[str, ...]] = {}
    reads: dict[int, list[int]] = {}
    running = []
    for n in compute:
        if n.id in fixed:
            sources[n.id] = (f"// {n.op} (node #{n.id}) runs no kernel: its inputs are empty, so its value depends "
                             f"on no data; it was computed once, as numpy computes it, and is uploaded like a "
                             f"constant\n",)
            continue
        running.append(n)
        made = ctx.kernels[n.id](ctx, n, tile)
        reads[n.id] = made.reads
        if made.chain is not None:
            chain_at[n.id] = len(dispatches)
            for m in f.chains[n.id].members:
                sources[m] = made.chain
            dispatches.extend(made.dispatches)   # (prefetched below: partial_sums may still rewrite it)
            continue
        dispatches.extend(made.dispatches)
        for d in made.dispatches if prefetch is not None else ():
            if d.entry != "sum_t":   # (a split GEMM's last stage may be dropped by partial_sums)
                prefetch(d.key, d.source, d.entry)
        if made.dispatches:   # the kernel that does the node's work (a split GEMM's sum comes after it)
            text = made.dispatches[0 if made.first else -1].source
            sources[n.id] = (made.note, text) if made.note else (text,)
    for nid, (note, by) in ctx.notes.items():   # what runs no kernel says which kernel does its work
        shown = next((sources[k] for k in by if k in sources), ())
        sources[nid] = (note, *shown)
    writes_too = {k: dict(v) for k, v in f.provides.items()}
    return KernelList(dispatches, running, reads, sources, fixed, failing, writes_too, set(), f.root), chain_at


def lower_optimised(graph: Graph, outputs: list[int], node_ids: list[int], tile: Tile, max_storage_buffers: int,
                    uniform_align: int, prefetch: Any = None, names: tuple[str, ...] = NAMES) -> plan_cache.Lowered:
    """The optimised plan's pure part: passes, kernels, ``partial_sums``, then the memory plan (``wgpu_memory``).

    ``prefetch(key, source, entry)`` is told each kernel as soon as it is known (``Gpu.prefetch``: the
    driver compiles it on another thread while this one lowers the rest). ``names``: the passes that run
    (:func:`select`); the others are left out.
    """
    compute = [graph.nodes[i] for i in node_ids if not spec(graph.nodes[i].op).leaf]
    ctx, records = rewrite(graph, compute, outputs, max_storage_buffers, tuple(p for p in PASSES if p.NAME in names))
    kernels, chain_at = _make(ctx, tile, prefetch)
    partials: dict[int, dict] = {}
    if partial_sums.NAME in names:
        before = len(kernels.dispatches)
        kernels.dispatches, chain_at, partials = partial_sums.apply(
            graph, ctx.f, kernels.dispatches, chain_at, outputs, kernels.reads, kernels.sources)
        records.append(PassRecord(partial_sums.NAME, before, len(kernels.dispatches),
                                  f"{sum(len(v) for v in partials.values())} split sum(s) added up by the chain "
                                  f"reading them (their last stage does not run)", "dispatches"))
    kernels.unbound = {s for stages in partials.values() for s in stages}   # sums whose value no kernel writes
    for d in kernels.dispatches if prefetch is not None else ():
        if d.key[0] == "fused" or d.entry == "sum_t":
            prefetch(d.key, d.source, d.entry)
    return memory_plan(graph, outputs, node_ids, kernels, uniform_align, fusion=ctx.f, chain_at=chain_at,
                       partials=partials, passes=records)
