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
  Chains of transposes fold too, whenever one of the operand's last two axes ends up
  contiguous in the buffer: attention's head split ``transpose(reshape(x, (B, T, H, dh)),
  (0, 2, 1, 3))`` is read straight from ``x`` with a row stride of H * dh. A transpose
  that no kernel reads as a buffer is never computed.
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
* **a Linear layer's bias and a residual are added as the product is stored**: ``x @ W + b`` with
  ``b`` of shape (N,), where the add is the product's only reader, runs as one matmul kernel whose
  epilogue adds ``b`` to each row it writes; so does ``x @ W + b + r`` (or ``x @ W + r``) with ``r``
  of the product's shape, a residual connection (and, backward, a gradient arriving by two paths).
  Each add shares the matmul's buffer and runs no kernel (a pass over the result saved per add).
* **a backward rule may name one kernel for a whole subgraph**: layer_norm's rule builds dx from
  a dozen small ops (the reader sees the formula), and marks dx as ``layer_norm_dx(g, x, w)``
  (``node.meta["shortcut"]``). The plan then runs that op's ONE kernel for dx, which also writes
  the ``x_hat`` the rule computed on the way when ``dw`` still reads it, and every node whose only
  use was dx runs no kernel at all. The graph is unchanged; only what the GPU runs is.
* **a sum or mean of a product multiplies while it reads**: ``mean(g * xhat)`` (the LayerNorm
  backward) and ``sum(g * y)`` (the softmax backward) read ``g`` and the other factor and
  reduce their product; the ``mul`` is never written to memory.

Every rewrite keeps the node in the graph (``plan.shader_for`` still answers for it) and
changes only which kernels run; parity with numpy is tested with the rewrites on.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

import numpy as np

from ..graph import Graph, Node
from ..ops.registry import spec
from .wgpu_chain import ELEMS_FROM, MAX_INPUTS, Chain, fits
from .wgpu_kernels import broadcast_strides, collapse, contiguous_strides, ew_attr_values, reduces_by_adding

__all__ = ["ChainCost", "Fusion", "plan_fusion"]


