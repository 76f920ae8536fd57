"""Pass ``transposes``: a matmul reads a transposed operand in place; a transpose no kernel reads is not computed.

What it rewrites. In the plain plan ``transpose(x) @ w`` copies x transposed, then
multiplies. But the matmul kernel can load its A or B tile transposed, and it takes a row
stride and batch strides: following ``transpose`` nodes back from an operand, each of its
axes has a stride in the buffer reached, and when one of its last two axes is contiguous
there (stride 1) the product reads that buffer directly. Attention's head split
``transpose(reshape(x, (B, T, H, dh)), (0, 2, 1, 3))`` is such a read: a head is T rows of
dh values, H * dh apart in x. ``plan.fusion.operands[matmul]`` says where each operand is
read from.

Then, walking back from the outputs, a transpose that only such reads needed is not
computed at all (``plan.fusion.read_through``). One that something else reads as a
buffer is still computed by its copy kernel.

Why it pays. A transposed copy is a full read and write of the tensor for nothing: the
multiply reads every element once either way.
"""

from __future__ import annotations

from ...graph import Node
from .out_views import contiguous
from .rewrites import Rewriting, matmul_kernel

NAME = "transposes"


def view(ctx: Rewriting, nid: int) -> tuple[tuple, list[int]]:
    """How a matmul reads operand ``nid`` with the fewest copies: ((buffer node, transposed?, row stride,
    batch strides), the transposes read through). Strides None: the operand's own buffer, contiguous."""
    g = ctx.graph
    best: tuple = ((nid, False, None, None), [])
    rank = len(g.nodes[nid].shape)
    axmap = list(range(rank))   # operand axis -> axis of the node walked to
    cur, through = nid, []
    while g.nodes[cur].op == "transpose" and cur not in ctx.written:
        perm = tuple(g.nodes[cur].attrs["axes"])
        if len(perm) != rank:
            break
        through.append(cur)
        axmap = [perm[a] for a in axmap]
        cur = g.nodes[cur].inputs[0]
        st = contiguous(g.nodes[cur].shape)
        strides = [st[a] for a in axmap]
        if strides[-1] == 1:
            best = ((cur, False, strides[-2], tuple(strides[:-2])), list(through))
        elif strides[-2] == 1:
            best = ((cur, True, strides[-1], tuple(strides[:-2])), list(through))
    return best


def _readers_of(ctx: Rewriting) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """For each node, the kernels that may do its work: the weight GEMMs reading it (as their matmul or its
    transposed operand), and the matmuls reading it as an operand (found once: not a scan per node)."""
    g, f = ctx.graph, ctx.f
    by_gemm: dict[int, list[int]] = {}
    for s_id in f.gemm_sum:
        m = g.nodes[g.nodes[s_id].inputs[0]]
        for i in dict.fromkeys((m.id, m.inputs[0])):
            by_gemm.setdefault(i, []).append(s_id)
    by_matmul: dict[int, list[int]] = {}
    for u in f.operands:
        for i in dict.fromkeys(g.nodes[u].inputs):
            by_matmul.setdefault(i, []).append(u)
    return by_gemm, by_matmul


def run(ctx: Rewriting) -> str:
    """Read matmul operands through transposes; drop the transposes no kernel then reads."""
    g, f = ctx.graph, ctx.f
    absorbed = ctx.absorbed
    for n in ctx.compute:
        if n.op == "matmul" and n.id not in f.skip and len(g.nodes[n.inputs[0]].shape) >= 2 \
                and len(g.nodes[n.inputs[1]].shape) >= 2 and n.id not in f.shortcuts:
            ops = []
            for i in n.inputs:
                v, through = view(ctx, i)
                ops.append(v)
                absorbed.update((t, n.id) for t in through)
            f.operands[n.id] = tuple(ops)
            ctx.kernels[n.id] = matmul_kernel
    in_place = sum(1 for ops in f.operands.values() for v in ops if v[2] is not None)
    # a transpose is computed only if some kernel reads its buffer: walk back from the outputs
    needed = set(ctx.outs)
    dropped: list[Node] = []
    for n in reversed(ctx.compute):
        if n.id in f.written_by:   # the matmul that writes it runs anyway
            continue
        if (n.id in absorbed or n.id in f.alias) and n.id not in needed:
            if n.id in absorbed:
                dropped.append(n)
                f.read_through[n.id] = absorbed[n.id]
            continue
        if n.id in f.skip:   # a matmul folded into a weight GEMM: the sum_to reads its operands
            continue
        if n.id in f.gemm_sum:
            needed.update(f.gemm_sum[n.id])
        elif n.id in f.operands:
            needed.update(v[0] for v in f.operands[n.id])
        else:
            needed.update(f.shortcuts[n.id][1] if n.id in f.shortcuts else n.inputs)
    by_gemm, by_matmul = _readers_of(ctx)
    for n in dropped:
        ctx.read_in_place(n.id, *by_gemm.get(n.id, ()), f.read_through[n.id], *by_matmul.get(n.id, ()))
    return f"{len(f.operands)} matmul(s) read {in_place} operand(s) through strides; {len(dropped)} transpose(s) " \
           f"no kernel reads are not computed"
