"""Pass ``products``: a sum or mean of a product multiplies while it reads.

What it rewrites. ``mean(g * xhat)`` (a LayerNorm backward written out) and ``sum(g * y)``
(a softmax backward that the pass ``softmax_grad`` did not take, e.g. along another axis): when the
``mul`` is read only by the reduction (and is no output,
and no chain computes it), the reduction kernel reads both factors and reduces their
product (``wgpu_kernels.reduce_dispatches(..., product=(a, b))``); the mul runs no kernel.

Why it pays. The product, a tensor the size of both factors, is never written to memory
and read back: one pass over the factors instead of three.
"""

from __future__ import annotations

from ...graph import Node
from ..wgpu_kernels import reduce_dispatches, reduces_by_adding
from ..wgpu_matmul import Tile
from .rewrites import Made, Rewriting

NAME = "products"


def product_kernel(ctx: Rewriting, n: Node, tile: Tile) -> Made:
    """The reduction of a * b, reading a and b (shown: the stage that reads them)."""
    root = ctx.f.root
    a, b = (root(i) for i in ctx.f.products[n.id])
    return Made(reduce_dispatches(ctx.graph, n, (a, b)) if n.size else [], [a, b], first=True)


def run(ctx: Rewriting) -> str:
    """sum(a * b), mean(a * b): the reduction multiplies while it reads; the mul runs no kernel."""
    g, f = ctx.graph, ctx.f
    for n in ctx.compute:
        if not reduces_by_adding(n) or n.id in f.skip:
            continue
        x = g.nodes[n.inputs[0]]
        if x.op != "mul" or x.id in ctx.outs or x.id in f.skip or x.id in f.chain_of or x.id in f.shortcuts \
                or x.size == 0 or x.dtype != "float" or len(ctx.readers.get(x.id, [])) != 1:
            continue
        a, b = (g.nodes[i] for i in x.inputs)
        if a.shape == b.shape == x.shape and a.dtype == b.dtype == "float":
            f.products[n.id] = (a.id, b.id)
            f.read_through[x.id] = n.id
            ctx.kernels[n.id] = product_kernel
            ctx.read_in_place(x.id, n.id)
    return f"{len(f.products)} reduction(s) of a product read both factors (the mul runs no kernel)"
