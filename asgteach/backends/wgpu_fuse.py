"""Rewrites the GPU plan makes without touching the graph: fewer copies, fewer passes over memory.

The graph a student sees is the textbook one: ``dW = sum_to(transpose(x) @ g, W.shape)``,
``reshape`` as its own node. Run literally on a GPU, that is three trips through memory
where one would do: a transposed copy of ``x``, a batched product that writes one
(k, n) matrix PER BATCH ELEMENT, and a sum over the batch that reads them all again. The
plan recognises these shapes and computes the same numbers more directly:

* **reshape is free**: a row-major buffer read with another shape is the same bytes, so
  a reshape node shares its input's buffer (an *alias*) and runs no kernel.
* **transposes fold into matmul**: when a matmul operand is ``transpose`` of the last two
  axes, the matmul reads the untransposed buffer with a transposed-load kernel variant.
  A transpose whose every reader folds it is never computed.
* **batched weight gradients are one GEMM**: ``sum_to(transpose(x) @ g, (k, n))`` over
  all batch axes equals ``x_flat^T @ g_flat`` with the batch folded into the inner
  dimension (x (B, T, k) read as (B*T, k)), so the per-batch products and the sum
  become one matrix product written straight into the gradient.
* **elementwise chains are one kernel**: an elementwise value whose ONLY reader is
  another elementwise node of the same shape is never written to memory: the reader's
  kernel computes it in registers (a value asked for as an output is computed there
  too, and also written: an optimizer's new ``m``, ``v`` and parameter are one kernel).
  A scalar with one elementwise reader (``1 - lr * wd``) is recomputed per element
  in that reader's kernel instead of costing a dispatch of its own. Chains of
  such nodes — the GELU backward is eleven of them — become one generated kernel
  (``wgpu_chain``) that reads each outside value once and writes one result. A value
  with several readers ends its chain: it is written once, and each reader's chain
  reads it. ``broadcast_to`` joins a chain as a read through stride-0 axes.

Every rewrite keeps the node in the graph (``plan.shader_for`` still answers for it) and
changes only which kernels run; parity with numpy is tested with the rewrites on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..graph import Graph, Node
from ..ops.registry import spec
from .wgpu_chain import MAX_INPUTS, Chain, fits

__all__ = ["Fusion", "plan_fusion"]


@dataclass
class Fusion:
    """What the plan computes differently from one kernel per node."""

    alias: dict[int, int] = field(default_factory=dict)        # reshape node -> node whose buffer it shares
    operands: dict[int, tuple[tuple[int, bool], tuple[int, bool]]] = field(default_factory=dict)
    # matmul node -> ((buffer node, read transposed?) for A, same for B)
    gemm_sum: dict[int, tuple[int, int]] = field(default_factory=dict)   # sum_to node -> (x node, g node)
    skip: set[int] = field(default_factory=set)                # nodes that run no kernel of their own
    chains: dict[int, Chain] = field(default_factory=dict)      # root node -> the elementwise chain it computes
    chain_of: dict[int, int] = field(default_factory=dict)      # member node (root too) -> its chain's root

    def root(self, nid: int) -> int:
        """The node that owns the buffer ``nid`` lives in."""
        while nid in self.alias:
            nid = self.alias[nid]
        return nid


def _swaps_last_two(n: Node) -> bool:
    axes = tuple(n.attrs.get("axes", ()))
    k = len(axes)
    return n.op == "transpose" and k >= 2 and axes == tuple(range(k - 2)) + (k - 1, k - 2)


def plan_fusion(g: Graph, compute: list[Node], outputs: list[int], max_buffers: int = MAX_INPUTS + 1) -> Fusion:
    """Decide the rewrites for the compute nodes (topological order) of one plan.

    ``max_buffers``: storage buffers one kernel may bind on the device (a chain's inputs and outputs).
    """
    f = Fusion()
    outs = set(outputs)
    readers: dict[int, list[Node]] = {}
    for n in compute:
        for i in set(n.inputs):
            readers.setdefault(i, []).append(n)

    for n in compute:   # reshape: share the input's buffer (outputs keep their own, to be read back)
        if n.op == "reshape" and n.id not in outs:
            f.alias[n.id] = n.inputs[0]
            f.skip.add(n.id)

    def folded(nid: int) -> tuple[int, bool]:
        src = g.nodes[nid]
        if _swaps_last_two(src):
            return src.inputs[0], True
        return nid, False

    absorbed: set[int] = set()   # transposes read in place by at least one consumer
    for n in compute:
        if n.op == "sum_to" and _gemm_sum(g, n, readers, outs):
            m = g.nodes[n.inputs[0]]
            f.gemm_sum[n.id] = (g.nodes[m.inputs[0]].inputs[0], m.inputs[1])
            f.skip.add(m.id)
            absorbed.add(m.inputs[0])
    for n in compute:
        if n.op == "matmul" and n.id not in f.skip and len(g.nodes[n.inputs[0]].shape) >= 2 \
                and len(g.nodes[n.inputs[1]].shape) >= 2:
            ops = (folded(n.inputs[0]), folded(n.inputs[1]))
            f.operands[n.id] = ops
            absorbed.update(i for i, (_, t) in zip(n.inputs, ops) if t)
    for tid in absorbed:   # a transpose nobody reads as a copy is never made
        if tid in outs:
            continue
        if all(_reads_in_place(r, tid, f) for r in readers.get(tid, [])):
            f.skip.add(tid)
    _plan_chains(g, compute, outs, readers, f, max_buffers)
    return f


def _fusable(n: Node) -> bool:
    return n.size > 0 and (spec(n.op).wgsl == "elementwise" or (n.op == "broadcast_to" and n.dtype == "float"))


def _chain(root: int, members: list[int], outs: set[int]) -> Chain:
    return Chain(root, tuple(members), tuple(m for m in members if m in outs and m != root))


def _plan_chains(g: Graph, compute: list[Node], outs: set[int], readers: dict[int, list[Node]], f: Fusion,
                 max_buffers: int) -> None:
    """Group elementwise nodes into chains, each computed by one kernel (see the module docstring)."""
    into: dict[int, int] = {}   # member -> the node that reads it and computes it inline
    for n in compute:
        rs = readers.get(n.id, [])
        if n.id in f.skip or not _fusable(n) or len(rs) != 1:
            continue
        r = rs[0]
        if r.op == "broadcast_to" or not _fusable(r) or r.id in f.skip:
            continue
        if r.shape == n.shape and (n.id not in outs or n.dtype == "float"):
            into[n.id] = r.id   # (a requested output is computed in the chain AND written: a store)
        elif n.size == 1 and n.id not in outs:
            into[n.id] = r.id   # a scalar (1 - lr * wd) is recomputed per element: cheaper than a dispatch
    order = {n.id: k for k, n in enumerate(compute)}
    while True:
        groups: dict[int, list[int]] = {}
        absorbing = set(into.values())
        for n in compute:
            if n.id in into or n.id in absorbing:
                root = n.id
                while root in into:
                    root = into[root]
                groups.setdefault(root, []).append(n.id)
        too_big = [(root, members) for root, members in groups.items()
                   if len(members) > 1 and not fits(g, _chain(root, members, outs), max_buffers)]
        if not too_big:
            break
        for _, members in too_big:   # cut a member loose: it runs as its own kernel (or chain). An output
            stores = [m for m in members[:-1] if m in outs]   # first: it is written anyway
            into.pop(min(stores or members[:-1], key=order.__getitem__))
    for root, members in groups.items():
        if len(members) < 2:
            continue
        f.chains[root] = _chain(root, members, outs)
        for m in members:
            f.chain_of[m] = root
            if m != root:
                f.skip.add(m)


def _reads_in_place(reader: Node, tid: int, f: Fusion) -> bool:
    if reader.id in f.skip and reader.op == "matmul":   # absorbed into a gemm_sum that reads x directly
        return all(tid != i or k == 0 for k, i in enumerate(reader.inputs))
    ops = f.operands.get(reader.id)
    return ops is not None and all(t for i, (_, t) in zip(reader.inputs, ops) if i == tid)


def _gemm_sum(g: Graph, s: Node, readers: dict[int, list[Node]], outs: set[int]) -> bool:
    """Is ``s`` = sum_to(transpose(x) @ b, (k, n)) over every batch axis, foldable into one GEMM?"""
    m = g.nodes[s.inputs[0]]
    if m.op != "matmul" or m.id in outs or len(readers.get(m.id, [])) != 1 or len(m.shape) < 3:
        return False
    a, b = (g.nodes[i] for i in m.inputs)
    batch = m.shape[:-2]
    return (tuple(s.attrs["shape"]) == m.shape[-2:] and _swaps_last_two(a) and len(a.shape) == len(m.shape)
            and len(b.shape) == len(m.shape) and a.shape[:-2] == batch and b.shape[:-2] == batch
            and not _swaps_last_two(b))