@dataclass
class Fusion:
    """What the plan computes differently from one kernel per node."""

    alias: dict[int, int] = field(default_factory=dict)        # reshape node -> node whose buffer it shares
    operands: dict[int, tuple[tuple, tuple]] = field(default_factory=dict)
    # matmul node -> ((buffer node, read transposed?, row stride, batch strides) for A, same for B);
    # strides None: the buffer is the operand itself, contiguous
    read_through: dict[int, int] = field(default_factory=dict)   # skipped transpose -> the kernel reading it
    out_views: dict[int, tuple[int, tuple, bool]] = field(default_factory=dict)
    # matmul -> (row stride, batch strides, swapped?): it writes its result in the layout of the last of the
    # transposes that read it (that transpose shares the matmul's buffer; see _out_view)
    written_by: dict[int, int] = field(default_factory=dict)   # such a transpose -> the matmul that writes it
    products: dict[int, tuple[int, int]] = field(default_factory=dict)
    # sum / mean / sum_to node -> (a, b): it reduces a * b, multiplying while it reads (the mul runs no kernel)
    gemm_sum: dict[int, tuple[int, int]] = field(default_factory=dict)   # sum_to node -> (x node, g node)
    bias: dict[int, int] = field(default_factory=dict)       # matmul -> the (N,) node its epilogue adds to each row
    resid: dict[int, int] = field(default_factory=dict)      # matmul -> the node of its shape its epilogue adds
    mat: dict[int, int] = field(default_factory=dict)        # matmul -> a (M, N) matrix added to every batch's C
    scale: dict[int, int] = field(default_factory=dict)      # matmul -> a scalar constant C is multiplied by first
    bias_add: dict[int, int] = field(default_factory=dict)   # such an add -> the matmul (it shares the matmul's buffer)
    skip: set[int] = field(default_factory=set)                # nodes that run no kernel of their own
    shortcuts: dict[int, tuple[str, tuple[int, ...], dict]] = field(default_factory=dict)
    # node -> (op, inputs, attrs): a backward rule's mark "this node is that op of those nodes"; its kernel runs
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
    compute = _take_shortcuts(g, compute, outs, f)
    readers: dict[int, list[Node]] = {}
    for n in compute:   # (a shortcut node reads its mark's inputs, not the nodes of its rule)
        for i in set(f.shortcuts[n.id][1] if n.id in f.shortcuts else n.inputs):
            readers.setdefault(i, []).append(n)

    for n in compute:   # reshape: share the input's buffer (outputs keep their own, to be read back)
        if n.op == "reshape" and n.id not in outs:
            f.alias[n.id] = n.inputs[0]
            f.skip.add(n.id)

    absorbed: dict[int, int] = {}   # transpose -> the node whose kernel reads through it
    for n in compute:
        if n.op == "sum_to" and _gemm_sum(g, n, readers, outs):
            m = g.nodes[n.inputs[0]]
            f.gemm_sum[n.id] = (g.nodes[m.inputs[0]].inputs[0], m.inputs[1])
            f.skip.add(m.id)
            absorbed[m.inputs[0]] = n.id
    stop: set[int] = set()          # transposes a matmul writes: operand walks stop there (it is a buffer)
    kept = outs | set(absorbed)     # (a gemm_sum reads its x as it is)
    for n in compute:
        if n.op == "matmul" and n.size > 0 and n.id not in outs and n.id not in f.skip and len(n.shape) >= 2 \
                and all(len(g.nodes[i].shape) >= 2 and g.nodes[i].size > 0 for i in n.inputs):
            found = _out_view(g, n, readers, kept)
            if found is not None:
                view, chain = found
                f.out_views[n.id] = view
                f.alias[chain[-1]] = n.id
                for t in chain:
                    f.written_by[t] = n.id
                    stop.add(t)
                f.skip.update(chain)
    for n in compute:
        if n.op == "matmul" and n.id not in f.skip and len(g.nodes[n.inputs[0]].shape) >= 2 \
                and len(g.nodes[n.inputs[1]].shape) >= 2:
            ops = []
            for i in n.inputs:
                view, through = _view(g, i, stop)
                ops.append(view)
                absorbed.update((t, n.id) for t in through)
            f.operands[n.id] = tuple(ops)
    # a transpose is computed only if some kernel reads its buffer: walk back from the outputs
    needed = set(outs)
    for n in reversed(compute):
        if n.id in f.written_by:   # the matmul that writes it runs anyway
            continue
        if (n.id in absorbed or n.id in f.alias) and n.id not in needed:
            if n.id in absorbed:
                f.skip.add(n.id)
                f.read_through[n.id] = absorbed[n.id]
            continue
        if n.id in f.skip:   # a matmul folded into a gemm_sum: the sum_to reads its operands
            continue
        if n.id in f.gemm_sum:
            needed.update(f.gemm_sum[n.id])
        elif n.id in f.operands:
            needed.update(v[0] for v in f.operands[n.id])
        else:
            needed.update(f.shortcuts[n.id][1] if n.id in f.shortcuts else n.inputs)
    for n in compute:   # x @ W + b (+ r): the matmul adds b and r as it stores C, the adds run no kernel
        found = _epilogue_of(g, n, readers, outs, f)
        if found is not None:
            parts, adds = found
            for kind, table in (("row", f.bias), ("full", f.resid), ("mat", f.mat), ("scale", f.scale)):
                if kind in parts:
                    table[n.id] = parts[kind]
            for add in adds:
                f.bias_add[add] = n.id
                f.alias[add] = n.id
                f.skip.add(add)
    _shortcut_sums(g, compute, readers, outs, f)
    _plan_chains(g, compute, outs, readers, f, max_buffers)
    for n in compute:   # sum(a * b), mean(a * b): the reduction multiplies while it reads
        if not reduces_by_adding(n) or n.id in f.skip:
            continue
        x = g.nodes[n.inputs[0]]
        if x.op != "mul" or x.id in outs or x.id in f.skip or x.id in f.chain_of or x.id in f.shortcuts or x.size == 0 \
                or x.dtype != "float" or len(readers.get(x.id, [])) != 1:
            continue
        a, b = (g.nodes[i] for i in x.inputs)
        if a.shape == b.shape == x.shape and a.dtype == b.dtype == "float":
            f.products[n.id] = (a.id, b.id)
            f.skip.add(x.id)
            f.read_through[x.id] = n.id
    for n in compute:   # a large elementwise node on its own runs as a chain of one: four elements per thread
        if n.size >= ELEMS_FROM and n.op != "broadcast_to" and _fusable(n) and n.id not in f.skip \
                and n.id not in f.chain_of and n.id not in f.shortcuts and n.dtype == "float" \
                and fits(g, _chain(n.id, [n.id], outs), max_buffers):
            f.chains[n.id] = _chain(n.id, [n.id], outs)
            f.chain_of[n.id] = n.id
    return f


