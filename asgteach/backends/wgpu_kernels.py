"""Kernels: the GPU dispatches of one node, generated from its op's record.

This is where a node becomes WGSL: :func:`lower` reads the op's GPU facts (which kernel
family of ``shaders/`` it uses; an elementwise op's formula) and writes the dispatches that
compute the node, alone. The plain plan (``wgpu_plain``) is this function called once per
node; the optimised plan's passes (``wgpu_passes``) call the variants below
(:func:`matmul_dispatches`' transposed reads and epilogues, :func:`reduce_dispatches`' product, ...) for the
nodes they rewrite.

A :class:`Dispatch` (``wgpu_dispatch``, with the stride and uniform-block arithmetic every family
shares) says which kernel, which uniform block, which values sit at which binding, and how many
workgroups to launch. Nothing here touches the GPU: the Plan turns dispatches into pipelines and
bind groups once, at compile time.

The trick that keeps the kernels few and general is *strides*. A tensor is a flat,
row-major buffer; reading it "as if" it had another shape only changes the stride list:
a broadcast axis has stride 0, a transposed view permutes strides, ``x[1:7:2]`` starts at
offset 1 with stride 2. So broadcasting, transposes, slices and reductions over any axes
are all the same few kernels with different numbers in their uniform block.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..graph import Graph, Node
from ..ops.registry import spec, wgsl_input_names
from ..ops.shape import decode_index
from .wgpu_device import family_source, shader_text
from .wgpu_dispatch import (MAX_DIMS, MAX_GROUPS, NAN_BITS, WG_LINEAR, Dispatch, UnsupportedOnGpu,  # noqa: F401 (named here too)
                            broadcast_strides, check_rank, collapse, contiguous_strides, family_of, fbits, formula,
                            groups_for, index_bound_of, reduce_entry, reduced_axes_of, uniform_words)
from .wgpu_matmul import CAUSAL_TILE, FALLBACK_TILES, Tile, matmul_source, rows_outermost, swap_zero

__all__ = ["Dispatch", "lower", "matmul_dispatches", "reduce_dispatches", "layer_norm_dispatches", "gemm",
           "UnsupportedOnGpu", "MAX_DIMS", "MIN_GROUPS", "NAN_BITS", "WG_LINEAR", "FAMILIES", "family_of",
           "reduce_entry", "reduced_axes_of", "index_bound_of", "ew_expr", "ew_function", "ew_params", "ew_attr_values",
           "ew_variant", "ew_load", "elementwise_source", "uniform_words", "fbits", "groups_for"]

# --- elementwise ---------------------------------------------------------------------------
# An elementwise op brings its own formula: ``OpSpec.gpu.expr``, one WGSL expression of its
# inputs (x; a, b; a, b, c) and of its number attributes by name. The kernel around it —
# one thread per element, each input read through its broadcast strides — is the same for
# every op, so a new op (a student's softsign) runs on the GPU with no change here.
def ew_expr(node: Node) -> str:
    """The WGSL formula of an elementwise node (an op whose formula depends on an attribute computes it)."""
    expr = formula(node.op)
    return expr(**node.attrs) if callable(expr) else str(expr)


def ew_params(node: Node) -> list[str]:
    """The names the formula uses: the inputs (x, or a, b, ...), then the number attributes."""
    return [*wgsl_input_names(len(node.inputs)), *spec(node.op).float_attrs]


def ew_attr_values(node: Node) -> list[float]:
    """The node's number attributes, in the order of :func:`ew_params` (each becomes one uniform word)."""
    return [float(node.attrs[a]) for a in spec(node.op).float_attrs]


def ew_function(node: Node, fn: str = "op") -> str:
    """The op as a WGSL function: ``fn op(x: f32, beta: f32) -> f32 { return f_softplus(x, beta); }``."""
    params = ", ".join(f"{p}: f32" for p in ew_params(node))
    return f"fn {fn}({params}) -> f32 {{ return {ew_expr(node)}; }}"


def ew_variant(node: Node, g: Graph | None = None) -> str:
    """A readable name for the op's kernel: its name, its non-number attributes, which inputs hold ints."""
    s = spec(node.op)
    name = node.op + "".join(f":{v}" for k, v in sorted(node.attrs.items()) if k not in s.float_attrs)
    if g is not None and any(g.nodes[i].dtype == "int" for i in node.inputs):
        name += ":" + "".join("i" if g.nodes[i].dtype == "int" else "f" for i in node.inputs)
    return name


