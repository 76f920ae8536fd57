"""Pass ``layer_norm_dx``: LayerNorm's input gradient, a dozen small kernels, becomes ONE.

What it rewrites. layer_norm's backward rule (``ops/nn.py``) builds the gradient of its
input from graph ops, so that a reader sees the formula::

    xc = x - mean(x);  rstd = 1 / sqrt(mean(xc * xc) + eps);  xhat = xc * rstd
    gw = g * w
    dx = rstd * ((gw - mean(gw)) - xhat * mean(gw * xhat))

This pass finds that shape in the gradient graph, node by node (:func:`match`: the ops,
the means over the last axis, the constants 1 and eps), and computes ``dx`` with the
ONE kernel of the op ``layer_norm_dx(g, x, w)`` (shaders/layer_norm.wgsl: a workgroup
per row computes its mean, 1/sigma, both means of the rule and dx). Every node whose
only use was ``dx`` then runs no kernel at all. ``xhat`` is usually read by the weight
gradient too (``sum_to(g * xhat)``): the kernel writes it as a by-product, when every
kernel that reads it runs after this one.

Why it pays. Thirteen kernels, each a trip through memory and a launch, become one pass
over the rows: in a transformer's training step, a few percent of the step per LayerNorm.

The graph is unchanged: the op layer knows nothing of this; only what the GPU runs is.
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

from ...graph import Graph, Node
from ...ops.registry import spec
from .rewrites import Made, Rewriting
from ..wgpu_kernels import layer_norm_dispatches
from ..wgpu_matmul import Tile

NAME = "layer_norm_dx"
OP = "layer_norm_dx"


def _pair(g: Graph, n: Node | None, op: str) -> tuple[Node, Node] | None:
    """The two input nodes of ``n`` if it is a ``op`` of two inputs."""
    if n is None or n.op != op or len(n.inputs) != 2:
        return None
    return g.nodes[n.inputs[0]], g.nodes[n.inputs[1]]


def _row_mean(g: Graph, n: Node) -> Node | None:
    """The input of ``n`` if ``n`` is mean(input, axis=last, keepdims=True)."""
    if n.op != "mean" or not n.attrs.get("keepdims"):
        return None
    x = g.nodes[n.inputs[0]]
    rank = len(x.shape)
    axes = tuple(a % rank for a in np.atleast_1d(n.attrs.get("axis", ())).tolist()) if rank else ()
    return x if rank and axes == (rank - 1,) else None


def _scalar(g: Graph, n: Node) -> float | None:
    if n.op != "constant" or n.size != 1 or n.dtype != "float" or n.id not in g.constants:
        return None
    return float(np.asarray(g.constants[n.id]).reshape(()))


def _same(a: Node | None, b: Node) -> bool:
    return a is not None and a.id == b.id


def _either(pair: tuple[Node, Node] | None, test) -> tuple[Node, Node] | None:
    """(a, b) of a commutative pair such that ``test(a, b)``, trying both orders."""
    if pair is None:
        return None
    a, b = pair
    return (a, b) if test(a, b) else (b, a) if test(b, a) else None


def match(g: Graph, dx: Node) -> tuple[tuple[int, int, int], float, int] | None:
    """((g, x, w), eps, xhat) when ``dx`` is LayerNorm's input gradient built as in the module docstring."""
    c_rstd = _either(_pair(g, dx, "mul"), lambda r, c: r.op == "div" and c.op == "sub")
    if c_rstd is None:
        return None
    rstd, c = c_rstd
    one_s = _pair(g, rstd, "div")
    if one_s is None or _scalar(g, one_s[0]) != 1.0 or one_s[1].op != "sqrt":
        return None
    ve = g.nodes[one_s[1].inputs[0]]
    var_eps = _either(_pair(g, ve, "add"), lambda v, e: v.op == "mean" and _scalar(g, e) is not None)
    if var_eps is None:
        return None
    sq = _row_mean(g, var_eps[0])
    xc_xc = _pair(g, sq, "mul") if sq is not None else None
    if xc_xc is None or xc_xc[0].id != xc_xc[1].id:
        return None
    xc = xc_xc[0]
    x_mu = _pair(g, xc, "sub")
    if x_mu is None or not _same(_row_mean(g, x_mu[1]), x_mu[0]):
        return None
    x = x_mu[0]
    a_b = _pair(g, c, "sub")
    if a_b is None:
        return None
    a, b = a_b
    gw_m1 = _pair(g, a, "sub")
    if gw_m1 is None or not _same(_row_mean(g, gw_m1[1]), gw_m1[0]):
        return None
    gw = gw_m1[0]
    xhat_m2 = _either(_pair(g, b, "mul"), lambda h, m: m.op == "mean")
    if xhat_m2 is None:
        return None
    xhat, m2 = xhat_m2
    if _either(_pair(g, xhat, "mul"), lambda u, r: u.id == xc.id and r.id == rstd.id) is None:
        return None
    p = _row_mean(g, m2)
    if p is None or _either(_pair(g, p, "mul"), lambda u, h: u.id == gw.id and h.id == xhat.id) is None:
        return None
    d = x.shape[-1] if x.shape else None
    g_w = _either(_pair(g, gw, "mul"), lambda u, v: u.shape == x.shape and v.shape == (d,))
    if g_w is None or x.shape != dx.shape or any(n.dtype != "float" for n in (x, *g_w)):
        return None
    return (g_w[0].id, x.id, g_w[1].id), _scalar(g, var_eps[1]), xhat.id