def _shortcut_sums(g: Graph, compute: list[Node], readers: dict[int, list[Node]], outs: set[int], f: Fusion) -> None:
    """``layer_norm_dx(...) + r``: the shortcut's kernel adds r as it writes dx, and the add runs no kernel.

    A residual block's input gets its gradient from two paths, the skip connection (r) and the
    LayerNorm in front of the branch (dx), so the backward graph adds them. When dx is read only by
    that add and r is computed before the shortcut's kernel runs, that kernel stores dx + r (the
    same sum, one rounding) into its own buffer, which the add's readers then read.
    """
    order = {n.id: k for k, n in enumerate(compute)}
    for n in compute:
        if n.op != "add" or n.id in outs or n.id in f.skip or n.dtype != "float" \
                or any(g.nodes[i].shape != n.shape for i in n.inputs) or n.inputs[0] == n.inputs[1]:
            continue
        for s, r in (n.inputs, n.inputs[::-1]):
            if f.shortcuts.get(s, ("",))[0] != "layer_norm_dx" or s in outs or s in f.resid \
                    or [x.id for x in readers.get(s, [])] != [n.id]:
                continue
            owner = f.root(r)
            if g.nodes[r].dtype != "float" or r in f.provided_by or \
                    not (spec(g.nodes[owner].op).leaf or order.get(owner, len(order)) < order[s]):
                continue
            f.resid[s] = r
            f.bias_add[n.id] = s
            f.alias[n.id] = s
            f.skip.add(n.id)
            break


def _out_view(g: Graph, m: Node, readers: dict[int, list[Node]], outs: set[int]) -> tuple | None:
    """Can matmul ``m`` write its result straight into the layout of the transposes that read it?

    ``m`` -> transpose -> ... -> transpose, each the single reader of the one before and
    none of them a requested output (attention's head merge ``transpose(heads, (0, 2, 1, 3))``
    and the head-split gradients). Each of ``m``'s axes then has a stride in the last
    transpose's row-major buffer. When its last axis has stride 1, C is stored with a row
    stride; when its second-to-last has, C^T = B^T @ A^T is stored that way instead.
    Returns ((row stride, batch strides, swapped?), the transposes) or None.
    """
    chain: list[int] = []
    cur = m
    while True:
        rs = readers.get(cur.id, [])
        if len(rs) != 1 or rs[0].op != "transpose" or rs[0].id in outs or cur.id in outs:
            break
        cur = rs[0]
        chain.append(cur.id)
    if not chain:
        return None
    rank = len(m.shape)
    strides = _contiguous(g.nodes[chain[-1]].shape)   # of the last transpose's axes, in its buffer
    for t in reversed(chain):
        perm = tuple(g.nodes[t].attrs["axes"])
        if len(perm) != rank:
            return None
        back = [0] * rank
        for i, p in enumerate(perm):
            back[p] = strides[i]
        strides = back
    if strides[-1] == 1:
        return (strides[-2], tuple(strides[:-2]), False), chain
    if strides[-2] == 1:
        return (strides[-1], tuple(strides[:-2]), True), chain
    return None


def _contiguous(shape: tuple) -> list[int]:
    return [int(v) for v in np.cumprod((1,) + tuple(shape[:0:-1]))[::-1]] if shape else []


