"""What the passes rewrite: the plan's kernel list, and the record of why each change was made.

The optimised plan starts as the plain plan (``wgpu_plain``): one entry per compute node,
in graph order, each saying "this node's own kernel" (:func:`own_kernel`). A pass then
edits that list (:class:`Rewriting`):

* **removes** a node's kernel (``remove``): its value is a free view of another buffer, or
  another kernel computes it on the way; a note says which, for ``plan.shader_for``;
* **replaces** how a node's kernel is made (``kernels[node] = maker``): a matmul that reads
  transposed operands in place, one GEMM for a batched weight gradient, a fused chain;
* writes what it decided into the :class:`Fusion` record (``plan.fusion``): which buffer a
  reshape shares, which transposes a matmul reads through, which nodes a chain computes...
  The makers read it when the kernels are finally written, and tests and lessons read it.

A *maker* is a function ``(ctx, node, tile) -> Made``: the node's dispatches and the
buffers they read. Nothing is lowered until every pass has run, because a later pass
may still change an earlier one's kernel (the epilogue pass adds a bias to a matmul
whose operands the transposes pass chose).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ...graph import Graph, Node
from ..wgpu_chain import MAX_INPUTS, Chain
from ..wgpu_kernels import Dispatch, family_of, lower, matmul_dispatches
from ..wgpu_matmul import Tile

__all__ = ["Fusion", "Rewriting", "Made", "Maker", "own_kernel", "matmul_kernel"]


@dataclass
class Fusion:
    """What the optimised plan computes differently from one kernel per node (``plan.fusion``)."""

    alias: dict[int, int] = field(default_factory=dict)        # node -> node whose buffer it shares
    operands: dict[int, tuple[tuple, tuple]] = field(default_factory=dict)
    # matmul node -> ((buffer node, read transposed?, row stride, batch strides) for A, same for B);
    # strides None: the buffer is the operand itself, contiguous
    read_through: dict[int, int] = field(default_factory=dict)   # skipped transpose -> the kernel reading it
    out_views: dict[int, tuple[int, tuple, bool]] = field(default_factory=dict)
    # matmul -> (row stride, batch strides, swapped?): it writes its result in the layout of the last of the
    # transposes that read it (that transpose shares the matmul's buffer)
    written_by: dict[int, int] = field(default_factory=dict)   # such a transpose -> the matmul that writes it
    products: dict[int, tuple[int, int]] = field(default_factory=dict)
    # sum / mean / sum_to node -> (a, b): it reduces a * b, multiplying while it reads (the mul runs no kernel)
    gemm_sum: dict[int, tuple[int, int]] = field(default_factory=dict)   # sum_to node -> (x node, g node)
    bias: dict[int, int] = field(default_factory=dict)       # matmul -> the (N,) node its epilogue adds to each row
    resid: dict[int, int] = field(default_factory=dict)      # matmul (or layer_norm_dx) -> a node of its shape added
    mat: dict[int, int] = field(default_factory=dict)        # matmul -> a (M, N) matrix added to every batch's C
    scale: dict[int, int] = field(default_factory=dict)      # matmul -> a scalar constant C is multiplied by first
    zero: dict[int, tuple[str, ...]] = field(default_factory=dict)
    # matmul -> where its A or B is zero, or C unused, on one side of the diagonal (wgpu_matmul.ZERO_RULES)
    causal: set[int] = field(default_factory=set)
    # softmax nodes of causal attentions (pass causal_tiles): each (T, T) matrix of the result is exactly 0 above
    # its diagonal, whatever the input holds there
    bias_add: dict[int, int] = field(default_factory=dict)   # such an add -> the kernel's node (it shares its buffer)
    skip: set[int] = field(default_factory=set)                # nodes that run no kernel of their own
    shortcuts: dict[int, tuple[str, tuple[int, ...], dict]] = field(default_factory=dict)
    # node -> (op, inputs, attrs): "this node is that op of those nodes"; that op's kernel computes it
    provides: dict[int, dict[str, int]] = field(default_factory=dict)   # shortcut node -> {role: node it also writes}
    provided_by: dict[int, int] = field(default_factory=dict)   # such a by-product node -> the shortcut node
    dead: dict[int, int] = field(default_factory=dict)   # node no running kernel needs -> the shortcut that made it so
    chains: dict[int, Chain] = field(default_factory=dict)      # root node -> the elementwise chain it computes
    chain_of: dict[int, int] = field(default_factory=dict)      # member node (root too) -> its chain's root

    def root(self, nid: int) -> int:
        """The node that owns the buffer ``nid`` lives in."""
        while nid in self.alias:
            nid = self.alias[nid]
        return nid


@dataclass
class Made:
    """A kernel-list entry lowered: the node's dispatches, the buffers they read, what ``shader_for`` shows."""

    dispatches: list[Dispatch]
    reads: list[int]
    first: bool = False                 # the WGSL shown is the first dispatch's (else the last one's)
    note: str = ""                      # a comment put before that WGSL
    chain: tuple[str, ...] | None = None   # a fused chain's (header, WGSL): shown for every member