def ew_load(node: Node, src: str) -> str:
    """WGSL that turns the 32 bits ``src`` of ``node``'s value into the f32 a formula computes with."""
    return f"f32(bitcast<i32>({src}))" if node.dtype == "int" else f"bitcast<f32>({src})"


def elementwise_source(g: Graph, node: Node, attr_word: int) -> str:
    """elementwise.wgsl around this node's formula: its bindings, loads, function and call filled in."""
    ins = [g.nodes[i] for i in node.inputs]
    names = wgsl_input_names(len(ins))
    inputs = [f"@group(0) @binding({1 + k}) var<storage, read> in{k}: array<u32>;" for k in range(len(ins))]
    loads = [f"    let {n} = {ew_load(x, f'in{k}[offset_of(i, {k}u)]')};" for k, (n, x) in enumerate(zip(names, ins))]
    attrs = [f"pf({attr_word + j}u)" for j in range(len(spec(node.op).float_attrs))]
    return family_source("elementwise", INPUTS="\n".join(inputs), MATH=shader_text("elementwise_math"),
                         OP=ew_function(node), ENTRY=f"main{len(ins)}", LOADS="\n".join(loads),
                         CALL=f"op({', '.join([*names, *attrs])})")


def _elementwise(g: Graph, node: Node) -> list[Dispatch]:
    ins = [g.nodes[i] for i in node.inputs]
    out = node.shape
    strides = [broadcast_strides(x.shape, out) for x in ins]
    shape, sts = collapse(out, *strides)
    check_rank(node, shape)
    flags = sum(1 << k for k, x in enumerate(ins) if x.shape == out)
    words: dict[str, Any] = {"w0": node.size, "w1": len(shape), "w2": NAN_BITS, "w5": flags, "w8": shape}
    for k, st in enumerate(sts):
        words[f"w{16 + 8 * k}"] = st
    attr_word = 16 + 8 * len(ins)   # the number attributes follow the inputs' strides, one word each
    values = ew_attr_values(node)
    if attr_word + len(values) > 64:
        raise UnsupportedOnGpu(f"{node.op} (node #{node.id}) has {len(values)} number attributes; "
                               f"{64 - attr_word} fit in the kernel's uniform block")
    if values:
        words[f"w{attr_word}"] = [fbits(v) for v in values]
    binds = {1 + k: x.id for k, x in enumerate(ins)}
    binds[4] = node.id
    return [Dispatch(node, (node.op, "f32", ew_variant(node, g)), elementwise_source(g, node, attr_word),
                     f"main{len(ins)}", uniform_words(**words), binds, groups_for(math.ceil(node.size / WG_LINEAR)))]


# --- reductions ----------------------------------------------------------------------------
# Which axes an op reduces is its spec's ``gpu.reduced_axes``; which kernel of reduce.wgsl does it is
# ``gpu.entry`` (default: the op's name). These entries may split a huge reduction in two stages:
_SPLITTABLE = ("sum_wg", "mean_wg", "max_wg")
_ADDING = ("sum_wg", "mean_wg")   # ... and these add, so a column pass (sum_cols) can feed them partial sums


def _per_group(n_out: int, n_red: int, inner_strides: list[int]) -> bool:
    """Workgroup per output (True) or thread per output (False)?

    Memory is fast when neighbouring threads read neighbouring addresses. Reducing the
    contiguous last axis: the threads of one workgroup read a row side by side, so a
    workgroup per output wins unless rows are tiny. Reducing leading axes (sum_to of a
    gradient over the batch): neighbouring *outputs* are neighbours in memory, so one
    thread per output reads side by side with its neighbours — as long as there are
    enough outputs to keep the GPU busy.
    """
    contiguous = bool(inner_strides) and inner_strides[-1] == 1
    if contiguous:
        return n_red >= 32 or n_out < 2048
    return n_out < 16384 and n_red >= 32


def reduces_by_adding(node: Node) -> bool:
    """Does ``node`` run one of reduce.wgsl's adding kernels (sum, mean, sum_to), which can reduce a product?"""
    return family_of(node.op) == "reduce" and reduce_entry(node.op) + "_wg" in _ADDING