def shortcut_kernel(ctx: Rewriting, n: Node, tile: Tile) -> Made:
    """``n`` computed by the layer_norm_dx kernel of its matched inputs (plus r when ``epilogue`` added one)."""
    f, root = ctx.f, ctx.f.root
    op, inputs, attrs = f.shortcuts[n.id]
    stand_in = Node(n.id, op, tuple(root(i) for i in inputs), attrs, n.shape, n.dtype, n.name, n.phase, n.source)
    plus = root(f.resid[n.id]) if n.id in f.resid else None
    ds = layer_norm_dispatches(ctx.graph, stand_in, (f.provides.get(n.id) or {}).get("xhat"), plus) if n.size else []
    note = (f"// {n.op} (node #{n.id}) is computed by the kernel of {op} below, entry {ds[0].entry if ds else ''}: "
            f"the pass layer_norm_dx recognised it as that op of nodes {', '.join(f'#{i}' for i in inputs)}\n")
    return Made(ds, list(stand_in.inputs) + ([plus] if plus is not None else []), note=note)


def run(ctx: Rewriting) -> str:
    """Find LayerNorm input gradients; run their one kernel; drop the nodes only they needed."""
    g, f, outs, compute = ctx.graph, ctx.f, ctx.outs, ctx.compute
    order = {n.id: k for k, n in enumerate(compute)}
    found_at = {}   # dx node -> (op, inputs, attrs, by-products its kernel may write)
    for n in compute:
        if n.op != "mul" or n.dtype != "float":
            continue
        found = match(g, n)
        if found is None:
            continue
        inputs, eps, xhat = found
        ready = [spec(g.nodes[i].op).leaf or order.get(i, len(order)) < order[n.id] for i in inputs]
        if all(ready):
            found_at[n.id] = (OP, inputs, {"eps": eps}, {"xhat": xhat})
    if not found_at:
        return "no LayerNorm input gradient in this plan"
    # Liveness, walked back from the outputs: a shortcut node needs its op's inputs instead of its own. A
    # by-product the shortcut's kernel can write (x_hat) is taken from it when every kernel that still reads
    # it runs AFTER the shortcut (kernels run in graph order) and it is not an output.
    live = set(outs)
    first_reader: dict[int, int] = {}   # node -> the earliest position of a live kernel that reads it
    offered: dict[int, int] = {}       # by-product node -> the live shortcut whose kernel can write it
    for n in reversed(compute):
        if n.id not in live:
            continue
        if n.id in found_at:
            op, inputs, attrs, stores = found_at[n.id]
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
    for k in taken:
        ctx.kernels[k] = shortcut_kernel
    for n in compute:
        if n.id not in live:
            f.dead[n.id] = k = _responsible(n.id, taken)
            ctx.remove(n.id, f"// {n.op} (node #{n.id}) runs no kernel: its only use was node #{k}, which one "
                             f"kernel computes from other nodes (below)\n", k)
        elif n.id in f.provided_by:
            k = f.provided_by[n.id]
            ctx.remove(n.id, f"// {n.op} (node #{n.id}) runs no kernel of its own: the kernel that computes node "
                             f"#{k} writes this value too, as a by-product\n", k)
    ctx.compute = [n for n in compute if n.id in live and n.id not in f.provided_by]
    ctx.find_readers()
    return (f"{len(taken)} LayerNorm input gradient(s) -> the layer_norm_dx kernel "
            f"(nodes {', '.join(f'#{k}' for k in taken)}); {len(f.dead)} nodes only they read run no kernel"
            + (f"; {len(f.provided_by)} x_hat written as a by-product" if f.provided_by else ""))


def _responsible(nid: int, shortcuts: list[int]) -> int:
    """The shortcut (of ``shortcuts``, ascending) whose kernel made node ``nid`` unnecessary: the first one after
    it, else the first (for messages)."""
    k = bisect_right(shortcuts, nid)
    return shortcuts[k] if k < len(shortcuts) else shortcuts[0]