def _view(g: Graph, nid: int, stop: set[int] = frozenset()) -> tuple[tuple, list[int]]:
    """How a matmul reads operand ``nid`` with the fewest copies: through a chain of transposes.

    Returns ((buffer node, transposed?, row stride, batch strides), the transposes read
    through). Following ``transpose`` nodes back to a buffer, each operand axis gets a stride
    in that buffer; the matmul can read it in place when one of the last two axes has
    stride 1 (the other's stride is the row stride the kernel takes). The (0, 2, 1, 3)
    head split of attention is such a view: a head (T, dh) of the (B, T, H * dh)
    projection is T rows of dh values, H * dh apart.
    """
    best: tuple = ((nid, False, None, None), [])
    rank = len(g.nodes[nid].shape)
    axmap = list(range(rank))   # operand axis -> axis of the node walked to
    cur, through = nid, []
    while g.nodes[cur].op == "transpose" and cur not in stop:
        perm = tuple(g.nodes[cur].attrs["axes"])
        if len(perm) != rank:
            break
        through.append(cur)
        axmap = [perm[a] for a in axmap]
        cur = g.nodes[cur].inputs[0]
        st = _contiguous(g.nodes[cur].shape)
        strides = [st[a] for a in axmap]
        if strides[-1] == 1:
            best = ((cur, False, strides[-2], tuple(strides[:-2])), list(through))
        elif strides[-2] == 1:
            best = ((cur, True, strides[-1], tuple(strides[:-2])), list(through))
    return best


def _shortcut_of(g: Graph, n: Node, order: dict[int, int]) -> tuple[str, tuple[int, ...], dict, dict] | None:
    """``n``'s shortcut mark when its op exists and its inputs, read in this plan before ``n``, fit the op's
    shape rule with ``n``'s shape; None otherwise (the nodes of the rule then run as they are)."""
    mark = n.meta.get("shortcut")
    if not mark:
        return None
    try:
        op = spec(mark["op"])
        inputs = tuple(int(i) for i in mark["inputs"])
        attrs = {**op.attrs, **dict(mark.get("attrs", {}))}
        ready = [spec(g.nodes[i].op).leaf or order.get(i, len(order)) < order[n.id] for i in inputs]
        if op.gpu.kernel != "layer_norm" or not all(ready) \
                or op.infer(*(g.nodes[i].shape for i in inputs), **attrs) != n.shape or n.dtype != "float":
            return None
    except (KeyError, TypeError, ValueError):
        return None
    return mark["op"], inputs, attrs, dict(mark.get("stores", {}))


def _take_shortcuts(g: Graph, compute: list[Node], outs: set[int], f: Fusion) -> list[Node]:
    """Apply the backward rules' shortcut marks: the compute nodes that still run a kernel of their own.

    Liveness is walked back from the outputs; a shortcut node needs its mark's inputs instead of its own.
    A by-product the shortcut's kernel can write (layer_norm_dx's x_hat) is taken from it when every kernel
    that still reads the node runs AFTER the shortcut (the plan runs kernels in graph order) and the node
    is not an output; its own inputs are then not needed for it either.
    """
    order = {n.id: k for k, n in enumerate(compute)}
    marks = {}
    for n in compute:
        if n.meta.get("shortcut"):
            m = _shortcut_of(g, n, order)
            if m is not None:
                marks[n.id] = m
    if not marks:
        return compute
    live = set(outs)
    first_reader: dict[int, int] = {}   # node -> the earliest position of a live kernel that reads it
    offered: dict[int, int] = {}       # by-product node -> the live shortcut whose kernel can write it
    for n in reversed(compute):
        if n.id not in live:
            continue
        if n.id in marks:
            op, inputs, attrs, stores = marks[n.id]
            f.shortcuts[n.id] = (op, inputs, attrs)
            needs: tuple[int, ...] = inputs
            for role, s in stores.items():
                offered.setdefault(s, n.id)
                f.provides.setdefault(n.id, {})[role] = s
        elif n.id in offered and n.id not in outs and first_reader.get(n.id, -1) > order[offered[n.id]]:
            f.provided_by[n.id] = offered[n.id]
            needs = ()
        else:
            needs = n.inputs
        for i in needs:
            live.add(i)
            first_reader[i] = min(first_reader.get(i, len(order)), order[n.id])
    for k, stores in list(f.provides.items()):   # keep only the by-products a later kernel reads
        kept = {role: s for role, s in stores.items() if f.provided_by.get(s) == k}
        if kept:
            f.provides[k] = kept
        else:
            del f.provides[k]
    taken = sorted(f.shortcuts)
    for n in compute:
        if n.id not in live:
            f.dead[n.id] = _responsible(n.id, taken)
        if n.id not in live or n.id in f.provided_by:
            f.skip.add(n.id)
    return [n for n in compute if n.id in live and n.id not in f.provided_by]