@functools.lru_cache(maxsize=2)
def _product_source(text: str) -> str:
    """reduce.wgsl reading x[i] * y[i] where it reads x[i]: a sum or mean of a product in one pass."""
    load = "acc += x[base + inner_off(r)];"
    if load not in text:
        raise RuntimeError("reduce.wgsl changed: its element load is not where the product variant expects it")
    text = text.replace(load, "{ let i = base + inner_off(r); acc += x[i] * y[i]; }")
    for one, prod in (("fn x_at(i: u32) -> f32 { return x[i]; }", "fn x_at(i: u32) -> f32 { return x[i] * y[i]; }"),
                      ("fn x4_at(i: u32) -> vec4<f32> { return x4[i]; }",
                       "fn x4_at(i: u32) -> vec4<f32> { return x4[i] * y4[i]; }")):
        if one not in text:
            raise RuntimeError("reduce.wgsl changed: x_at / x4_at is not where the product variant expects it")
        text = text.replace(one, prod)
    decl = "@group(0) @binding(2) var<storage, read_write> out: array<u32>;\n"
    return text.replace(decl, decl + "@group(0) @binding(3) var<storage, read> y: array<f32>;   // x * y is reduced\n"
                        "@group(0) @binding(3) var<storage, read> y4: array<vec4<f32>>;\n")


