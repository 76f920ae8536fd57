"""Batched launches: fused chains of the same code, or the last stages of split sums, run as ONE dispatch.

An optimizer step is the same small formula for every parameter. On the GPU each
parameter's update is one fused kernel (``wgpu_chain``), so a 4-block transformer's AdamW
step is 70 launches one after the other, most of them tiny: a bias of 512 numbers is two
workgroups of 256 threads. A GPU does not overlap launches that the backend orders, so
each of them costs a barrier and a ramp-up, more than its arithmetic. Measured on an H100,
leaving those 70 launches out of a training step saved 0.73 ms of its 11.4 ms, about
10 us each, while their memory traffic alone would take about 0.12 ms.

The cure (PyTorch's "foreach" optimizers do the same) is one launch for many such
kernels. Chains join one batch when

* they run the same generated code (the same template parts: same ops, same wiring), each
  for its own parameter;
* no member writes a buffer that another member reads or writes, so the order in which
  their threads run does not matter (the memory plan may have given a buffer read by one
  chain to the output of the next);
* nothing recorded between two members touches what the earlier one touches, since the
  batch runs where its last member was (the updates of weights and of biases are two
  kernels, one with a split GEMM's K-chunks to add, and they alternate);
* all their buffers fit in the storage bindings the device allows one kernel.

Each member becomes a *slot* of the batched kernel (``shaders/fused_batch.wgsl``): its
bindings are renumbered (slot s: ``s * stride + b``), and its own 64-word uniform block
is copied into the batch's run of blocks (the plan keeps those in a uniform buffer of
their own). A slot's thread computes one element (``wgpu_chain.per_thread``). Four, as a
large chain does, made no measurable difference to the step on an H100, but the driver
compiles a kernel with 18 slots of four elements (180 KB of WGSL) for over two seconds the
first time; with one element and at most 16 slots the Trainer's compile, batched kernels
included, took 0.77 s in a fresh machine.

The same goes for the second stage of a split sum (a bias gradient: partial sums of row
chunks, then one short sum per output). Every bias and LayerNorm weight of a training step
has one, and none is read before the optimizer's update at the end, so they wait and run
together (``shaders/sum_batch.wgsl``): 43 launches become 2.

The per-node dispatches stay what they were (``plan.dispatches``, ``plan.shader_for`` and
the profiler show them one by one); only the recorded commands use the batches.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Callable, Sequence

from .wgpu_chain import per_thread
from .wgpu_device import family_source, shader_text
from .wgpu_kernels import WG_LINEAR, Dispatch, groups_for

__all__ = ["Launch", "plan_launches", "batched_dispatch", "MAX_SLOTS"]

MAX_SLOTS = 16   # members per batched kernel at most: the kernel's text grows with every slot
SLOT_ELEMS = 1   # elements per thread of a slot (see the module docstring)


@dataclass(frozen=True)
class Launch:
    """One recorded dispatch: it runs the dispatches at indices ``members`` (one, or several chains
    batched by ``dispatch``; for one it is that dispatch itself)."""

    members: tuple[int, ...]
    dispatch: Dispatch

    @property
    def count(self) -> int:
        return len(self.members)


def _reads_writes(d: Dispatch, buffer_of: Callable[[int], object]) -> tuple[set, set]:
    """The buffers ``d`` reads and writes. A chain writes binding 1 and its stores, a split sum's last
    stage binding 2; any other kernel is taken to write every buffer it binds (some write scratch
    buffers at other bindings)."""
    every = {buffer_of(n) for n in d.binds.values()}
    if d.batch == "chain":
        writes = {buffer_of(d.binds[1]), *(buffer_of(d.binds[b]) for b in d.stores)}
    elif d.batch == "partials":
        writes = {buffer_of(d.binds[2])}
    else:
        return every, every
    return every - writes, writes


def _kernel(d: Dispatch) -> tuple | None:
    """What a dispatch can share a batch with (None: nothing). Chains with the same generated code (the
    one-chain kernels of a large and of a small chain differ, their parts do not); every split sum's
    last stage."""
    if d.batch == "chain" and d.parts is not None:
        return ("chain", *sorted(d.parts.items()))
    if d.batch == "partials" and set(d.binds) == {1, 2}:
        return ("partials",)
    return None


@dataclass
class _Open:
    """A batch still taking members: their indices, and the buffers they read and write."""

    members: list[int]
    reads: set
    writes: set

    def clashes(self, reads: set, writes: set) -> bool:
        return bool(writes & (self.reads | self.writes) or reads & self.writes)


def plan_launches(dispatches: Sequence[Dispatch], buffer_of: Callable[[int], object], max_storage: int,
                  align: int, max_uniform: int = 65536) -> list[Launch]:
    """The launches to record, in order: each chain joins the open batch of its kernel when it can.

    A batch runs where its LAST member was, so its earlier members move later, past the
    dispatches in between. That is allowed while none of those touches what a member
    touches (reads what it writes, or writes what it reads or writes): a dispatch that does
    closes the batch before itself. ``buffer_of(node id)`` names the buffer a value lives in
    (reshapes share one, and so may two values whose lives do not overlap); ``max_storage``
    is the device's limit of storage buffers per kernel, ``align`` the bytes of one uniform block.
    """
    done: list[tuple[int, list[int]]] = []   # (position: the last member's index, members)
    open_: dict[tuple, _Open] = {}

    def close(key: tuple) -> None:
        b = open_.pop(key)
        done.append((b.members[-1], b.members))

    for k, d in enumerate(dispatches):
        reads, writes = _reads_writes(d, buffer_of)
        joined = None
        key = _kernel(d)
        b = open_.get(key) if key is not None else None
        if b is not None:
            n = len(b.members) + 1
            if not b.clashes(reads, writes) and n <= MAX_SLOTS and n * len(d.binds) <= max_storage \
                    and n * align <= max_uniform:
                b.members.append(k)
                b.reads |= reads
                b.writes |= writes
                joined = key
            else:
                close(key)
        for other in [o for o, ob in open_.items() if o != joined and ob.clashes(reads, writes)]:
            close(other)   # k must run after this batch's members: the batch runs before k
        if joined is None:
            if key is not None:
                open_[key] = _Open([k], reads, writes)
            else:
                done.append((k, [k]))
    for key in list(open_):
        close(key)
    done.sort()
    return [Launch(tuple(m), dispatches[m[0]] if len(m) == 1 else batched_dispatch([dispatches[i] for i in m], align))
            for _, m in done]


_NAME = re.compile(r"\b(in\d+|st\d+|out)\b")
_WORD = re.compile(r"\bp([uf])\((\d+)u\)")
_BINDING = re.compile(r"@binding\((\d+)\)")


def _slot_text(text: str, s: int, base: int, stride: int) -> str:
    """A chain's generated code as slot ``s``: buffer names get ``_s<s>``, uniform word w becomes base + w,
    binding b becomes s * stride + b."""
    text = _NAME.sub(lambda m: f"{m.group(1)}_s{s}", text)
    text = _WORD.sub(lambda m: f"p{m.group(1)}({base + int(m.group(2))}u)", text)
    text = _BINDING.sub(lambda m: f"@binding({s * stride + int(m.group(1))})", text)
    if re.search(r"\bp[uf]\((?!\d+u\))", text):   # a uniform word not named by a number: cannot move it
        raise ValueError("a fused chain reads a uniform word through an expression; it cannot be batched")
    return text


def batched_dispatch(members: Sequence[Dispatch], align: int) -> Dispatch:
    """ONE dispatch running ``members`` (fused chains of the same code, or split sums' last stages) as the
    slots of fused_batch.wgsl (sum_batch.wgsl)."""
    if members[0].batch == "partials":
        return _partials_dispatch(members, align)
    parts = members[0].parts
    assert parts is not None and all(m.parts == parts for m in members)
    count = len(members)
    stride = max(members[0].binds)   # bindings 1..stride of a chain (0 is its uniform block)
    words = align // 4
    decls, cases = [], []
    code = per_thread(parts, SLOT_ELEMS)
    for s in range(count):
        base = s * words
        decls.append(_slot_text(f"@group(0) @binding(1) var<storage, read_write> out: array<f32>;\n{parts['INPUTS']}",
                                s, base, stride))
        inner = "\n".join("        " + line for line in _slot_text(code, s, base, stride).splitlines())
        cases.append(f"        case {s}u: {{\n"
                     f"            if (first < pu({base}u)) {{   // slot {s}: numel in word {base}\n"
                     f"            let last = pu({base}u) - 1u;\n{inner}\n            }}\n        }}")
    source = family_source(
        "fused_batch", PARAM_VEC4S=count * align // 16, BINDINGS="\n".join(decls), MATH=shader_text("elementwise_math"),
        OPS=parts["OPS"], CASES="\n".join(cases), STRIDE=stride, WORDS=words, SLOTS=count,
        PER_GROUP=WG_LINEAR * SLOT_ELEMS, ELEMS=SLOT_ELEMS,
    )
    label = members[0].key[2].split(":")[0]
    digest = hashlib.sha1(source.encode()).hexdigest()
    binds = {s * stride + b: nid for s, m in enumerate(members) for b, nid in m.binds.items()}
    stores = tuple(s * stride + b for s, m in enumerate(members) for b in m.stores)
    groups = groups_for(sum(math.ceil(int(m.params[0]) / (WG_LINEAR * SLOT_ELEMS)) for m in members))
    return Dispatch(members[0].node, ("fused_batch", "f32", f"{label} x{count}:{digest}"), source, "fused_batch",
                    members[0].params, binds, groups, stores=stores)


def _partials_dispatch(members: Sequence[Dispatch], align: int) -> Dispatch:
    """ONE dispatch adding up the partial sums of every member (split sums' last stages): sum_batch.wgsl."""
    count = len(members)
    words = align // 4
    decls, cases, stores = [], [], []
    for s in range(count):
        decls.append(f"@group(0) @binding({2 * s + 1}) var<storage, read> in_s{s}: array<f32>;\n"
                     f"@group(0) @binding({2 * s + 2}) var<storage, read_write> out_s{s}: array<u32>;")
        cases.append(f"            case {s}u: {{ for (var p = lane; p < p_n; p += 32u) "
                     f"{{ acc += in_s{s}[o * p_n + p]; }} }}")
        stores.append(f"            case {s}u: {{ out_s{s}[o] = bitcast<u32>(sv[li]); }}")
    source = family_source("sum_batch", PARAM_VEC4S=count * align // 16, BINDINGS="\n".join(decls),
                           CASES="\n".join(cases), STORES="\n".join(stores), WORDS=words, SLOTS=count)
    digest = hashlib.sha1(source.encode()).hexdigest()
    binds = {2 * s + b: m.binds[b] for s, m in enumerate(members) for b in (1, 2)}
    groups = groups_for(sum(math.ceil(int(m.params[0]) / 8) for m in members))
    return Dispatch(members[0].node, ("sum_batch", "f32", f"x{count}:{digest}"), source, "sum_batch",
                    members[0].params, binds, groups, stores=tuple(2 * s + 2 for s in range(count)))
