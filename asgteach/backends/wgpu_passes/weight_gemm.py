"""Pass ``weight_gemm``: a batched weight gradient, ``sum_to(transpose(x) @ g)``, is ONE matrix product.

What it rewrites. The gradient of ``W`` in ``x @ W`` with x of shape (B, T, k) is, as the
graph says it, ``sum_to(transpose(x) @ g, (k, n))``: a transposed copy of x, a batched
product writing one (k, n) matrix PER BATCH ELEMENT, and a sum reading them all again.
That equals ``x_flat^T @ g_flat`` with the batch folded into the inner dimension (x read
as (B*T, k)): this pass gives the ``sum_to`` node that one GEMM
(``wgpu_kernels.gemm_sum``, split along K into a few chunks and a short sum when its
output has too few tiles to fill the GPU), and the batched matmul runs no kernel.

Why it pays. Three trips through memory (one of them B times the gradient's size) become
one product that writes the gradient directly.
"""

from __future__ import annotations

from ...graph import Node
from ..wgpu_kernels import gemm_sum
from ..wgpu_matmul import Tile
from .rewrites import Made, Rewriting

NAME = "weight_gemm"


def _swaps_last_two(n: Node) -> bool:
    axes = tuple(n.attrs.get("axes", ()))
    k = len(axes)
    return n.op == "transpose" and k >= 2 and axes == tuple(range(k - 2)) + (k - 1, k - 2)


def foldable(ctx: Rewriting, s: Node) -> bool:
    """Is ``s`` = sum_to(transpose(x) @ b, (k, n)) over every batch axis, foldable into one GEMM?"""
    g = ctx.graph
    m = g.nodes[s.inputs[0]]
    if m.op != "matmul" or m.id in ctx.outs or len(ctx.readers.get(m.id, [])) != 1 or len(m.shape) < 3:
        return False
    a, b = (g.nodes[i] for i in m.inputs)
    batch = m.shape[:-2]
    return (tuple(s.attrs["shape"]) == m.shape[-2:] and _swaps_last_two(a) and len(a.shape) == len(m.shape)
            and len(b.shape) == len(m.shape) and a.shape[:-2] == batch and b.shape[:-2] == batch
            and not _swaps_last_two(b))


def gemm_kernel(ctx: Rewriting, n: Node, tile: Tile) -> Made:
    """The sum_to node's one GEMM, reading x and g where they live (shown: the product's WGSL)."""
    x, gy = ctx.f.gemm_sum[n.id]
    root = ctx.f.root
    ds = gemm_sum(ctx.graph, n, x, gy, tile, (root(x), root(gy))) if n.size else []
    return Made(ds, [root(x), root(gy)], first=True)


def run(ctx: Rewriting) -> str:
    """Fold each foldable sum_to(transpose(x) @ g) into one GEMM; the batched matmul runs no kernel."""
    g, f = ctx.graph, ctx.f
    for n in ctx.compute:
        if n.op == "sum_to" and foldable(ctx, n):
            m = g.nodes[n.inputs[0]]
            f.gemm_sum[n.id] = (g.nodes[m.inputs[0]].inputs[0], m.inputs[1])
            ctx.kernels[n.id] = gemm_kernel
            ctx.read_in_place(m.id, n.id)
            ctx.absorbed[m.inputs[0]] = n.id
    return f"{len(f.gemm_sum)} batched weight gradient(s) -> one GEMM each (nodes " \
           f"{', '.join(f'#{k}' for k in f.gemm_sum) or 'none'})"