def reduce_dispatches(g: Graph, node: Node, product: tuple[int, int] | None = None) -> list[Dispatch]:
    """A reduction (sum, mean, max, var, sum_to...) over the axes its spec's ``reduced_axes`` names.

    ``product``: (a, b) buffers when the reduced value is a * b, multiplied while reading (the
    optimised plan's ``products`` pass); the plain plan reads the node's input."""
    (x,) = (g.nodes[i] for i in node.inputs)
    reduced_axes = reduced_axes_of(node.op)
    if reduced_axes is None:
        raise UnsupportedOnGpu(f"op {node.op!r} uses the reduce kernels but its spec has no reduced_axes")
    axes = tuple(reduced_axes(x.shape, **node.attrs))
    st = contiguous_strides(x.shape)
    oshape, (ost,) = collapse(tuple(d for i, d in enumerate(x.shape) if i not in axes),
                              [s for i, s in enumerate(st) if i not in axes])
    ishape, (ist,) = collapse(tuple(x.shape[a] for a in axes), [st[a] for a in axes])
    check_rank(node, oshape)
    check_rank(node, ishape)
    n_out, n_red = node.size, int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    scale = 1.0 / n_red if n_red else math.nan   # mean and var divide by it (the mean of nothing is NaN)
    per_group = _per_group(n_out, n_red, ist)
    base = reduce_entry(node.op)
    entry = base + ("_wg" if per_group else "_t")
    src = family_source("reduce")
    scratch = -node.id - 1
    reads: dict[int, int] = {1: x.id}
    src1, tag = src, ""   # the first stage's source: it is the one that reads x
    if product is not None:
        reads, src1, tag = {1: product[0], 3: product[1]}, _product_source(src), ":product"
    if per_group and base + "_wg" in _ADDING and ist and ist[-1] != 1 and n_red >= 64:
        # a sum over leading axes (a bias gradient): threads over (output, chunk), then rows of partial sums
        chunks = max(1, min(-(-131072 // n_out), n_red // 16))
        chunk = -(-n_red // chunks)
        chunks = -(-n_red // chunk)
        first = uniform_words(w0=n_out, w1=n_red, w2=len(oshape), w3=len(ishape), w5=NAN_BITS, w6=chunk, w7=chunks,
                        w8=oshape, w16=ost, w24=ishape, w32=ist)
        # a plain (rows, n_out) matrix with n_out % 4 == 0 reads four columns at a time
        cols4 = n_out % 4 == 0 and oshape == [n_out] and ost == [1] and ist == [n_out]
        entry1 = "sum_cols4" if cols4 else "sum_cols"
        return [Dispatch(node, (node.op, "f32", entry1 + tag), src1, entry1, first, {**reads, 2: scratch},
                         groups_for(math.ceil(n_out // (4 if cols4 else 1) * chunks / WG_LINEAR)),
                         scratch={scratch: n_out * chunks * 4}),
                _segmented(node, base + "_wg", src, n_out, chunks, scale, {1: scratch, 2: node.id})]
    chunks = 1
    if per_group and entry in _SPLITTABLE and n_out < 1024 and n_red >= 65536:
        chunks = min(-(-2048 // n_out), -(-n_red // 4096))
    chunk = -(-n_red // chunks)
    lp = _lanes(chunk) if entry in _SPLITTABLE else WG_LINEAR
    if chunks == 1:
        words = uniform_words(w0=n_out, w1=n_red, w2=len(oshape), w3=len(ishape), w4=fbits(scale), w5=NAN_BITS,
                        w6=chunk, w7=1, w8=oshape, w16=ost, w24=ishape, w32=ist, w40=lp)
        groups = groups_for(math.ceil(n_out / (WG_LINEAR // lp)) if per_group else math.ceil(n_out / WG_LINEAR))
        return [Dispatch(node, (node.op, "f32", entry + tag), src1, entry, words, {**reads, 2: node.id}, groups)]
    # two stages: P partial results per output into a scratch buffer, then reduce those
    first = uniform_words(w0=n_out, w1=n_red, w2=len(oshape), w3=len(ishape), w4=fbits(scale), w5=NAN_BITS,
                    w6=chunk, w7=chunks, w8=oshape, w16=ost, w24=ishape, w32=ist, w40=lp)
    return [
        Dispatch(node, (node.op, "f32", entry + tag), src1, entry, first, {**reads, 2: scratch},
                 groups_for(math.ceil(n_out * chunks / (WG_LINEAR // lp))), scratch={scratch: n_out * chunks * 4}),
        _segmented(node, entry, src, n_out, chunks, scale, {1: scratch, 2: node.id}),
    ]


def _lanes(length: int) -> int:
    """Threads per row of a segmented *_wg reduction: about 8 elements each, 32..256 (a power of 2)."""
    lp = 32
    while lp < WG_LINEAR and lp * 8 < length:
        lp *= 2
    return lp


def _segmented(node: Node, entry: str, src: str, n_out: int, length: int, scale: float,
               binds: dict[int, int]) -> Dispatch:
    """sum_wg / mean_wg / max_wg over ``n_out`` contiguous rows of ``length`` (a split reduction's second stage)."""
    lp = _lanes(length)
    words = uniform_words(w0=n_out, w1=length, w2=1, w3=1, w4=fbits(scale), w5=NAN_BITS, w6=length, w7=1,
                    w8=[n_out], w16=[length], w24=[length], w32=[1], w40=lp)
    return Dispatch(node, (node.op, "f32", entry), src, entry, words, binds,
                    groups_for(math.ceil(n_out / (WG_LINEAR // lp))),
                    batch="partials" if entry == "sum_wg" and binds.get(1, 0) < 0 else None)


# --- copies: reshape, transpose, broadcast_to, getitem, getitem_grad, concat ---------------
def _copy(node: Node, src: int, shape: tuple, in_st: list[int], in_base: int, out_st: list[int],
          out_base: int, variant: str) -> Dispatch:
    cshape, (ist, ost) = collapse(shape, in_st, out_st)
    check_rank(node, cshape)
    n = int(np.prod(shape, dtype=np.int64))
    words = uniform_words(w0=n, w1=len(cshape), w2=in_base, w3=out_base, w8=cshape, w16=ist, w24=ost)
    return Dispatch(node, ("copy", "u32", variant), family_source("copy"), "copy", words, {1: src, 2: node.id},
                    groups_for(math.ceil(n / WG_LINEAR)))


def _fill(node: Node, bits: int) -> Dispatch:
    words = uniform_words(w0=node.size, w4=bits)
    return Dispatch(node, ("fill", "u32", ""), family_source("copy"), "fill", words, {2: node.id},
                    groups_for(math.ceil(node.size / WG_LINEAR)))


def _view(shape: tuple, index: tuple) -> tuple[tuple, list[int], int]:
    """(shape, strides, offset), in elements, of ``x[index]`` for a row-major ``x`` of ``shape``.

    numpy does the work: index a zero-memory strided array and read the view's strides
    and data pointer back, so every rule of basic indexing (negative steps, None, ...)
    is numpy's own.
    """
    st = contiguous_strides(shape)
    fake = as_strided(np.zeros(1, dtype=np.float32), shape=shape, strides=[4 * s for s in st])
    idx = decode_index(index)
    if Ellipsis not in idx:
        idx = idx + (Ellipsis,)   # all-int indices would give a numpy scalar, not a view
    view = fake[idx]
    base = (view.__array_interface__["data"][0] - fake.__array_interface__["data"][0]) // 4
    return view.shape, [s // 4 for s in view.strides], int(base)


def _copy_family(g: Graph, node: Node) -> list[Dispatch]:
    ins = [g.nodes[i] for i in node.inputs]
    x = ins[0]
    out_st = contiguous_strides(node.shape)
    if node.op == "reshape":
        return [_copy(node, x.id, node.shape, out_st, 0, out_st, 0, "reshape")]
    if node.op == "transpose":
        st = contiguous_strides(x.shape)
        return [_copy(node, x.id, node.shape, [st[a] for a in node.attrs["axes"]], 0, out_st, 0, "transpose")]
    if node.op == "broadcast_to":
        return [_copy(node, x.id, node.shape, broadcast_strides(x.shape, node.shape), 0, out_st, 0, "broadcast")]
    if node.op == "getitem":
        shape, st, base = _view(x.shape, node.attrs["index"])
        return [_copy(node, x.id, shape, st, base, out_st, 0, "getitem")]
    if node.op == "getitem_grad":
        shape, st, base = _view(tuple(node.attrs["shape"]), node.attrs["index"])
        return [_fill(node, 0), _copy(node, x.id, shape, contiguous_strides(shape), 0, st, base, "scatter")]
    if node.op == "concat":
        axis, start, out = node.attrs["axis"] % len(node.shape), 0, []
        for part in ins:
            if part.size:
                out.append(_copy(node, part.id, part.shape, contiguous_strides(part.shape), 0, out_st,
                                 start * out_st[axis], "concat"))
            start += part.shape[axis]
        return out
    raise AssertionError(node.op)


# --- fused nn ops, matmul, gather --------------------------------------------------------------
def _softmax(g: Graph, node: Node, causal: bool = False) -> list[Dispatch]:
    """softmax / log_softmax along any axis. ``causal`` (softmax along the last axis of (..., T, T) weights
    only, pass ``causal_tiles``): entries softmax_causal_*, where row i reads keys j <= i and writes 0 above."""
    (x,) = (g.nodes[i] for i in node.inputs)
    axis = node.attrs["axis"] % len(x.shape)
    st = contiguous_strides(x.shape)
    oshape, (ost,) = collapse(tuple(d for i, d in enumerate(x.shape) if i != axis),
                              [s for i, s in enumerate(st) if i != axis])
    check_rank(node, oshape)
    length = x.shape[axis]
    rows = node.size // max(length, 1)
    per_group = length >= 32 or rows < 2048
    if causal:
        assert node.op == "softmax" and axis == len(x.shape) - 1 and x.shape[-2:] == (length, length), node
    entry = node.op + ("_causal" if causal else "") + ("_wg" if per_group else "_t")
    lp = _lanes(length)
    words = uniform_words(w0=rows, w1=length, w2=st[axis], w3=len(oshape), w8=oshape, w16=ost, w40=lp)
    groups = groups_for(math.ceil(rows / (WG_LINEAR // lp)) if per_group else math.ceil(rows / WG_LINEAR))
    return [Dispatch(node, (node.op, "f32", entry), family_source("softmax"), entry, words,
                     {1: x.id, 2: node.id}, groups)]


def layer_norm_dispatches(g: Graph, node: Node, xhat: int | None = None, plus: int | None = None) -> list[Dispatch]:
    """layer_norm, or layer_norm_dx (``xhat``: also write x_hat into that node's buffer; ``plus``: a buffer
    of dx's shape added to dx as it is written: both only in the optimised plan, pass ``layer_norm_dx``)."""
    d = node.shape[-1]
    rows = node.size // max(d, 1)
    words = uniform_words(w0=rows, w1=d, w2=fbits(node.attrs["eps"]))
    if node.op == "layer_norm_dx":
        gy, x, w = node.inputs
        entry = ("layer_norm_dx" if xhat is None else "layer_norm_dx_xhat") + ("" if plus is None else "_plus")
        binds = {1: x, 2: w, 5: gy, 6: node.id} | ({} if xhat is None else {7: xhat}) \
            | ({} if plus is None else {8: plus})
        return [Dispatch(node, ("layer_norm", "f32", entry), family_source("layer_norm"), entry, words, binds,
                         groups_for(rows), stores=() if xhat is None else (7,))]
    x, w, b = node.inputs
    return [Dispatch(node, ("layer_norm", "f32", ""), family_source("layer_norm"), "layer_norm", words,
                     {1: x, 2: w, 3: b, 4: node.id}, groups_for(rows))]


def matmul_dispatches(g: Graph, node: Node, tile: Tile, operands: Any = None, out_view: Any = None,
                      bias: int | None = None, resid: int | None = None, mat: int | None = None,
                      scale: float | None = None, zero: tuple[str, ...] = ()) -> list[Dispatch]:
    """C = A @ B; the plain plan passes only ``tile``, the rest is the optimised plan's (``wgpu_passes``).

    ``operands``: ((buffer node, transposed?, row stride, batch strides), ...) when
    transposes are read in place (pass ``transposes``); a row stride / batch strides of None: contiguous.
    ``out_view``: (row stride, batch strides, swapped?) when C is written straight into the layout of
    the transposes that read it; swapped: C's columns are contiguous there, so C^T = B^T @ A^T is
    computed instead (operands exchanged, each read the other way round).
    ``bias``: the buffer of a (N,) vector added to every row of C as it is stored (pass ``epilogue``);
    ``resid``: the buffer of a value of C's shape added as C is stored (C must be written contiguously);
    ``mat``: a (M, N) matrix added to every batch's C; ``scale``: C is multiplied by it first.
    ``zero``: where A or B is zero, or C unused, on one side of the diagonal (``wgpu_matmul.ZERO_RULES``, pass
    ``causal_tiles``), said of this node's A, B and C: restated here when C^T is computed instead."""
    a, b = (g.nodes[i] for i in node.inputs)
    plain = ((a.id, False, None, None), (b.id, False, None, None))
    (a_src, ta, lda, a_bst), (b_src, tb, ldb, b_bst) = operands or plain
    a2 = (1,) + a.shape if len(a.shape) == 1 else a.shape
    b2 = b.shape + (1,) if len(b.shape) == 1 else b.shape
    m, k, n = a2[-2], a2[-1], b2[-1]
    batch = tuple(np.broadcast_shapes(a2[:-2], b2[:-2]))
    sa = _batch_strides(a2[:-2], batch, a_bst, m * k)
    sb = _batch_strides(b2[:-2], batch, b_bst, k * n)
    ldc, sc = None, None
    a_view, b_view = (a_src, ta), (b_src, tb)
    if out_view is not None:
        ldc, cst, swapped = out_view
        sc = list(cst)
        if swapped:
            m, n = n, m
            a_view, b_view, lda, ldb, sa, sb = (b_src, not tb), (a_src, not ta), ldb, lda, sb, sa
            zero = swap_zero(zero)
    else:
        sc = [int(v) * m * n for v in contiguous_strides(batch)]
    bshape, (sa, sb, sc) = collapse(batch, sa, sb, sc)
    if len(bshape) > 6:
        raise UnsupportedOnGpu(f"matmul (node #{node.id}) has {len(bshape)} batch axes; at most 6 are supported")
    nb = int(np.prod(batch, dtype=np.int64))
    if nb > MAX_GROUPS:
        raise UnsupportedOnGpu(f"matmul (node #{node.id}) has {nb} batches; at most {MAX_GROUPS} are supported")
    if (bias is not None or resid is not None or mat is not None or scale is not None) and out_view is not None:
        raise ValueError(f"matmul (node #{node.id}): an epilogue needs C written contiguously")
    return [gemm(node, tile, m, n, k, nb, bshape, sa, sb, a_view, b_view, node.id, lda, ldb, sc, ldc, bias, resid,
                  mat, scale, zero)]


def _batch_strides(shape: tuple, batch: tuple, strides: Any, matrix: int) -> list[int]:
    """An operand's batch strides in elements (0 on broadcast axes); ``strides`` None: contiguous."""
    if strides is None:
        return [s * matrix for s in broadcast_strides(shape, batch)]
    pad = (1,) * (len(batch) - len(shape))
    return [0 if d == 1 and o != 1 else st
            for d, st, o in zip(pad + tuple(shape), (0,) * len(pad) + tuple(strides), batch)]


def gemm(node: Node, tile: Tile, m: int, n: int, k: int, nb: int, bshape: list, sa: list, sb: list,
          a: tuple[int, bool], b: tuple[int, bool], out: int, lda: int | None = None,
          ldb: int | None = None, sc: list | None = None, ldc: int | None = None, bias: int | None = None,
          resid: int | None = None, mat: int | None = None, scale: float | None = None,
          zero: tuple[str, ...] = ()) -> Dispatch:
    ta, tb = a[1], b[1]
    for r in zero:   # a rule about a diagonal needs that matrix square
        square = {"A": m == k, "B": k == n, "C": m == n}[r[0]]
        if not square:
            raise ValueError(f"matmul (node #{node.id}): rule {r} needs a square {r[0]}, not (M, N, K) = {(m, n, k)}")
    ldc = n if ldc is None else ldc
    sc = [m * n] * len(bshape) if sc is None else sc   # (a single batch axis when none is given)
    lda = lda if lda is not None else (m if ta else k)
    ldb = ldb if ldb is not None else (k if tb else n)
    # The vec4 kernel needs tile-multiple sizes: if the preferred tile misses, a smaller one may fit.
    # A grid of few workgroups leaves most of a large GPU idle (an H100 has 132 multiprocessors), so
    # a smaller tile is also taken when the preferred one gives fewer than MIN_GROUPS of them.
    def count(c: Tile) -> int:
        return math.ceil(n / c.bn) * math.ceil(m / c.bm) * nb

    fits = [c for c in (tile, *FALLBACK_TILES) if m % c.bm == 0 and n % c.bn == 0 and k % c.bk == 0]
    if zero and m % CAUSAL_TILE.bm == 0 and n % CAUSAL_TILE.bn == 0 and k % CAUSAL_TILE.bk == 0:
        tile = CAUSAL_TILE   # (finer tiles leave out more of the zeros: wgpu_matmul.CAUSAL_TILE)
    elif fits:
        tile = next((c for c in fits if count(c) >= MIN_GROUPS), max(fits, key=count))
    aligned = all(v % 4 == 0 for v in (lda, ldb, ldc, *sa, *sb, *sc))   # every vec4 read starts on a vec4
    fast = m % tile.bm == 0 and n % tile.bn == 0 and k % tile.bk == 0 and aligned
    words = uniform_words(w0=m, w1=n, w2=k, w3=len(bshape), w4=lda, w5=ldb, w6=ldc, w8=bshape, w16=sa, w24=sb, w32=sc,
                    w40=fbits(scale if scale is not None else 1.0))
    variant = f"{tile}:{'fast' if fast else 'edge'}:{'T' if ta else 'N'}{'T' if tb else 'N'}"
    variant += (":scale" if scale is not None else "") + (":bias" if bias is not None else "")
    variant += (":resid" if resid is not None else "") + (":mat" if mat is not None else "")
    variant += "".join(f":zero-{r}" for r in zero)
    groups = (math.ceil(n / tile.bn), math.ceil(m / tile.bm), nb)
    if rows_outermost(zero):   # (columns, batch, row blocks): see shaders/matmul.wgsl, "Causal tiles"
        groups = (groups[0], nb, groups[1])
    binds = {1: a[0], 2: b[0], 3: out, 4: bias, 5: resid, 7: mat}
    binds = {k: v for k, v in binds.items() if v is not None}
    source = matmul_source(tile, fast, ta, tb, bias is not None, resid is not None, mat is not None, scale is not None,
                           tuple(zero))
    return Dispatch(node, ("matmul", "f32", variant), source, "matmul", words, binds, groups)


#: fewer workgroups than this and ``gemm`` looks for a smaller tile (bench/gemm_shapes.py on an H100:
#: the LM head's (4096, 512) @ (512, 256) ran at 17.5 TFLOP/s in 64 tiles of 128 x 128, 26 in 128 of 128 x 64)
MIN_GROUPS = 128


def _gather(g: Graph, node: Node) -> list[Dispatch]:
    ids, src = (g.nodes[i] for i in node.inputs)
    if node.op == "embedding":
        v, d = src.shape
        words = uniform_words(w0=node.size, w1=d, w2=v, w3=NAN_BITS)
        return [Dispatch(node, ("embedding", "f32", ""), family_source("gather"), "embedding", words,
                         {1: ids.id, 2: src.id, 3: node.id}, groups_for(math.ceil(node.size / WG_LINEAR)))]
    v, d = node.shape[0], int(np.prod(node.shape[1:], dtype=np.int64))
    words = uniform_words(w0=src.size, w1=d, w2=v, w3=NAN_BITS)
    return [_fill(node, 0), Dispatch(node, ("embedding_grad", "f32", ""), family_source("gather"),
                                     "embedding_grad", words, {1: ids.id, 2: src.id, 4: node.id},
                                     groups_for(math.ceil(src.size / WG_LINEAR)))]


# --- convolution and pooling (NCHW) ----------------------------------------------------------
def _conv(g: Graph, node: Node) -> list[Dispatch]:
    """conv2d and its gradients: one thread per output (grad_weight: a workgroup per output)."""
    a, b = (g.nodes[i] for i in node.inputs)
    attrs = node.attrs
    if node.op == "conv2d":
        x_shape, w_shape, y_shape = a.shape, b.shape, node.shape
    elif node.op == "conv2d_grad_input":
        x_shape, w_shape, y_shape = node.shape, b.shape, a.shape
    else:
        x_shape, w_shape, y_shape = a.shape, node.shape, b.shape
    n, c, h, w = x_shape
    o, cg, kh, kw = w_shape
    _, _, oh, ow = y_shape
    groups = attrs["groups"]
    words = uniform_words(w0=node.size, w1=[n, c, h, w, o, oh, ow, kh, kw], w10=list(attrs["stride"]),
                    w12=list(attrs["padding"]), w14=list(attrs["dilation"]), w16=[c // groups, o // groups])
    per_group = node.op == "conv2d_grad_weight"
    grid = groups_for(node.size if per_group else math.ceil(node.size / WG_LINEAR))
    return [Dispatch(node, (node.op, "f32", ""), family_source("conv"), node.op, words, {1: a.id, 2: b.id, 3: node.id},
                     grid)]


def _pool(g: Graph, node: Node) -> list[Dispatch]:
    """Pooling and its gradients: one thread per output element, winners recomputed where needed."""
    ins = [g.nodes[i] for i in node.inputs]
    attrs = node.attrs
    grad = node.op.endswith("_grad")   # (x, g) or (g,) -> dx; the others map x-sized inputs to pooled outputs
    x_shape = node.shape if grad else ins[0].shape
    y_shape = ins[-1].shape if grad else node.shape
    n, c, h, w = x_shape
    oh, ow = y_shape[2:]
    words = uniform_words(w0=node.size, w1=[n, c, h, w, oh, ow], w7=list(attrs["kernel_size"]),
                          w9=list(attrs["stride"]), w11=list(attrs["padding"]))
    binds = {1 + k: x.id for k, x in enumerate(ins)}
    binds[3] = node.id
    return [Dispatch(node, (node.op, "f32", ""), family_source("pool"), node.op, words, binds,
                     groups_for(math.ceil(node.size / WG_LINEAR)))]


_FAMILIES: dict[str, Callable[..., list[Dispatch]]] = {
    "elementwise": _elementwise, "reduce": reduce_dispatches, "copy": _copy_family, "softmax": _softmax,
    "layer_norm": layer_norm_dispatches, "gather": _gather, "conv": _conv, "pool": _pool,
}
_FAMILIES["matmul"] = matmul_dispatches   # (called with the tile: see lower)
#: the kernel families this backend has (an op's record names one of them)
FAMILIES: tuple[str, ...] = tuple(_FAMILIES)


def lower(g: Graph, node: Node, family: str | None, tile: Tile) -> list[Dispatch]:
    """The dispatches that compute ``node`` on its own (an empty list for a node with no elements).

    ``family`` is the op's kernel family (:func:`family_of`); ``tile`` the matmul tile. This is
    the plain plan's kernel of a node: its inputs are read from their own buffers, its result
    written to its own.
    """
    if node.size == 0:
        return []
    fn = _FAMILIES.get(family or "")
    if fn is None:
        raise UnsupportedOnGpu(f"op {node.op!r} names WGSL family {family!r}, which the wgpu backend does not have")
    return fn(g, node, tile) if family == "matmul" else fn(g, node)