Maker = Callable[["Rewriting", Node, Tile], Made]


def own_kernel(ctx: "Rewriting", n: Node, tile: Tile) -> Made:
    """The plain plan's entry: the node's own kernel (``wgpu_kernels.lower``), its inputs read where they live."""
    root = ctx.f.root
    return Made(lower(ctx.graph, n, family_of(n.op), tile), [root(i) for i in n.inputs])


def matmul_kernel(ctx: "Rewriting", n: Node, tile: Tile) -> Made:
    """A matmul as the passes left it: operands read in place (``transposes``), its result written in a
    transpose's layout (``out_views``), a scale and adds applied as it stores (``epilogue``), K tiles of zeros
    left out (``causal_tiles``)."""
    f, root, g = ctx.f, ctx.f.root, ctx.graph
    ops = tuple((root(i), *rest) for i, *rest in f.operands[n.id]) if n.id in f.operands else None
    reads = [v[0] for v in ops] if ops is not None else [root(i) for i in n.inputs]
    bias = root(f.bias[n.id]) if n.id in f.bias else None
    resid = root(f.resid[n.id]) if n.id in f.resid else None
    mat = root(f.mat[n.id]) if n.id in f.mat else None
    scale = float(np.asarray(g.constants[f.scale[n.id]]).reshape(())) if n.id in f.scale else None
    ds = matmul_dispatches(g, n, tile, ops, f.out_views.get(n.id), bias, resid, mat, scale,
                           f.zero.get(n.id, ())) if n.size else []
    return Made(ds, reads + [v for v in (bias, resid, mat) if v is not None])


class Rewriting:
    """The kernel list the passes edit, and what they need to look at (one object per plan build).

    ``compute``: the compute nodes in graph order; ``kernels``: node -> its maker, for every node
    that still runs a kernel (the plain plan: every compute node, :func:`own_kernel`);
    ``readers``: node -> the compute nodes reading it; ``notes``: removed node -> (why, the nodes
    whose kernels do its work) for ``plan.shader_for``.
    """

    def __init__(self, graph: Graph, compute: list[Node], outputs: list[int],
                 max_buffers: int = MAX_INPUTS + 1) -> None:
        self.graph, self.compute, self.max_buffers = graph, list(compute), max_buffers
        self.outs = set(outputs)
        self.f = Fusion()
        self.kernels: dict[int, Maker] = {n.id: own_kernel for n in compute}
        self.notes: dict[int, tuple[str, tuple[int, ...]]] = {}
        self.readers: dict[int, list[Node]] = {}
        self.find_readers()
        # shared by the matmul passes: transpose -> the kernel that reads through it (weight_gemm, transposes),
        # and the transposes a matmul writes (out_views: they are buffers, operand walks stop there)
        self.absorbed: dict[int, int] = {}
        self.written: set[int] = set()

    def find_readers(self) -> None:
        """Who reads each node, among the nodes still computed (a shortcut reads its op's inputs)."""
        self.readers = {}
        for n in self.compute:
            for i in set(self.f.shortcuts[n.id][1] if n.id in self.f.shortcuts else n.inputs):
                self.readers.setdefault(i, []).append(n)

    def read_in_place(self, nid: int, *by: int) -> None:
        """Node ``nid`` runs no kernel: the kernels of ``by`` (first one computed wins) read its inputs instead."""
        n = self.graph.nodes[nid]
        self.remove(nid, f"// {n.op} (node #{nid}) runs no kernel of its own: the kernel below, which reads it, "
                         f"reads its operands in place\n", *by)

    def remove(self, nid: int, note: str, *by: int) -> None:
        """Node ``nid`` runs no kernel of its own; ``note`` says why, ``by``: kernels that do its work."""
        self.f.skip.add(nid)
        self.kernels.pop(nid, None)
        self.notes[nid] = (note, by)

    def running(self) -> int:
        """How many entries the kernel list has now."""
        return len(self.kernels)