def _responsible(nid: int, shortcuts: list[int]) -> int:
    """The shortcut (of ``shortcuts``, ascending) whose kernel made node ``nid`` unnecessary: the first one after
    it, else the first (for messages)."""
    k = bisect_right(shortcuts, nid)
    return shortcuts[k] if k < len(shortcuts) else shortcuts[0]


def _fusable(n: Node) -> bool:
    return n.size > 0 and (spec(n.op).gpu.kernel == "elementwise" or (n.op == "broadcast_to" and n.dtype == "float"))


def _chain(root: int, members: list[int], outs: set[int]) -> Chain:
    return Chain(root, tuple(members), tuple(m for m in members if m in outs and m != root))


def _plan_chains(g: Graph, compute: list[Node], outs: set[int], readers: dict[int, list[Node]], f: Fusion,
                 max_buffers: int) -> None:
    """Group elementwise nodes into chains, each computed by one kernel (see the module docstring).

    A node that its only reader can compute inline points to that reader (``into``). The pointers
    form trees, one per candidate chain, each rooted at the node whose value is written. A tree too
    big for one kernel (``fits``: storage bindings, uniform words) sheds members until it fits, one
    at a time: the earliest requested output among them (it is written anyway; it becomes the root
    of a chain of its own, with the members that fed it), else the earliest member (it runs as a
    kernel of its own, and its reader reads it from memory).

    Trees are independent, so each is settled on its own, and what ``fits`` measures is kept up to
    date as members leave (:class:`ChainCost`): settling a tree costs time in proportion to its size.
    (Regrouping every tree after each cut, and laying each one out again, cost a pass over the whole
    plan per member shed: the gradient of a chain of N tanh, one tree of ~3N nodes shedding them one
    by one, took longer than N^2 steps.)
    """
    into: dict[int, int] = {}   # member -> the node that reads it and computes it inline
    for n in compute:
        rs = readers.get(n.id, [])
        if n.id in f.skip or not _fusable(n) or len(rs) != 1 or n.id in f.shortcuts:
            continue
        r = rs[0]
        if r.op == "broadcast_to" or not _fusable(r) or r.id in f.skip or r.id in f.shortcuts:
            continue
        if "grad_of" in n.meta and "update" in r.meta:
            continue   # a final gradient is written before the optimizer's update reads it: wgpu_gate looks at it
        if r.shape == n.shape and (n.id not in outs or n.dtype == "float"):
            into[n.id] = r.id   # (a requested output is computed in the chain AND written: a store)
        elif n.size == 1 and n.id not in outs:
            into[n.id] = r.id   # a scalar (1 - lr * wd) is recomputed per element: cheaper than a dispatch
    order = {n.id: k for k, n in enumerate(compute)}
    children: dict[int, list[int]] = {}
    for m, r in into.items():
        children.setdefault(r, []).append(m)
    root_of: dict[int, int] = {}   # a reader comes after what it reads: walking back, its root is known
    for n in reversed(compute):
        root_of[n.id] = root_of[into[n.id]] if n.id in into else n.id
    trees: dict[int, list[int]] = {}   # root -> its tree's nodes, in plan order (the root last)
    for n in compute:
        if n.id in into or n.id in children:
            trees.setdefault(root_of[n.id], []).append(n.id)
    chains: list[tuple[int, list[int]]] = []
    for root, members in trees.items():
        pending = [ChainCost(g, root, members, outs, into, max_buffers)]
        while pending:
            cost = pending.pop()
            while len(cost) > 1 and not cost.fits():
                store = cost.first_store()
                if store is None:
                    cost.remove([cost.first()])
                    continue
                cut = [store]   # the store and the members that feed it (through it, to the root)
                for m in cut:
                    cut.extend(c for c in children.get(m, ()) if c in cost)
                cost.remove(cut)
                if len(cut) > 1:
                    pending.append(ChainCost(g, store, sorted(cut, key=order.__getitem__), outs, into, max_buffers))
            if len(cost) > 1:
                chains.append((cost.root, cost.members()))
    for root, members in sorted(chains, key=lambda c: order[c[1][0]]):   # (in plan order of their first member)
        f.chains[root] = _chain(root, members, outs)
        for m in members:
            f.chain_of[m] = root
            if m != root:
                f.skip.add(m)


