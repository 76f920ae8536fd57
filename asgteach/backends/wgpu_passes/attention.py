"""Pass ``attention``: scaled dot-product attention, forward and backward, as fused kernels.

What it rewrites. ``nn.MultiHeadAttention`` builds attention from graph ops, so that a
reader can click on every step (q, k, v of shape (B, H, T, dh))::

    scores  = q @ transpose(k) * scale  (+ causal mask) (+ key padding bias)
    weights = softmax(scores, axis=-1)
    heads   = weights @ v

and the gradient graph holds the rules of each op: ``dW = dO @ transpose(v)``,
``dv = transpose(weights) @ dO``, softmax's ``dS = weights * (dW - sum(dW * weights))``,
``dq = dS * scale @ k``, ``dk = transpose(transpose(q) @ (dS * scale))``. Every one of
those is a (B, H, T, T) tensor: the scores, the weights, dW, dS... written to memory and
read back, a dozen times per attention layer per step.

This pass finds that pattern, node by node (:func:`match_forward`, :func:`match_backward`:
the ops, the single readers, the scale constant, a causal mask recognised by its values, a
key bias of shape (B, 1, 1, T)) and gives it to kernels that never store a (T, T) tensor
(``shaders/attention_fwd.wgsl``, ``shaders/attention_bwd.wgsl``, flash-attention style): the
forward keeps tiles of keys and values in workgroup memory and an *online softmax* per query
row, and writes ``heads`` plus two numbers per row (its max and 1/sum); the backward (three
launches: dq, dk, dv) recomputes the scores tile by tile from those. Every
node whose only use was inside the pattern then runs no kernel, and ``plan.shader_for``
of any of them shows the fused kernel that does its work. q, k, v and dO are read straight
out of the buffers their heads were split from (through the transposes, by strides), and
heads, dq, dk, dv are written straight into the layout of the transposes that merge the
heads back (those transposes run no kernel).

When it runs. Only where the (T, T) tensors are large: an attention whose scores take at least
``FUSE_FROM_BYTES`` (B * H * T * T floats, 1 GiB), where memory is what they cost: several of them
are alive at once in a training step, gigabytes each, and one over the GPU's per-buffer limit (2 GiB
on an H100) keeps the unfused plan from compiling at all. Below it the pass leaves attention as it is
and says so in ``plan.passes`` (a causal one's products then skip the tiles of zeros: the pass
``causal_tiles``), because the unfused plan (two tiled matrix products and a softmax
kernel each way) was faster at every size measured on an H100 (bench/README.md, issue 27): the LM
step of bench/lm_step_gpu.py took 58.3 ms fused against 51.9-53.5 ms unfused at seq 1024, and the
fused kernels of one attention layer 1.16-1.21x the unfused ones' time at seq 256 and 1024. These
kernels give each thread one row (ROWS rows per workgroup) and run on the GPU's plain f32 units.
Tried and measured slower there, and not kept: register blocks as the GEMMs have (each thread a 4 x 4
block of the scores and 4 rows of the output, tiles in 28-32 KiB of workgroup memory): 3.6x slower.
There, workgroup memory costs time per workgroup (8 or 24 KiB of it added, unused, to these kernels
made them 1.37x and 2.4x slower), and reads of distinct addresses per thread seem to cost more
than these kernels' reads of one key by every thread at once. Also tried: smaller tiles, and
workgroups that loop over several row blocks (no gain); subgroup shuffles instead of workgroup memory
(keys and values passed between lanes, or the head dimension split over lanes that share several rows):
the best forward 1.33x slower, most 2x or more (bench/README.md, issue 27, third pass).

A pattern that does not match exactly (dropout on the weights, the weights read by
something else, a mask of another shape, a head size over 128...) is left as it is, to the
other passes. The graph is unchanged: only what the GPU runs is.

Why it pays: memory. The (T, T) tensors are the part of a transformer step that grows with
the square of the sequence (at T = 1024 each is 4 MB per head, and a training step keeps
several alive); with the pass the step's memory grows with T instead (the LM step of
bench/lm_step_gpu.py at seq 1024, batch 16, on an H100: 3.1 GiB of buffers instead of 6.2; at seq
2048, batch 16, whose (16, 8, 2048, 2048) scores are 2 GiB, only the fused plan compiles: 5.3 GiB).
Time: not yet (above).
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...graph import Graph, Node
from ..wgpu_device import family_source, shader_text
from ..wgpu_kernels import Dispatch, fbits, groups_for
from ..wgpu_matmul import Tile
from .out_views import contiguous
from .rewrites import Made, Rewriting

NAME = "attention"
MAX_HEAD = 128          # head sizes above this keep the unfused kernels (a thread holds a few rows of dh)
SHARED_BYTES = 16384    # workgroup memory a tile may use: WebGPU's guaranteed minimum
ROWS = 128              # threads per workgroup (shaders/attention_common.wgsl): a query or key row each
#                         (128 measured 5 % faster than 64, 256 or 32 on an H100: bench/README.md)
_SKIP_BELOW = -1e6      # a causal mask value this negative adds exactly 0 after exp: masked tiles are skipped
#: fuse an attention only when one of its (T, T) tensors takes at least this many bytes (see the docstring)
FUSE_FROM_BYTES = 2**30

View = tuple[int, tuple[int, int, int, int]]   # (buffer node, strides of the kernel's (b, h, t, d) axes)
_SWAP = (0, 1, 3, 2)


@dataclass
class Attention:
    """One matched attention: where each operand is read and each result written, and the masks."""

    o: int                         # the forward's node (heads), which runs the forward kernel
    q: View
    k: View
    v: View
    scale: float
    batch: int
    heads: int
    seq: int
    dh: int
    causal: float | None = None    # the causal mask's value above the diagonal (None: no causal mask)
    causal_first: bool = True      # the causal add comes before the key bias (the graph's order)
    bias: tuple[int, tuple[int, int, int]] | None = None   # (node, strides of (b, h, key))
    inner: list[int] = field(default_factory=list)         # the forward's nodes only the kernel needs
    o_strides: tuple[int, int, int, int] | None = None      # where heads is written (set by run)
    grad: "AttentionGrad | None" = None

    def stats_id(self) -> int:
        """The scratch buffer of the rows' (max, 1/sum): written by the forward, read by the backward."""
        return -self.o - 1

    def needs(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys([self.q[0], self.k[0], self.v[0]] + ([self.bias[0]] if self.bias else [])))


