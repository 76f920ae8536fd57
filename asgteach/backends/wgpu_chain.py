"""Fused elementwise chains: several elementwise nodes computed by ONE generated WGSL kernel.

The pass ``wgpu_passes.chains`` decides which nodes form a chain (an intermediate joins its reader's chain
when that reader is its only one, has the same shape, and the value is not a requested
output). This module writes the kernel for one chain, from ``shaders/fused.wgsl``:

* every value the chain reads from outside (a *leaf*) is loaded once per element — a
  buffer read through its broadcast strides, or, for a scalar constant, a word of the
  uniform block;
* the member nodes become ``let v0 = ...; let v1 = ...;`` in topological order, each a
  call of the op's formula (its spec's ``gpu.expr``, as ``wgpu_kernels.ew_function``
  writes it for the one-op kernel too) with its number attributes read from the uniform;
* the root's value is written; so is every member that was asked for as an output of the
  plan (a *store*: an optimizer's new ``m`` and ``v`` are read by the parameter's update
  and returned too, so one kernel computes all three);
* a member that updates a leaf *in place* (``ResidentTraining.bind_updates``, ``wgpu_resident``: the new parameter goes
  straight into the old one's buffer) reads that leaf from its own output binding: each
  thread reads element i before it writes element i, so no other thread is disturbed.

The generated source depends on the chain's *structure* alone — ops, wiring, how many
axes the index walk has, which inputs are read contiguously — never on shapes or
constant values (those are uniform words). So identical chains (every layer's GELU
backward, say) share one compiled pipeline.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass

import numpy as np

from ..graph import Graph, Node
from .wgpu_device import family_source, shader_text
from .wgpu_kernels import (NAN_BITS, WG_LINEAR, Dispatch, broadcast_strides, collapse, contiguous_strides,
                           ew_attr_values, ew_function, ew_load, ew_variant, fbits, groups_for)

__all__ = ["Chain", "MAX_INPUTS", "chain_leaves", "fits", "chain_dispatch", "in_place_leaves", "per_thread"]

MAX_INPUTS = 7        # storage buffers a kernel may bind on a WebGPU-default device (8), one is the output
ELEMS = 4             # elements per thread of a large chain's kernel (256 apart: see fused.wgsl) ...
ELEMS_FROM = 1 << 18  # ... from this many elements on (a small one keeps one per thread: more threads)
_WORDS = 64           # the uniform block of one dispatch
_HEADER = 4           # words 0..3: numel, (unused), NaN bits, (unused)


@dataclass(frozen=True)
class Chain:
    """The nodes one fused kernel computes: ``members`` in topological order, the root last."""

    root: int
    members: tuple[int, ...]
    stores: tuple[int, ...] = ()   # members (not the root) also written to their own buffers: requested outputs


def _is_scalar_constant(g: Graph, n: Node) -> bool:
    return n.op == "constant" and n.size == 1 and n.id in g.constants


def chain_leaves(g: Graph, members: tuple[int, ...]) -> list[int]:
    """The values the chain reads from outside itself, in order of first use."""
    inside = set(members)
    out: list[int] = []
    for m in members:
        for i in g.nodes[m].inputs:
            if i not in inside and i not in out:
                out.append(i)
    return out


@dataclass
class _Layout:
    shape: list[int]                 # collapsed index space of the strided inputs
    buffers: list[int]               # leaves read from a buffer (binding 2 + position)
    strided: dict[int, list[int]]    # leaf -> its collapsed strides (absent: read at the thread's own index)
    scalars: list[int]               # scalar-constant leaves (uniform words)
    attrs: dict[int, list[float]]    # member -> its number attributes (uniform words)
    words: int


def _layout(g: Graph, chain: Chain) -> _Layout:
    out = g.nodes[chain.root].shape
    leaves = [g.nodes[i] for i in chain_leaves(g, chain.members)]
    scalars = [x.id for x in leaves if _is_scalar_constant(g, x)]
    buffers = [x.id for x in leaves if x.id not in scalars]
    own = contiguous_strides(out)
    walk = {i: broadcast_strides(g.nodes[i].shape, out) for i in buffers}
    walk = {i: st for i, st in walk.items() if st != own}   # the others are read at the thread's own index
    shape, sts = collapse(out, *walk.values()) if walk else ([], [])
    strided = dict(zip(walk, sts))
    attrs = {m: values for m in chain.members if (values := ew_attr_values(g.nodes[m]))}
    words = _HEADER + len(shape) * (1 + len(strided)) + len(scalars) + sum(len(v) for v in attrs.values())
    return _Layout(shape, buffers, strided, scalars, attrs, words)


def fits(g: Graph, chain: Chain, max_buffers: int = MAX_INPUTS + 1) -> bool:
    """Can one kernel take this chain: inputs + outputs within ``max_buffers`` storage bindings (the
    device's limit), everything in 64 uniform words?"""
    lay = _layout(g, chain)
    return len(lay.buffers) + 1 + len(chain.stores) <= max_buffers and lay.words <= _WORDS


def _scalar_bits(g: Graph, n: Node) -> int:
    v = np.asarray(g.constants[n.id]).reshape(())
    return int(v) & 0xFFFFFFFF if n.dtype == "int" else fbits(float(v))


def _function_name(n: Node, taken: dict[str, str]) -> str:
    """``op_gelu_tanh``: a WGSL name for node ``n``'s formula, unique among the functions in ``taken``."""
    base = "op_" + re.sub(r"\W", "_", ew_variant(n))
    fn, k = base, 1
    while fn in taken and taken[fn] != ew_function(n, fn):   # that name holds another formula: number it
        fn, k = f"{base}_{k}", k + 1
    return fn


def in_place_leaves(g: Graph, chain: Chain) -> set[int]:
    """The leaves read at each thread's own index (same shape, from a buffer): an output may overwrite them."""
    lay = _layout(g, chain)
    shape = g.nodes[chain.root].shape
    return {leaf for leaf in lay.buffers if leaf not in lay.strided and g.nodes[leaf].shape == shape}


def chain_dispatch(g: Graph, chain: Chain, buffer_of: dict[int, int],
                   inplace: dict[int, int] | None = None,
                   partials: dict[int, tuple[int, int, int, int]] | None = None) -> tuple[Dispatch, str] | None:
    """The fused kernel's dispatch, and a comment saying which WGSL variable is which node.

    ``buffer_of``: leaf node -> the node whose buffer holds it (a reshape shares its input's).
    ``inplace``: output member (root or store) -> a leaf (see :func:`in_place_leaves`) whose buffer
    it is written into; the kernel reads that leaf from the member's own binding.
    ``partials``: leaf -> (buffer, n, a, b): the leaf is a sum whose last stage was not run; element i
    is the sum of buffer[i * a + p * b] over p < n, added up here as the chain reads it (a bias
    gradient's partial column sums, a split weight-gradient GEMM's K-chunks). None is returned when
    those words no longer fit in the uniform block.
    """
    inplace = dict(inplace or {})
    partials = dict(partials or {})
    reads_from = {leaf: m for m, leaf in inplace.items()}
    root = g.nodes[chain.root]
    lay = _layout(g, chain)
    nd = len(lay.shape)
    words = np.zeros(_WORDS, dtype=np.uint32)
    words[0], words[2] = root.size, NAN_BITS
    words[_HEADER:_HEADER + nd] = lay.shape
    stride_at: dict[int, int] = {}
    at = _HEADER + nd
    for leaf, st in lay.strided.items():
        stride_at[leaf] = at
        words[at:at + nd] = st
        at += nd
    word_of: dict[int, int] = {}
    for leaf in lay.scalars:
        word_of[leaf] = at
        words[at] = _scalar_bits(g, g.nodes[leaf])
        at += 1
    attr_at: dict[int, int] = {}   # member -> the word of its first attribute
    for m, values in lay.attrs.items():
        attr_at[m] = at
        for v in values:
            words[at] = fbits(v)
            at += 1
    partial_at: dict[int, int] = {}   # partial leaf -> its words: n, a, b
    for leaf, (_, n_part, a_part, b_part) in partials.items():
        if at + 3 > _WORDS or leaf in lay.strided or leaf not in lay.buffers or leaf in reads_from:
            return None
        partial_at[leaf] = at
        words[at:at + 3] = (n_part, a_part, b_part)
        at += 3

    leaves = chain_leaves(g, chain.members)
    slot = {leaf: k for k, leaf in enumerate(leaves)}
    pos = {m: k for k, m in enumerate(chain.members)}

    nb = len(lay.buffers)
    store_var = {chain.root: "out", **{m: f"st{j}" for j, m in enumerate(chain.stores)}}
    inputs = [f"@group(0) @binding({2 + b}) var<storage, read> in{b}: array<u32>;"
              for b, leaf in enumerate(lay.buffers) if leaf not in reads_from]
    inputs += [f"@group(0) @binding({2 + nb + j}) var<storage, read_write> st{j}: array<f32>;"
               for j in range(len(chain.stores))]
    offsets = []
    if lay.strided:
        offsets.append("    var rest = i;")
        offsets += [f"    var o{slot[leaf]} = 0u;" for leaf in lay.strided]
        for d in reversed(range(nd)):   # the last axis varies fastest
            idx = "rest" if d == 0 else f"rest % pu({_HEADER + d}u)"
            adds = " ".join(f"o{slot[leaf]} += idx * pu({stride_at[leaf] + d}u);" for leaf in lay.strided)
            step = f" rest = rest / pu({_HEADER + d}u);" if d else ""
            offsets.append(f"    {{ let idx = {idx}; {adds}{step} }}")
    loads = []
    for leaf in leaves:
        j = slot[leaf]
        if leaf in word_of:
            loads.append(f"    let r{j} = pu({word_of[leaf]}u);")
        elif leaf in reads_from:   # updated in place: read element i from the output binding, before it is written
            loads.append(f"    let r{j} = bitcast<u32>({store_var[reads_from[leaf]]}[i]);")
        elif leaf in partial_at:   # the last stage of a sum: add this element's partial sums
            w = partial_at[leaf]
            b = lay.buffers.index(leaf)
            def part(q: str) -> str:
                return f"bitcast<f32>(in{b}[{q}])"
            at0, step = f"i * pu({w + 1}u) + p{j} * pu({w + 2}u)", f"pu({w + 2}u)"
            loads.append(f"    var s{j} = 0.0;")
            loads.append(f"    var p{j} = 0u;   // four partial sums at a time: their loads wait on memory together")
            loads.append(f"    for (; p{j} + 4u <= pu({w}u); p{j} += 4u) {{ let q = {at0}; s{j} += ({part('q')} + "
                         f"{part(f'q + {step}')}) + ({part(f'q + 2u * {step}')} + {part(f'q + 3u * {step}')}); }}")
            loads.append(f"    for (; p{j} < pu({w}u); p{j}++) {{ s{j} += {part(at0)}; }}")
            loads.append(f"    let r{j} = bitcast<u32>(s{j});")
        else:
            at_ = f"o{j}" if leaf in lay.strided else "i"
            loads.append(f"    let r{j} = in{lay.buffers.index(leaf)}[{at_}];")
        loads.append(f"    let x{j} = {ew_load(g.nodes[leaf], f'r{j}')};")   # an int (a where-condition): its value

    def ref(i: int) -> str:
        return f"v{pos[i]}" if i in pos else f"x{slot[i]}"

    ops: dict[str, str] = {}
    body = []
    for m in chain.members:
        n = g.nodes[m]
        k = pos[m]
        if n.op == "broadcast_to":   # a fusion pattern: the copy becomes a read through stride-0 axes
            body.append(f"    let v{k} = {ref(n.inputs[0])};   // broadcast_to: read through stride-0 axes")
            continue
        fn = _function_name(n, ops)
        ops[fn] = ew_function(n, fn)
        attrs = [f"pf({attr_at[m] + j}u)" for j in range(len(lay.attrs.get(m, [])))]
        body.append(f"    let v{k} = {fn}({', '.join([*(ref(i) for i in n.inputs), *attrs])});")
    body += [f"    st{j}[i] = v{pos[m]};   // an output too" for j, m in enumerate(chain.stores)]
    parts = dict(INPUTS="\n".join(inputs), OPS="\n".join(ops.values()), OFFSETS="\n".join(offsets),
                 LOADS="\n".join(loads), BODY="\n".join(body), RESULT=f"v{pos[chain.root]}")
    elems = ELEMS if root.size >= ELEMS_FROM else 1
    source = _source(parts, elems)
    digest = hashlib.sha1(source.encode()).hexdigest()
    label = "+".join(g.nodes[m].op for m in chain.members)
    def home(m: int) -> int:   # the buffer an output member is written to
        leaf = inplace.get(m)
        return m if leaf is None else buffer_of.get(leaf, leaf)

    binds = {1: home(root.id), **{2 + b: partials[leaf][0] if leaf in partials else buffer_of.get(leaf, leaf)
                                  for b, leaf in enumerate(lay.buffers) if leaf not in reads_from}}
    binds.update({2 + nb + j: home(m) for j, m in enumerate(chain.stores)})
    d = Dispatch(root, ("fused", "f32", f"{label}:{digest}"), source, "fused", words, binds,
                 groups_for(math.ceil(root.size / (WG_LINEAR * elems))),
                 stores=tuple(2 + nb + j for j in range(len(chain.stores))), parts=parts, batch="chain")
    names = [f"v{pos[m]} = node #{m} {g.nodes[m].op}" + (" (written: an output)" if m in chain.stores else "")
             + (f" (written into node #{inplace[m]}'s buffer: updated in place)" if m in inplace else "")
             for m in chain.members]
    names += [f"x{slot[i]} = node #{i} {g.nodes[i].op}" + (" (a uniform word)" if i in word_of else "")
              + (" (the sum of its partial sums, added as it is read)" if i in partial_at else "")
              for i in leaves]
    header = (f"// ONE kernel computes {len(chain.members)} elementwise nodes (fused chain of node #{root.id}):\n"
              + "".join(f"//   {line}\n" for line in names))
    return d, header


_PER_ELEMENT = re.compile(r"\b(i|rest|[oprxsv]\d+)\b")


def per_thread(parts: dict[str, str], elems: int) -> str:
    """The code of one thread computing ``elems`` elements of a chain, 256 apart from ``first`` (the
    last one is ``last``): every element's loads, then every element's arithmetic, then the stores
    (element e's names end in _e: ``i_2``, ``v3_2``...). fused.wgsl and fused_batch.wgsl run it."""
    def each(text: str, e: int) -> str:
        return _PER_ELEMENT.sub(lambda m: f"{m.group(1)}_{e}", text)

    compute = [line for line in parts["BODY"].splitlines() if "// an output too" not in line]
    stored = [line for line in parts["BODY"].splitlines() if "// an output too" in line]
    loads, body, stores = [], [], []
    for e in range(elems):
        loads.append(f"    let i_{e} = min(first + {e * WG_LINEAR}u, last);")
        loads += [each(x, e) for x in (parts["OFFSETS"], parts["LOADS"]) if x]
        body += [each(x, e) for x in compute]
        lines = [f"    out[i] = {parts['RESULT']};", *stored]
        stores.append(f"    if (first + {e * WG_LINEAR}u <= last) {{\n"
                      + "\n".join("    " + each(x, e) for x in lines) + "\n    }")
    return "\n".join(loads + body + stores)


def _source(parts: dict[str, str], elems: int) -> str:
    """fused.wgsl filled for ``elems`` elements per thread (see :func:`per_thread`)."""
    return family_source("fused", MATH=shader_text("elementwise_math"), INPUTS=parts["INPUTS"], OPS=parts["OPS"],
                         ELEMS=elems, CODE=per_thread(parts, elems))
