"""Pass ``wide_elementwise``: a large elementwise node left on its own runs as a chain of one.

What it rewrites. An elementwise node that no chain took (it has several readers, or reads
nothing fusable) but has at least ``wgpu_chain.ELEMS_FROM`` elements gets the generated
chain kernel anyway (``shaders/fused.wgsl``), which computes four elements per thread,
256 apart, instead of elementwise.wgsl's one.

Why it pays. A quarter of the threads, each with more independent loads in flight: on a
large tensor the kernel is limited by memory, and this keeps more of it busy.
"""

from __future__ import annotations

from ..wgpu_chain import ELEMS_FROM, fits
from .chains import add_chain, fusable, make_chain
from .rewrites import Rewriting

NAME = "wide_elementwise"


def run(ctx: Rewriting) -> str:
    """Give each large lone float elementwise node a chain kernel of its own."""
    f, done = ctx.f, 0
    for n in ctx.compute:
        if n.size >= ELEMS_FROM and n.op != "broadcast_to" and fusable(n) and n.id not in f.skip \
                and n.id not in f.chain_of and n.id not in f.shortcuts and n.dtype == "float" \
                and fits(ctx.graph, make_chain(n.id, [n.id], ctx.outs), ctx.max_buffers):
            add_chain(ctx, n.id, [n.id])
            done += 1
    return f"{done} large elementwise node(s) -> the four-elements-per-thread chain kernel"
