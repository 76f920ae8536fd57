"""Pass ``free_reshapes``: a reshape runs no kernel; it shares its input's buffer.

What it rewrites. In the plain plan a ``reshape`` is a copy kernel. But a tensor is a
flat, row-major buffer: the same bytes read with another shape ARE the reshaped tensor.
So each reshape (that is not a requested output, which keeps a buffer of its own to be
read back) becomes an *alias*: ``plan.fusion.alias[reshape] = input``, and every kernel
that reads the reshape binds its input's buffer instead.

Why it pays. A copy costs a read and a write of the whole tensor and a launch; an
attention block reshapes its activations and gradients a dozen times per step.
"""

from __future__ import annotations

from .rewrites import Rewriting

NAME = "free_reshapes"


def run(ctx: Rewriting) -> str:
    """Alias every reshape that is not an output to its input's buffer."""
    done = 0
    for n in ctx.compute:
        if n.op == "reshape" and n.id not in ctx.outs:
            ctx.f.alias[n.id] = n.inputs[0]
            ctx.remove(n.id, f"// {n.op} (node #{n.id}) runs no kernel: a row-major buffer read with another shape "
                             f"is the same bytes, so it shares node #{ctx.f.root(n.id)}'s buffer\n")
            done += 1
    return f"{done} reshape(s) share their input's buffer"