@dataclass
class AttentionGrad:
    """The matched backward: dO, and the nodes that receive dq, dk and dv (with the kernel's axes in them)."""

    do: View
    dq: int
    dk: int                         # the node of transpose(q) @ dS: dk with its last two axes swapped
    dv: int
    inner: list[int] = field(default_factory=list)
    holder: int = -1                # the first of dq, dk, dv in the plan: it runs the backward kernels
    out: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)   # role -> strides written


# --- recognising the pattern ---------------------------------------------------------------------
def _walk(g: Graph, nid: int, axmap: tuple[int, ...]) -> View:
    """The buffer node that operand ``nid`` is read from through transposes, and the strides there of the
    kernel's axes (``axmap``: kernel axis -> axis of ``nid``)."""
    cur, amap = nid, list(axmap)
    while g.nodes[cur].op == "transpose":
        perm = tuple(g.nodes[cur].attrs["axes"])
        amap = [perm[a] for a in amap]
        cur = g.nodes[cur].inputs[0]
    st = contiguous(g.nodes[cur].shape)
    return cur, tuple(st[a] for a in amap)


def _scalar(g: Graph, n: Node) -> float | None:
    if n.op != "constant" or n.size != 1 or n.dtype != "float" or n.id not in g.constants:
        return None
    return float(np.asarray(g.constants[n.id]).reshape(()))


