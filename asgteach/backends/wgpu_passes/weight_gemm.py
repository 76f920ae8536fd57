"""Pass ``weight_gemm``: a batched weight gradient, ``sum_to(transpose(x) @ g)``, is ONE matrix product.

What it rewrites. The gradient of ``W`` in ``x @ W`` with x of shape (B, T, k) is, as the
graph says it, ``sum_to(transpose(x) @ g, (k, n))``: a transposed copy of x, a batched
product writing one (k, n) matrix PER BATCH ELEMENT, and a sum reading them all again.
That equals ``x_flat^T @ g_flat`` with the batch folded into the inner dimension (x read
as (B*T, k)): this pass gives the ``sum_to`` node that one GEMM
(:func:`gemm_sum`, split along K into a few chunks and a short sum when its
output has too few tiles to fill the GPU), and the batched matmul runs no kernel.

Why it pays. Three trips through memory (one of them B times the gradient's size) become
one product that writes the gradient directly.
"""

from __future__ import annotations

from ...graph import Node
import math

import numpy as np

from ...graph import Graph
from ..wgpu_device import family_source
from ..wgpu_kernels import NAN_BITS, WG_LINEAR, Dispatch, fbits, gemm, groups_for, uniform_words
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


def split_k(k: int, tiles: int, target: int = 256) -> int:
    """How many K-chunks a product with few output tiles should be split into (1: none).

    A (512, 512) result is only 16 tiles of 128 x 128: 16 workgroups on a GPU with 132
    multiprocessors, each walking all of K alone. Splitting K into S chunks gives S times
    more workgroups; each chunk writes a partial (M, N) result and a short sum adds them.
    Chunks stay at least 256 long and a multiple of 16 (the vec4 kernel's K step).
    """
    want = max(1, target // max(tiles, 1))
    for s in range(min(want, k // 256), 1, -1):
        if k % s == 0 and (k // s) % 16 == 0:
            return s
    return 1


def gemm_sum(g: Graph, node: Node, x: int, gy: int, tile: Tile, buffers: tuple[int, int]) -> list[Dispatch]:
    """sum_to(transpose(x) @ gy) over every batch axis as ONE product: x_flat^T @ gy_flat.

    x (..., K, M) and gy (..., K, N) are read as (B*K, M) and (B*K, N): the batch joins
    the inner dimension, and the (M, N) result goes straight into the sum_to's buffer.
    When that leaves too few output tiles to fill the GPU, K is split into S chunks run as
    a batch of S products (into a scratch buffer) and summed by a short reduction.
    ``buffers``: the nodes whose buffers hold x and gy (they may be aliases' owners).
    """
    xs, gs = g.nodes[x].shape, g.nodes[gy].shape
    m, n = xs[-1], gs[-1]
    k = int(np.prod(xs[:-1], dtype=np.int64))
    a, b = (buffers[0], True), (buffers[1], False)
    s = split_k(k, math.ceil(m / tile.bm) * math.ceil(n / tile.bn))
    if s == 1:
        return [gemm(node, tile, m, n, k, 1, [], [], [], a, b, node.id)]
    kc, scratch = k // s, -node.id - 1
    parts = gemm(node, tile, m, n, kc, s, [s], [kc * m], [kc * n], a, b, scratch)
    parts.scratch = {scratch: s * m * n * 4}
    words = uniform_words(w0=m * n, w1=s, w2=1, w3=1, w4=fbits(1.0), w5=NAN_BITS, w6=s, w7=1, w8=[m * n], w16=[1],
                    w24=[s], w32=[m * n])
    total = Dispatch(node, ("sum_to", "f32", "sum_t"), family_source("reduce"), "sum_t", words,
                     {1: scratch, 2: node.id}, groups_for(math.ceil(m * n / WG_LINEAR)))
    return [parts, total]


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