class ChainCost:
    """What :func:`wgpu_chain.fits` weighs for a tree of chain members, kept up to date as members leave.

    ``fits`` lays a chain out from scratch: its leaves (the values it reads from outside), which of
    them are scalar constants (a uniform word each) and which are buffers (a binding each, some read
    through broadcast strides), the members' number attributes (a uniform word each) and its stores.
    Asked again after each member a big tree sheds, that is a pass over the tree per member: the square
    of its size. This object keeps those quantities as counts instead (each leaf with how many members
    read it), so shedding a member costs only its own inputs. The layout's formula is wgpu_chain's
    (``_layout``): when the counts say "fits", ``fits`` itself confirms it, and should it ever disagree,
    this tree asks ``fits`` every time from then on (slower, never wrong).

    ``members`` are in plan order, ``root`` last; ``into`` maps a member to the member reading it.
    """

    HEADER_WORDS = 4      # wgpu_chain's uniform block: a header of 4 words ...
    UNIFORM_WORDS = 64    # ... in a block of 64

    def __init__(self, g: Graph, root: int, members: list[int], outs: set[int], into: dict[int, int],
                 max_buffers: int) -> None:
        self.g, self.root, self.outs, self.into, self.max_buffers = g, root, outs, into, max_buffers
        self._order = list(members)
        self._alive = set(members)
        self._first = 0                                     # members before this index have left
        self._stores = [m for m in members if m in outs and m != root]
        self._first_store = 0
        self.n_stores = len(self._stores)
        self.uses: dict[int, int] = {}      # leaf -> how many members read it
        self.buffers: dict[int, None] = {}  # leaves read from a buffer (in order of first use)
        self.scalars = 0                    # leaves that are scalar constants (uniform words)
        self.attr_words = 0
        self._exact = False                 # the counts once disagreed with fits: ask fits every time
        for m in members:
            self.attr_words += len(ew_attr_values(g.nodes[m]))
            for i in set(g.nodes[m].inputs):
                if i not in self._alive:
                    self._use(i, 1)

    def __len__(self) -> int:
        return len(self._alive)

    def __contains__(self, m: int) -> bool:
        return m in self._alive

    def members(self) -> list[int]:
        """The members still in the tree, in plan order (the root last)."""
        return [m for m in self._order[self._first:] if m in self._alive]

    def first(self) -> int:
        """The earliest member still in the tree."""
        while self._order[self._first] not in self._alive:
            self._first += 1
        return self._order[self._first]

    def first_store(self) -> int | None:
        """The earliest requested output still in the tree (other than the root), or None."""
        while self._first_store < len(self._stores) and self._stores[self._first_store] not in self._alive:
            self._first_store += 1
        return self._stores[self._first_store] if self._first_store < len(self._stores) else None

    def _use(self, leaf: int, k: int) -> None:
        """``k`` more (or fewer) members read ``leaf``."""
        count = self.uses.get(leaf, 0) + k
        if count and leaf not in self.uses:
            n = self.g.nodes[leaf]
            if n.op == "constant" and n.size == 1 and n.id in self.g.constants:
                self.scalars += 1
            else:
                self.buffers[leaf] = None
        if count:
            self.uses[leaf] = count
            return
        del self.uses[leaf]
        if leaf in self.buffers:
            del self.buffers[leaf]
        else:
            self.scalars -= 1

    def remove(self, gone: list[int]) -> None:
        """Members ``gone`` leave the tree; one still read by a member becomes a leaf of the tree."""
        for m in gone:
            node = self.g.nodes[m]
            for i in set(node.inputs):
                if i not in self._alive:
                    self._use(i, -1)
            self._alive.discard(m)
            self.attr_words -= len(ew_attr_values(node))
            if m in self.outs and m != self.root:
                self.n_stores -= 1
            if self.into.get(m) in self._alive:
                self._use(m, 1)

    def words(self) -> int:
        """Uniform words of the chain's layout: header, index walk (one stride per strided buffer and
        axis), scalar constants, attributes."""
        out = self.g.nodes[self.root].shape
        own = contiguous_strides(out)
        walk = [st for i in self.buffers if (st := broadcast_strides(self.g.nodes[i].shape, out)) != own]
        axes = len(collapse(out, *walk)[0]) if walk else 0
        return self.HEADER_WORDS + axes * (1 + len(walk)) + self.scalars + self.attr_words

    def estimate(self) -> bool:
        """``fits``' verdict from the counts alone: bindings (buffers, the output, the stores) and words."""
        return len(self.buffers) + 1 + self.n_stores <= self.max_buffers and self.words() <= self.UNIFORM_WORDS

    def fits(self) -> bool:
        """Can one kernel take the tree as it is now (``wgpu_chain.fits``)? Asked of ``fits`` itself only when
        the counts say yes (once per tree that ends up fitting), or always once they were wrong."""
        if not self._exact and not self.estimate():
            return False
        ok = fits(self.g, _chain(self.root, self.members(), self.outs), self.max_buffers)
        self._exact = self._exact or not ok
        return ok