def _causal_value(g: Graph, n: Node, t: int) -> float | None:
    """c when ``n`` is a constant (t, t) matrix of zeros on and below the diagonal and c above it."""
    if n.op != "constant" or n.id not in g.constants or n.dtype != "float" or n.shape[-2:] != (t, t) \
            or any(d != 1 for d in n.shape[:-2]) or t < 2:
        return None
    m = np.asarray(g.constants[n.id], np.float32).reshape(t, t)
    c = float(m[0, 1])
    upper = np.triu(np.ones((t, t), bool), k=1)
    if not np.all(m[~upper] == 0) or not np.all(m[upper] == np.float32(c)) or not math.isfinite(c):
        return None
    return c


def _key_bias(n: Node, b: int, h: int, t: int) -> tuple[int, tuple[int, int, int]] | None:
    """(node, strides of (b, h, key)) when ``n`` broadcasts to the scores as one value per (batch?, head?, key)."""
    if n.dtype != "float" or len(n.shape) > 4:
        return None
    shape = (1,) * (4 - len(n.shape)) + tuple(n.shape)
    if shape[2] != 1 or shape[3] != t or shape[0] not in (1, b) or shape[1] not in (1, h):
        return None
    st = contiguous(shape)
    return n.id, (st[0] if shape[0] != 1 else 0, st[1] if shape[1] != 1 else 0, st[3])


def _other(n: Node, nid: int) -> int | None:
    """The other input of a two-input node that reads ``nid`` once."""
    if len(n.inputs) != 2 or n.inputs.count(nid) != 1:
        return None
    return n.inputs[1] if n.inputs[0] == nid else n.inputs[0]


def _only_reader(ctx: Rewriting, nid: int) -> Node | None:
    rs = ctx.readers.get(nid, [])
    return rs[0] if len(rs) == 1 and nid not in ctx.outs else None


def _float_shape(n: Node, shape: tuple) -> bool:
    return n.dtype == "float" and tuple(n.shape) == tuple(shape)


def match_forward(ctx: Rewriting, o: Node) -> Attention | None:
    """The attention whose ``heads`` is ``o`` = softmax(q @ k^T * scale + masks) @ v, else None."""
    g = ctx.graph
    if o.op != "matmul" or len(o.shape) != 4 or o.dtype != "float":
        return None
    w, v = (g.nodes[i] for i in o.inputs)
    b, h, t, dh = o.shape
    if w.op != "softmax" or not _float_shape(w, (b, h, t, t)) or w.attrs.get("axis", -1) % 4 != 3 \
            or not _float_shape(v, (b, h, t, dh)) or dh > MAX_HEAD or w.id in ctx.outs or t < 1:
        return None
    inner = [w.id]
    cur = g.nodes[w.inputs[0]]
    causal, bias, met = None, None, []
    for _ in range(2):   # up to two adds: the causal mask and a key bias, at most one of each
        if cur.op != "add" or _only_reader(ctx, cur.id) is None or not _float_shape(cur, (b, h, t, t)) \
                or len(cur.inputs) != 2 or cur.inputs[0] == cur.inputs[1]:
            break
        x, y = (g.nodes[i] for i in cur.inputs)
        scores, extra = (x, y) if x.shape == cur.shape else (y, x)
        if scores.shape != cur.shape or extra.shape == cur.shape:
            return None
        c = _causal_value(g, extra, t) if causal is None else None
        kb = _key_bias(extra, b, h, t) if bias is None and c is None else None
        if c is None and kb is None:
            return None
        if c is not None:
            causal = c
        else:
            bias = kb
        met.append("causal" if c is not None else "bias")
        inner.append(cur.id)
        cur = scores
    causal_first = met != ["causal", "bias"]   # (walking back, the add met first is the graph's last one)
    if cur.op != "mul" or _only_reader(ctx, cur.id) is None or not _float_shape(cur, (b, h, t, t)):
        return None
    found = None
    for mm_id, c_id in (cur.inputs, cur.inputs[::-1]):
        scale = _scalar(g, g.nodes[c_id])
        if scale is not None and g.nodes[mm_id].op == "matmul":
            found = g.nodes[mm_id], scale
            break
    if found is None:
        return None
    mm, scale = found
    if _only_reader(ctx, mm.id) is None or not _float_shape(mm, (b, h, t, t)):
        return None
    qn, ktn = (g.nodes[i] for i in mm.inputs)
    if not _float_shape(qn, (b, h, t, dh)) or not _float_shape(ktn, (b, h, dh, t)):
        return None
    inner += [cur.id, mm.id]
    return Attention(o.id, _walk(g, qn.id, (0, 1, 2, 3)), _walk(g, ktn.id, _SWAP), _walk(g, v.id, (0, 1, 2, 3)),
                     scale, b, h, t, dh, causal, causal_first, bias, inner)


