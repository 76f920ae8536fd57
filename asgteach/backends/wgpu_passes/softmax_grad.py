"""Pass ``softmax_grad``: softmax's backward along the last axis, four nodes, becomes ONE kernel.

What it rewrites. softmax's backward rule (``ops/nn.py``) builds the gradient of its input
from graph ops, so that a reader sees the formula (y = softmax(x), g = dL/dy)::

    p = g * y;  s = sum(p, axis=-1, keepdims=True);  d = g - s;  dx = y * d

This pass finds that shape in the gradient graph, node by node (:func:`match`: the ops, the
sum over the last axis with keepdims, either order of the two commutative muls, all of one
float shape), where ``p``, ``s`` and ``d`` are read only inside the pattern and none of them
is a requested output. When ``dx``'s only reader is ``dx * c`` with ``c`` a scalar constant
(attention's gradient: the scores were ``q @ k^T * c``) and ``dx`` is no output, the scale
joins too. One kernel (shaders/softmax_grad.wgsl) then computes the result: a group of
threads per row reads the row's y and g once, keeps them in registers while it adds up s,
and writes ``y * (g - s)`` (times c) into the last node's buffer. ``p``, ``s``, ``d`` (and
``dx`` when the scale joined) run no kernel; ``plan.shader_for`` of any of them shows the one
that does their work. Rows of up to 2048 elements stay in registers; a longer row is read
twice (once for s, once for the result), still in one kernel.

It runs after ``attention`` (a fused attention backward takes these nodes first, when it
fuses) and before ``chains`` and ``products``, which would otherwise take them: ``products``
the row sum of ``g * y`` (one reduction kernel), ``chains`` ``y * (g - s) * c`` (one
elementwise kernel). Anything that does not match exactly (another axis, ``g * y`` or the sum
read elsewhere or asked for, a scale that is not a scalar constant) is left to them.

Why it pays: memory traffic. Two kernels read y and g twice and s once more, and write s;
one kernel reads y and g once and writes the result. For attention's (B, H, T, T) weights
(16 x 8 x 1024 x 1024 floats, 0.5 GiB each, in a GPT step at seq 1024) that is about 1.5 GiB
moved per layer instead of 2.5 (bench/README.md, issue 27: 0.47 + 0.57 ms for the two kernels
on an H100, 0.57 ms for this one; 0.32 ms on an H200 for its causal variant, which reads half).

When ``y`` is a causal attention's weights (the pass ``causal_tiles`` puts that softmax in
``plan.fusion.causal``: each (T, T) matrix of y is exactly 0 above its diagonal), the kernel's
causal entries read y and g only at keys j <= i of query i's row and write 0.0 above: there every
term of s is 0 * g and every output 0 * (g - s), so the values are the full kernel's, and half of
a long row is never read.

The graph is unchanged: the op layer knows nothing of this; only what the GPU runs is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...graph import Graph, Node
from ..wgpu_device import family_source
from ..wgpu_kernels import Dispatch, fbits, groups_for, uniform_words
from ..wgpu_matmul import Tile
from .rewrites import Made, Rewriting

NAME = "softmax_grad"
OP = "softmax_grad"
WG = 256          # threads per workgroup (shaders/softmax_grad.wgsl)
ROW_TILE = 8      # elements per thread that *_wg keeps in registers: rows up to 8 * 256 = 2048 read once
THREAD_ROWS = 32  # rows shorter than this, when there are at least 2048 of them: a thread per row (*_t)

__all__ = ["NAME", "OP", "SoftmaxGrad", "match", "run", "softmax_grad_kernel", "softmax_grad_dispatches"]


@dataclass(frozen=True)
class SoftmaxGrad:
    """One match: ``y`` and ``g`` (nodes), the node the kernel writes (``dx``, or the scale's mul), the scale
    (None: no scale joined), and the nodes that then run no kernel (p, s, d, and dx when the scale joined)."""

    y: int
    g: int
    result: int
    scale: float | None
    inner: tuple[int, ...]


def _scalar(g: Graph, n: Node) -> float | None:
    """The value of ``n`` when it is a float constant of one element."""
    if n.op != "constant" or n.size != 1 or n.dtype != "float" or n.id not in g.constants:
        return None
    return float(np.asarray(g.constants[n.id]).reshape(()))


def _inputs2(n: Node, op: str) -> tuple[int, int] | None:
    """The two inputs of ``n`` when it is a ``op`` of two inputs."""
    return (n.inputs[0], n.inputs[1]) if n.op == op and len(n.inputs) == 2 else None


def _last_axis_sum(n: Node, rank: int) -> bool:
    """``n`` is sum(input, axis=last, keepdims=True) of a rank-``rank`` input."""
    if n.op != "sum" or not n.attrs.get("keepdims") or len(n.inputs) != 1 or rank < 1:
        return False
    axis = n.attrs.get("axis")
    if axis is None:   # (every axis: the same only for a 1-D input)
        return rank == 1
    return tuple(int(a) % rank for a in np.atleast_1d(axis).tolist()) == (rank - 1,)


def match(ctx: Rewriting, dx: Node) -> SoftmaxGrad | None:
    """The match whose ``dx`` is ``dx`` = y * (g - sum(g * y, axis=-1, keepdims=True)), else None.

    Every node of the pattern is float, of dx's shape (the sum: with a last axis of 1), still runs its own
    kernel (no earlier pass took it), and ``p``, ``s``, ``d`` are read only by the next node of the pattern
    and are no outputs. Then, when dx is no output and its only reader is ``dx * c`` (c a scalar constant),
    that mul is the node the kernel writes.
    """
    g, outs, kernels = ctx.graph, ctx.outs, ctx.kernels
    shape = dx.shape
    if _inputs2(dx, "mul") is None or dx.dtype != "float" or not shape or dx.size == 0 or dx.id not in kernels \
            or dx.id in ctx.f.shortcuts:
        return None

    def only_reader_is(nid: int, reader: Node) -> bool:
        rs = ctx.readers.get(nid, [])
        return nid not in outs and len(rs) == 1 and rs[0].id == reader.id and nid in kernels

    for y_id, d_id in (dx.inputs, dx.inputs[::-1]):
        d = g.nodes[d_id]
        gs = _inputs2(d, "sub")
        if gs is None or d.shape != shape or not only_reader_is(d.id, dx) or d.id == y_id:
            continue
        g_id, s_id = gs
        s = g.nodes[s_id]
        if s.shape != shape[:-1] + (1,) or not _last_axis_sum(s, len(shape)) or not only_reader_is(s.id, d):
            continue
        p = g.nodes[s.inputs[0]]
        if _inputs2(p, "mul") is None or sorted(p.inputs) != sorted((g_id, y_id)) or p.shape != shape \
                or not only_reader_is(p.id, s):
            continue
        y, gn = g.nodes[y_id], g.nodes[g_id]
        if any(n.dtype != "float" or n.shape != shape for n in (y, gn, p, d)):
            continue
        inner = (p.id, s.id, d.id)
        rs = ctx.readers.get(dx.id, [])
        sc = rs[0] if len(rs) == 1 and dx.id not in outs else None
        if sc is not None and _inputs2(sc, "mul") is not None and sc.inputs.count(dx.id) == 1 \
                and sc.shape == shape and sc.dtype == "float" and sc.id in kernels and sc.id not in ctx.f.shortcuts:
            c = _scalar(g, g.nodes[sc.inputs[1] if sc.inputs[0] == dx.id else sc.inputs[0]])
            if c is not None:
                return SoftmaxGrad(y_id, g_id, sc.id, c, (*inner, dx.id))
        return SoftmaxGrad(y_id, g_id, dx.id, None, inner)
    return None


def _lanes(length: int) -> int:
    """Threads per row for *_wg: a power of 2, 32..256, so that each thread holds at most ROW_TILE elements."""
    lp = 32
    while lp < WG and lp * ROW_TILE < length:
        lp *= 2
    return lp


def softmax_grad_dispatches(graph: Graph, node: Node, y: int, g: int, scale: float | None,
                            causal: bool = False) -> list[Dispatch]:
    """The one dispatch writing ``node`` = y * (g - sum(g * y, axis=-1)) (* scale): ``y`` and ``g`` are the
    buffers (owner nodes) holding them, contiguous, of ``node``'s shape. ``causal``: y is a causal attention's
    weights (``plan.fusion.causal``, exactly 0 above the diagonal of each (T, T) matrix): the
    softmax_grad_causal_* entries read y and g only at keys j <= i and write 0 above."""
    length = node.shape[-1]
    rows = node.size // max(length, 1)
    per_row_group = length >= THREAD_ROWS or rows < 2048
    if causal:
        assert len(node.shape) >= 2 and node.shape[-2] == length, node
    entry = ("softmax_grad_causal" if causal else "softmax_grad") + ("_wg" if per_row_group else "_t")
    lp = _lanes(length)
    words = uniform_words(w0=rows, w1=length, w2=lp % WG, w3=fbits(1.0 if scale is None else scale))
    groups = groups_for(math.ceil(rows / (WG // lp)) if per_row_group else math.ceil(rows / WG))
    return [Dispatch(node, (OP, "f32", entry), family_source("softmax_grad"), entry, words,
                     {1: y, 2: g, 3: node.id}, groups)]


def softmax_grad_kernel(ctx: Rewriting, n: Node, tile: Tile) -> Made:
    """``n`` computed by the softmax_grad kernel from the y and g it matched."""
    root = ctx.f.root
    _, (y, g), attrs = ctx.f.shortcuts[n.id]
    ys, gs = root(y), root(g)
    causal = y in ctx.f.causal
    ds = softmax_grad_dispatches(ctx.graph, n, ys, gs, attrs["scale"], causal) if n.size else []
    scaled = f", times {attrs['scale']:g} (word 3)" if attrs["scale"] is not None else ""
    upper = ("; y is a causal attention's weights (pass causal_tiles), 0 above the diagonal: only keys j <= i "
             "are read, 0.0 is written above") if causal else ""
    note = (f"// {n.op} (node #{n.id}) is computed by the softmax_grad kernel below, entry "
            f"{ds[0].entry if ds else ''}: the pass softmax_grad recognised y * (g - sum(g * y, axis=-1)){scaled} "
            f"with y = node #{y}, g = node #{g}; one pass over each row{upper}\n")
    return Made(ds, list(dict.fromkeys([ys, gs])), note=note)


def run(ctx: Rewriting) -> str:
    """Find softmax backwards along the last axis; run their one kernel; the inner nodes run none."""
    f = ctx.f
    found: list[SoftmaxGrad] = []
    taken: set[int] = set()
    for n in ctx.compute:
        if n.op != "mul" or n.id in taken:
            continue
        m = match(ctx, n)
        if m is None or taken & {m.result, *m.inner}:
            continue
        found.append(m)
        taken.update((m.result, *m.inner))
    if not found:
        return "no softmax backward along the last axis in this plan"
    for m in found:
        f.shortcuts[m.result] = (OP, (m.y, m.g), {"scale": m.scale})
        ctx.kernels[m.result] = softmax_grad_kernel
        for i in m.inner:
            ctx.remove(i, f"// {ctx.graph.nodes[i].op} (node #{i}) runs no kernel of its own: the softmax_grad kernel "
                          f"of node #{m.result} below computes it in registers, row by row, and never stores it\n",
                       m.result)
    inner = {i for m in found for i in m.inner}
    ctx.compute = [n for n in ctx.compute if n.id not in inner]
    ctx.find_readers()
    scaled = sum(m.scale is not None for m in found)
    return (f"{len(found)} softmax backward(s) -> one softmax_grad kernel each ({scaled} with the following scale); "
            f"{len(inner)} nodes run no kernel")