def _epilogue_of(g: Graph, m: Node, readers: dict[int, list[Node]], outs: set[int], f: Fusion
                 ) -> tuple[dict[str, int], list[int]] | None:
    """({kind: node}, absorbed nodes) when ``m`` is a matmul whose value only flows through a chain of single
    readers: first, optionally, ``* s`` with s a scalar constant (``scale``, attention's 1/sqrt(d)), then up
    to two adds, each of a (N,) vector (``row``, a bias), a value of ``m``'s shape (``full``, a residual) or
    a (M, N) matrix broadcast over the batch (``mat``, an attention mask), at most one of each; None otherwise."""
    if m.op != "matmul" or m.id not in f.operands or m.id in f.out_views or m.id in outs or m.dtype != "float":
        return None
    found: dict[str, int] = {}
    adds: list[int] = []
    cur = m
    rs = readers.get(m.id, [])
    if len(rs) == 1 and rs[0].op == "mul" and rs[0].id not in outs and rs[0].id not in f.skip \
            and rs[0].shape == m.shape and len(rs[0].inputs) == 2:
        c = g.nodes[[i for i in rs[0].inputs if i != m.id][0]] if m.id in rs[0].inputs else None
        if c is not None and c.op == "constant" and c.size == 1 and c.id in g.constants and c.dtype == "float" \
                and rs[0].inputs.count(m.id) == 1:
            found["scale"] = c.id
            adds.append(rs[0].id)
            cur = rs[0]
    while len(adds) - ("scale" in found) < 2:
        rs = readers.get(cur.id, [])
        if len(rs) != 1 or rs[0].op != "add" or cur.id in outs:
            break
        add = rs[0]
        others = [i for i in add.inputs if i != cur.id]
        if add.id in f.skip or add.id in outs or add.shape != m.shape or len(add.inputs) != 2 or len(others) != 1:
            break
        o = g.nodes[others[0]]
        kind = "row" if o.shape == (m.shape[-1],) else "full" if o.shape == m.shape else \
            "mat" if len(m.shape) > 2 and o.shape == m.shape[-2:] else None
        if kind is None or kind in found or o.dtype != "float" or o.id == m.id:
            break
        if not spec(o.op).leaf and o.id > m.id:   # computed after the product: not there yet when it stores C
            break
        found[kind] = o.id
        adds.append(add.id)
        cur = add
    if not adds:
        return None
    return found, adds


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
