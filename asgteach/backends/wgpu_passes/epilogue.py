"""Pass ``epilogue``: adds (and a scale) after a kernel are applied by that kernel as it stores its result.

What it rewrites.

* ``x @ W + b`` with b of shape (N,), where the add is the product's only reader: the
  matmul kernel adds b to each row it writes (its *epilogue*), and the add runs no kernel
  (it shares the matmul's buffer). So does ``x @ W + b + r`` (or ``x @ W + r``) with r of
  the product's shape (a residual connection; backward, a gradient arriving by two paths),
  ``* s`` with s a scalar constant first (attention's 1/sqrt(d)), and a (M, N) matrix added
  to every batch (an attention mask). At most one of each, up to two adds.
* ``layer_norm_dx(...) + r`` (the pass ``layer_norm_dx``'s kernel): a residual block's input
  gets its gradient from the skip connection (r) and from the LayerNorm in front of the
  branch (dx). When dx is read only by that add and r is computed before it, the
  layer_norm_dx kernel stores dx + r (the same sum, one rounding).

Why it pays. Each add is a pass over the result (read it, read the other term, write): the
kernel that produces the result has it in registers anyway.
"""

from __future__ import annotations

from ...graph import Node
from ...ops.registry import spec
from .rewrites import Rewriting, matmul_kernel

NAME = "epilogue"


def epilogue_of(ctx: Rewriting, m: Node) -> tuple[dict[str, int], list[int]] | None:
    """({kind: node}, absorbed nodes) when matmul ``m``'s value flows through a chain of single readers: an
    optional ``* s`` (``scale``), then up to two adds of a (N,) vector (``row``), a value of m's shape (``full``)
    or a (M, N) matrix broadcast over the batch (``mat``), at most one of each; None otherwise."""
    g, f, outs, readers = ctx.graph, ctx.f, ctx.outs, ctx.readers
    if m.op != "matmul" or m.id not in ctx.kernels or m.id in f.out_views or m.id in outs or m.dtype != "float" \
            or any(len(g.nodes[i].shape) < 2 for i in m.inputs):
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


def _shortcut_sums(ctx: Rewriting) -> int:
    """``layer_norm_dx(...) + r``: the shortcut's kernel adds r as it writes dx; the add runs no kernel."""
    g, f, outs = ctx.graph, ctx.f, ctx.outs
    order = {n.id: k for k, n in enumerate(ctx.compute)}
    done = 0
    for n in ctx.compute:
        if n.op != "add" or n.id in outs or n.id in f.skip or n.dtype != "float" \
                or any(g.nodes[i].shape != n.shape for i in n.inputs) or n.inputs[0] == n.inputs[1]:
            continue
        for s, r in (n.inputs, n.inputs[::-1]):
            if f.shortcuts.get(s, ("",))[0] != "layer_norm_dx" or s in outs or s in f.resid \
                    or [x.id for x in ctx.readers.get(s, [])] != [n.id]:
                continue
            owner = f.root(r)
            if g.nodes[r].dtype != "float" or r in f.provided_by or \
                    not (spec(g.nodes[owner].op).leaf or order.get(owner, len(order)) < order[s]):
                continue
            f.resid[s] = r
            f.bias_add[n.id] = s
            f.alias[n.id] = s
            ctx.remove(n.id, f"// {n.op} (node #{n.id}) runs no kernel of its own: the layer_norm_dx kernel of node "
                             f"#{s} below adds node #{r} (binding 8) as it writes its result, into its own buffer, "
                             f"which this node's readers read\n", s)
            done += 1
            break
    return done


def run(ctx: Rewriting) -> str:
    """Fold adds (and a scale) into the matmul or layer_norm_dx kernel that produces their input."""
    f = ctx.f
    for n in ctx.compute:
        found = epilogue_of(ctx, n)
        if found is None:
            continue
        parts, adds = found
        ctx.kernels[n.id] = matmul_kernel   # (the transposes pass gave it this kernel already, when it ran)
        for kind, table in (("row", f.bias), ("full", f.resid), ("mat", f.mat), ("scale", f.scale)):
            if kind in parts:
                table[n.id] = parts[kind]
        for add in adds:
            f.bias_add[add] = n.id
            f.alias[add] = n.id
            ctx.remove(add, f"// {ctx.graph.nodes[add].op} (node #{add}) runs no kernel of its own: the matmul of node "
                            f"#{n.id} below computes this value as it stores its result (epilogue: * the scale in word "
                            f"40, + Bias: a row vector, binding 4; + Resid: a value of the result's shape, binding 5; "
                            f"+ Mat: a matrix, binding 7)\n", n.id)
    into_matmuls = len(f.bias_add)
    into_shortcuts = _shortcut_sums(ctx)
    return f"{into_matmuls} add/scale node(s) folded into matmul epilogues, {into_shortcuts} into layer_norm_dx kernels"