def match_backward(ctx: Rewriting, a: Attention) -> AttentionGrad | None | bool:
    """The gradient graph of attention ``a``: an :class:`AttentionGrad`; None when the weights have no other
    reader than ``heads`` (no backward in this plan); False when they do but not exactly as the rules build it."""
    g, outs = ctx.graph, ctx.outs
    o = g.nodes[a.o]
    w = g.nodes[o.inputs[0]]
    others = [r for r in ctx.readers.get(w.id, []) if r.id != o.id]
    if not others:
        return None
    if len(others) != 3 or any(r.id in outs for r in others):
        return False
    b, h, t, dh = o.shape
    wt = next((r for r in others if r.op == "transpose" and tuple(r.attrs["axes"]) == _SWAP), None)
    muls = [r for r in others if r.op == "mul" and _float_shape(r, w.shape)]
    if wt is None or len(muls) != 2:
        return False
    dv = _only_reader(ctx, wt.id)
    if dv is None or dv.op != "matmul" or dv.inputs[0] != wt.id or not _float_shape(dv, (b, h, t, dh)):
        return False
    gnode = g.nodes[dv.inputs[1]]
    # one mul reads dW and w (feeding the row sums), the other reads w and (dW - rowsum)
    for p1, p2 in (muls, muls[::-1]):
        dw_id = _other(p1, w.id)
        s_id = _other(p2, w.id)
        if dw_id is None or s_id is None:
            continue
        dw, sub = g.nodes[dw_id], g.nodes[s_id]
        if dw.op != "matmul" or sub.op != "sub" or sub.inputs[0] != dw.id or dw.inputs[0] != gnode.id:
            continue
        if _walk(g, dw.inputs[1], _SWAP) != a.v or not _float_shape(dw, w.shape):
            return False
        rsum = g.nodes[sub.inputs[1]]
        axis = rsum.attrs.get("axis")
        axes = tuple(np.atleast_1d(axis).tolist()) if axis is not None else ()
        if rsum.op != "sum" or rsum.inputs != (p1.id,) or not rsum.attrs.get("keepdims") \
                or tuple(x % 4 for x in axes) != (3,):
            return False
        if sorted(x.id for x in ctx.readers.get(dw.id, [])) != sorted((p1.id, sub.id)) \
                or [x.id for x in ctx.readers.get(p1.id, [])] != [rsum.id] or _only_reader(ctx, rsum.id) is not sub \
                or _only_reader(ctx, sub.id) is not p2 or dw.id in outs or p1.id in outs:
            return False
        sc = _only_reader(ctx, p2.id)
        if sc is None or sc.op != "mul" or not _float_shape(sc, w.shape):
            return False
        c_id = _other(sc, p2.id)
        if c_id is None or _scalar(g, g.nodes[c_id]) != a.scale:
            return False
        users = ctx.readers.get(sc.id, [])
        if sc.id in outs or len(users) != 2 or any(u.op != "matmul" for u in users):
            return False
        dq = next((u for u in users if u.inputs[0] == sc.id), None)
        dkt = next((u for u in users if u.inputs[1] == sc.id), None)
        if dq is None or dkt is None or dq is dkt or not _float_shape(dq, (b, h, t, dh)) \
                or not _float_shape(dkt, (b, h, dh, t)):
            return False
        if _walk(g, dq.inputs[1], (0, 1, 2, 3)) != a.k or _walk(g, dkt.inputs[0], _SWAP) != a.q:
            return False
        if not _float_shape(gnode, (b, h, t, dh)):
            return False
        inner = [wt.id, dw.id, p1.id, rsum.id, sub.id, p2.id, sc.id]
        return AttentionGrad(_walk(g, gnode.id, (0, 1, 2, 3)), dq.id, dkt.id, dv.id, inner)
    return False


