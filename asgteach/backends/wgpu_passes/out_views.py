"""Pass ``out_views``: a matmul writes its result straight into the layout of the transposes that read it.

What it rewrites. Attention merges its heads with ``transpose(heads, (0, 2, 1, 3))`` and
its backward splits gradients the same way: a matmul whose ONLY reader is a transpose
(or a chain of them, none an output). Each of the matmul's axes has a stride in the last
transpose's row-major buffer; when its last axis has stride 1 the kernel stores C with a
row stride into that buffer, and when its second-to-last has, it computes C^T = B^T @ A^T
instead and stores that. The transposes share the matmul's buffer and run no kernel.

Why it pays. Each transpose is a full read and write of an activation-sized tensor; the
product writes to the same bytes either way.
"""

from __future__ import annotations

import numpy as np

from ...graph import Node
from .rewrites import Rewriting, matmul_kernel

NAME = "out_views"


def contiguous(shape: tuple) -> list[int]:
    """Row-major strides, in elements."""
    return [int(v) for v in np.cumprod((1,) + tuple(shape[:0:-1]))[::-1]] if shape else []


def out_view(ctx: Rewriting, m: Node, kept: set[int]) -> tuple | None:
    """((row stride, batch strides, swapped?), the transposes) when ``m`` can write into their layout, else None.

    ``m`` -> transpose -> ... -> transpose, each the single reader of the one before and none of them
    in ``kept`` (outputs, and transposes another kernel reads through).
    """
    g = ctx.graph
    chain: list[int] = []
    cur = m
    while True:
        rs = ctx.readers.get(cur.id, [])
        if len(rs) != 1 or rs[0].op != "transpose" or rs[0].id in kept or cur.id in kept:
            break
        cur = rs[0]
        chain.append(cur.id)
    if not chain:
        return None
    rank = len(m.shape)
    strides = contiguous(g.nodes[chain[-1]].shape)   # of the last transpose's axes, in its buffer
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


def run(ctx: Rewriting) -> str:
    """Let each matmul read only by transposes write in their layout; the transposes run no kernel."""
    g, f = ctx.graph, ctx.f
    kept = ctx.outs | set(ctx.absorbed)     # (a weight GEMM reads its x as it is)
    for n in ctx.compute:
        if n.op == "matmul" and n.size > 0 and n.id not in ctx.outs and n.id not in f.skip and len(n.shape) >= 2 \
                and all(len(g.nodes[i].shape) >= 2 and g.nodes[i].size > 0 for i in n.inputs):
            found = out_view(ctx, n, kept)
            if found is None:
                continue
            view, chain = found
            f.out_views[n.id] = view
            f.alias[chain[-1]] = n.id
            ctx.kernels[n.id] = matmul_kernel
            for t in chain:
                f.written_by[t] = n.id
                ctx.written.add(t)
                ctx.remove(t, f"// {g.nodes[t].op} (node #{t}) runs no kernel of its own: the matmul of node #{n.id} "
                              f"below writes its result straight in this transpose's layout (row stride LDC, batch "
                              f"strides in words 32..)\n", n.id)
    return f"{len(f.out_views)} matmul(s) write in the layout of the {len(f.written_by)} transpose(s) reading them"