# --- where the results go ------------------------------------------------------------------------
def _write_layout(ctx: Rewriting, nid: int, axmap: tuple[int, ...], ignore: set[int]) -> tuple[tuple, list[int]]:
    """(strides of the kernel's axes, transposes) for a result written into node ``nid``: when its only reader
    (besides ``ignore``) starts a chain of transposes, each the single reader of the one before and none an
    output, into the last one's row-major layout; else ``nid``'s own."""
    g = ctx.graph
    chain: list[int] = []
    cur = nid
    while cur not in ctx.outs:
        rs = [r for r in ctx.readers.get(cur, []) if r.id not in ignore]
        if len(rs) != 1 or rs[0].op != "transpose" or rs[0].id in ctx.outs or rs[0].id in ctx.absorbed:
            break
        cur = rs[0].id
        chain.append(cur)
    strides = contiguous(g.nodes[chain[-1] if chain else nid].shape)
    for tnode in reversed(chain):   # strides of each transpose's axes, back to those of nid's
        back = [0] * 4
        for i, p in enumerate(g.nodes[tnode].attrs["axes"]):
            back[p] = strides[i]
        strides = back
    return tuple(strides[a] for a in axmap), chain


def _tile(dh: int) -> int:
    """Rows per tile of workgroup memory: two (TILE, dh) tiles and a few numbers per row must fit."""
    d4 = -(-dh // 4)
    tile = 64
    while tile > 8 and 2 * tile * d4 * 16 + tile * 12 > SHARED_BYTES:
        tile //= 2
    return tile


# --- the kernels ------------------------------------------------------------------------------------
_LOOP = "for (var c = 0u; c < D4; c++) {"
_ROW = re.compile(r"var (\w+): array<vec4<f32>, (\d+)>;")   # a thread's own row (not var<workgroup>)


def unrolled(wgsl: str) -> str:
    """``wgsl`` with each thread's rows in registers: every ``var x: array<vec4<f32>, D4>`` becomes D4
    variables ``x_0, x_1, ...`` and every ``for (var c = 0u; c < D4; c++) { ... }`` loop is written out
    once per c. (A GPU compiler keeps an array it indexes with a loop counter in memory; written out,
    the same arithmetic runs on registers. The shader files keep the loops, which read better.)"""
    rows: dict[str, int] = {}

    def declare(m: re.Match) -> str:
        rows[m.group(1)] = int(m.group(2))
        return " ".join(f"var {m.group(1)}_{k}: vec4<f32>;" for k in range(int(m.group(2))))

    wgsl = _ROW.sub(declare, wgsl)
    d4 = max(rows.values(), default=0)
    named = re.compile(r"\b(" + "|".join(map(re.escape, rows)) + r")\[c\]") if rows else None
    out, pos = [], 0
    while (at := wgsl.find(_LOOP, pos)) >= 0:
        i, depth = at + len(_LOOP), 1
        while depth:
            depth += {"{": 1, "}": -1}.get(wgsl[i], 0)
            i += 1
        body = wgsl[at + len(_LOOP):i - 1]
        copies = []
        for k in range(d4):
            b = named.sub(lambda m, k=k: f"{m.group(1)}_{k}", body) if named else body
            copies.append("{" + re.sub(r"\bc\b", f"{k}u", b) + "}")
        out += [wgsl[pos:at], " ".join(copies)]
        pos = i
    return "".join(out) + wgsl[pos:]


def _source(family: str, a: Attention) -> tuple[str, str]:
    """(WGSL, variant) of one of the attention kernel files for this attention's head size and masks."""
    d4 = -(-a.dh // 4)
    tile = _tile(a.dh)
    skip = a.causal is not None and a.bias is None and a.causal <= _SKIP_BELOW
    fill = {"DH": a.dh, "D4": d4, "TILE": tile, "ROWS": ROWS, "CAUSAL": str(a.causal is not None).lower(),
            "BIAS": str(a.bias is not None).lower(), "CAUSAL_FIRST": str(a.causal_first).lower(),
            "SKIP": str(skip).lower()}
    helpers = shader_text("attention_common")
    for k, val in fill.items():
        helpers = helpers.replace("{{" + k + "}}", str(val))
    bias_decl = "@group(0) @binding(4) var<storage, read> bias_in: array<f32>;" if a.bias else ""
    src = unrolled(family_source(family, HELPERS=helpers, D4=d4, TILE=tile, TILE_D4=tile * d4, BIAS_DECL=bias_decl,
                                 BIAS_READ="return bias_in[i];" if a.bias else "return 0.0 * f32(i);"))
    variant = f"dh{a.dh}:t{tile}:r{ROWS}" + (":causal" if a.causal is not None else "") + (":bias" if a.bias else "") \
        + ("" if a.causal_first else ":bias-first") + (":skip" if skip else "")
    return src, variant


def _words(a: Attention, strides: dict[str, tuple]) -> np.ndarray:
    """The uniform block: sizes, the scale and mask value, then every operand's strides (common.wgsl's layout)."""
    p = np.zeros(64, dtype=np.uint32)
    p[0:4] = (a.seq, a.heads, a.batch * a.heads, -(-a.seq // ROWS))
    p[4] = fbits(a.scale)
    p[5] = fbits(a.causal if a.causal is not None else 0.0)
    for role, at in (("q", 8), ("k", 12), ("v", 16), ("o", 20), ("do", 24), ("dq", 28), ("dk", 32), ("dv", 36)):
        if role in strides:
            p[at:at + 4] = strides[role]
    if a.bias is not None:
        p[40:43] = a.bias[1]
    return p


def _reads(ctx: Rewriting, a: Attention, *more: int) -> tuple[dict[int, int], list[int]]:
    """The input bindings (1 q, 2 k, 3 v, 4 key bias) and the buffers read, by their owners."""
    root = ctx.f.root
    binds = {1: root(a.q[0]), 2: root(a.k[0]), 3: root(a.v[0])}
    if a.bias is not None:
        binds[4] = root(a.bias[0])
    return binds, list(dict.fromkeys([*binds.values(), *(root(m) for m in more)]))


def forward_kernel(ctx: Rewriting, n: Node, tile: Tile) -> Made:
    """The forward: heads (and the rows' stats) from q, k, v in one dispatch."""
    a: Attention = ctx.f.shortcuts[n.id][2]["attention"]
    src, variant = _source("attention_fwd", a)
    binds, reads = _reads(ctx, a)
    stats = a.stats_id()
    binds |= {5: n.id, 6: stats}
    words = _words(a, {"q": a.q[1], "k": a.k[1], "v": a.v[1], "o": a.o_strides})
    blocks = -(-a.seq // ROWS) * a.batch * a.heads
    d = Dispatch(n, ("attention", "f32", "fwd:" + variant), src, "attention_fwd", words, binds, groups_for(blocks),
                 scratch={stats: a.batch * a.heads * a.seq * 8})
    note = (f"// {n.op} (node #{n.id}) is computed by the fused attention kernel below (pass attention): "
            f"softmax(q @ k^T * scale + masks) @ v with q, k, v read from nodes #{a.q[0]}, #{a.k[0]}, #{a.v[0]}; "
            f"no (T, T) score matrix is stored\n")
    return Made([d], reads, note=note)


def backward_kernel(ctx: Rewriting, n: Node, tile: Tile) -> Made:
    """The backward: dq (and the rows' D = dO . O), then dk and dv, recomputing the scores tile by tile."""
    a: Attention = ctx.f.shortcuts[n.id][2]["attention"]
    gr = a.grad
    assert gr is not None
    src, variant = _source("attention_bwd", a)
    root = ctx.f.root
    binds, reads = _reads(ctx, a, a.o, gr.do[0])
    delta = -n.id - 1
    binds |= {5: root(a.o), 6: a.stats_id(), 7: root(gr.do[0]), 8: delta}
    words = _words(a, {"q": a.q[1], "k": a.k[1], "v": a.v[1], "o": a.o_strides, "do": gr.do[1], **gr.out})
    blocks = -(-a.seq // ROWS) * a.batch * a.heads
    dq = Dispatch(n, ("attention", "f32", "dq:" + variant), src, "attention_dq", words, binds | {9: gr.dq},
                  groups_for(blocks), scratch={delta: a.batch * a.heads * a.seq * 4})
    keys = {k: v for k, v in binds.items() if k != 5} | {10: gr.dk, 11: gr.dv}   # (each entry binds both)
    dk = Dispatch(n, ("attention", "f32", "dk:" + variant), src, "attention_dk", words.copy(), keys,
                  groups_for(blocks))
    dv = Dispatch(n, ("attention", "f32", "dv:" + variant), src, "attention_dv", words.copy(), dict(keys),
                  groups_for(blocks))
    note = (f"// {n.op} (node #{n.id}) is computed by the fused attention backward below (pass attention): "
            f"three dispatches write dq (node #{gr.dq}), dk (node #{gr.dk}, transposed) and dv (node #{gr.dv}) "
            f"from q, k, v, heads (node #{a.o}), its gradient (node #{gr.do[0]}) and the forward's row stats, "
            f"recomputing the scores tile by tile\n")
    return Made([dq, dk, dv], reads, first=n.id == gr.dq, note=note)


# --- the pass ------------------------------------------------------------------------------------------
def run(ctx: Rewriting) -> str:
    """Find attention patterns; run their fused kernels; drop the (T, T) nodes only they needed."""
    g, f, compute = ctx.graph, ctx.f, ctx.compute
    order = {n.id: k for k, n in enumerate(compute)}
    found: list[Attention] = []
    near = small = 0
    for n in compute:
        a = match_forward(ctx, n) if n.op == "matmul" else None
        if a is None:
            continue
        if a.batch * a.heads * a.seq * a.seq * 4 < FUSE_FROM_BYTES:
            small += 1
            continue
        gr = match_backward(ctx, a)
        if gr is False or any(g.nodes[r].op == "sum_to" for x in _results(a, gr) for r in _reader_ids(ctx, x)):
            near += 1
            continue
        a.grad = gr or None
        if a.grad is not None:
            gr = a.grad
            gr.holder = min((gr.dq, gr.dk, gr.dv), key=lambda x: order[x])
            if any(order.get(x, -1) >= order[gr.holder] for x in (*a.needs(), a.o, gr.do[0])):
                near += 1
                continue
        found.append(a)
    unfused = (f"{small} attention(s) left unfused: scores under {FUSE_FROM_BYTES / 2**20:g} MiB (FUSE_FROM_BYTES)"
               if small else "")
    if not found:
        return "; ".join([unfused or "no attention pattern in this plan"]
                         + ([f"{near} near-miss(es) left as they are"] if near else []))
    holders: dict[int, Attention] = {}
    byproducts: dict[int, int] = {}
    for a in found:
        holders[a.o] = a
        if a.grad is not None:
            holders[a.grad.holder] = a
            for role, x in (("dq", a.grad.dq), ("dk", a.grad.dk), ("dv", a.grad.dv)):
                if x != a.grad.holder:
                    byproducts[x] = a.grad.holder
                    f.provides.setdefault(a.grad.holder, {})[role] = x
    # liveness, walked back from the outputs: a holder needs the buffers its kernels read, a by-product its holder
    live = set(ctx.outs)
    for n in reversed(compute):
        if n.id not in live:
            continue
        if n.id in byproducts:
            live.add(byproducts[n.id])
            continue
        if n.id in holders:
            a = holders[n.id]
            needs: tuple[int, ...] = a.needs() if n.id == a.o else (*a.needs(), a.o, a.grad.do[0])
        else:
            needs = f.shortcuts[n.id][1] if n.id in f.shortcuts else n.inputs
        live.update(needs)
    for k, a in holders.items():
        op = "attention" if k == a.o else "attention_grad"
        f.shortcuts[k] = (op, a.needs() if k == a.o else (*a.needs(), a.o, a.grad.do[0]), {"attention": a})
        ctx.kernels[k] = forward_kernel if k == a.o else backward_kernel
    taken = sorted(holders)
    dead = 0
    for n in compute:
        if n.id in byproducts:
            f.provided_by[n.id] = byproducts[n.id]
            ctx.remove(n.id, f"// {n.op} (node #{n.id}) runs no kernel of its own: the fused attention backward that "
                             f"computes node #{byproducts[n.id]} writes this value too\n", byproducts[n.id])
        elif n.id not in live:
            k = _responsible(n.id, taken)
            f.dead[n.id] = k
            ctx.remove(n.id, f"// {n.op} (node #{n.id}) runs no kernel: its only use was inside the attention that "
                             f"the fused kernel of node #{k} computes without it (below)\n", k)
            dead += 1
    ctx.compute = [n for n in compute if n.id in live and n.id not in byproducts]
    ctx.find_readers()
    views = 0
    for a in found:   # the results go straight into the layout of the transposes that read them
        mine = set(holders) | set(byproducts)
        a.o_strides, chain = _write_layout(ctx, a.o, (0, 1, 2, 3), mine)
        views += _written_by(ctx, a.o, chain)
        if a.grad is not None:
            gr = a.grad
            for role, x, axmap in (("dq", gr.dq, (0, 1, 2, 3)), ("dk", gr.dk, _SWAP), ("dv", gr.dv, (0, 1, 2, 3))):
                gr.out[role], chain = _write_layout(ctx, x, axmap, mine)
                views += _written_by(ctx, x, chain)
    ctx.compute = [n for n in ctx.compute if n.id not in f.written_by]   # (no kernel, and no reader of a result)
    ctx.find_readers()
    fused = sum(1 for a in found if a.grad is not None)
    return (f"{len(found)} attention(s) -> the fused kernels ({fused} with their backward); {dead} nodes only they "
            f"read run no kernel, {views} transpose(s) written in place"
            + (f"; {near} near-miss(es) left as they are" if near else "") + (f"; {unfused}" if unfused else ""))


def _results(a: Attention, gr: Any) -> list[int]:
    return [a.o] + ([gr.dq, gr.dk, gr.dv] if isinstance(gr, AttentionGrad) else [])


def _reader_ids(ctx: Rewriting, nid: int) -> list[int]:
    return [r.id for r in ctx.readers.get(nid, [])]


def _written_by(ctx: Rewriting, owner: int, chain: list[int]) -> int:
    """The transposes of ``chain`` share ``owner``'s buffer, which the fused kernel writes in their layout."""
    f = ctx.f
    if chain:
        f.alias[chain[-1]] = owner
    for t in chain:
        f.written_by[t] = owner
        ctx.written.add(t)
        ctx.remove(t, f"// {ctx.graph.nodes[t].op} (node #{t}) runs no kernel of its own: the fused attention kernel "
                      f"that computes node #{owner} writes its result straight in this transpose's layout\n", owner)
    return len(chain)


def _responsible(nid: int, holders: list[int]) -> int:
    """The holder (of ``holders``, ascending) whose kernel made node ``nid`` unnecessary: the first one after it."""
    k = bisect_right(holders, nid)
    return holders[k] if k < len(holders) else holders[-1]


__all__ = ["NAME", "FUSE_FROM_BYTES", "run", "match_forward", "match_backward", "Attention", "AttentionGrad",
           "forward_kernel", "backward_kernel", "unrolled"]
