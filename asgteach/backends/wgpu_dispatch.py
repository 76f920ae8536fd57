"""What a GPU dispatch is: the record of one kernel launch, and the small arithmetic every kernel shares.

A :class:`Dispatch` says which kernel (family file, entry point, filled-in WGSL), which 64-word uniform
block (shapes, strides, counts), which values sit at which binding, and how many workgroups to launch.
The helpers here turn shapes into the numbers of that block (row-major strides, a broadcast's zero
strides, axes merged where they are contiguous), floats into their bits, a count of workgroups into the
(x, y, z) a launch takes, and read an op's GPU facts from its record (``OpSpec.gpu``). ``wgpu_kernels``
writes the dispatches of each kernel family with them; the passes and the plan read them too.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..graph import Node
from ..ops.registry import spec

__all__ = ["Dispatch", "UnsupportedOnGpu", "MAX_DIMS", "MAX_GROUPS", "NAN_BITS", "WG_LINEAR", "family_of",
           "reduce_entry", "reduced_axes_of", "index_bound_of", "formula", "fbits", "contiguous_strides",
           "broadcast_strides", "collapse", "groups_for", "uniform_words", "check_rank"]

MAX_DIMS = 8
NAN_BITS = 0x7FC00000
WG_LINEAR = 256          # threads per workgroup of the one-thread-per-element kernels
MAX_GROUPS = 65535   # workgroups along one dimension of a launch (WebGPU's guaranteed limit)


class UnsupportedOnGpu(ValueError):
    """A node that the WGSL kernels cannot express (too many dims after simplification...)."""


# --- an op's GPU facts: the only place the backend reads them from its record --------------------
def family_of(op: str) -> str | None:
    """The kernel family (a file of ``shaders/``) that computes ``op``: "elementwise", "reduce", "matmul"..."""
    return spec(op).gpu.kernel


def reduce_entry(op: str) -> str:
    """Which kernel of reduce.wgsl reduces for ``op`` (sum_to and sum share "sum"; default: the op's name)."""
    return spec(op).gpu.entry or op


def reduced_axes_of(op: str) -> Callable[..., Any] | None:
    """For a reduce-family op: the axes it reduces, as a function of its input's shape and attributes."""
    return spec(op).gpu.reduced_axes


def index_bound_of(op: str) -> Callable[..., int] | None:
    """For ops that read integer row ids: how many rows there are (checked on the host before a run)."""
    return spec(op).gpu.index_bound


def formula(op: str) -> Any:
    """An elementwise op's WGSL formula (a string, or a function of its attributes returning one)."""
    return spec(op).gpu.expr


@dataclass
class Dispatch:
    """One kernel launch for one node (a node may need several, e.g. fill then scatter)."""

    node: Node
    key: tuple                 # pipeline cache key: (op, dtype, variant)
    source: str
    entry: str
    params: np.ndarray         # 64 x u32 uniform words
    binds: dict[int, int]      # binding number -> node id whose buffer goes there (< 0: a scratch buffer)
    groups: tuple[int, int, int]
    scratch: dict[int, int] | None = None   # scratch id -> bytes, for multi-stage kernels
    stores: tuple[int, ...] = ()            # binding numbers that are WRITTEN besides 1 (a chain's extra outputs)
    parts: dict[str, str] | None = None     # a fused chain's filled-in template parts (wgpu_batch writes slots)
    batch: str | None = None                # what wgpu_batch may batch it as: "chain", or "partials" (the
                                            # last stage of a split sum: binding 1 its partials, 2 the sums)


def fbits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", float(x)))[0]


def contiguous_strides(shape: tuple) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


def broadcast_strides(shape: tuple, out_shape: tuple) -> list[int]:
    """Strides to read an array of ``shape`` as if broadcast to ``out_shape`` (0 = repeated)."""
    pad = (1,) * (len(out_shape) - len(shape)) + tuple(shape)
    st = contiguous_strides(pad)
    return [0 if s == 1 and o != 1 else st[i] for i, (s, o) in enumerate(zip(pad, out_shape))]


def collapse(shape: tuple, *strides: list[int]) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 axes and merge neighbours that every operand walks contiguously.

    (4, 3) read with strides (3, 1) is the same walk as (12,) with stride 1; fewer axes
    means fewer divisions per element in the kernel, and any rank fits the uniform.
    """
    dims = [(d, [s[i] for s in strides]) for i, d in enumerate(shape) if d != 1]
    out: list[tuple[int, list[int]]] = []
    for d, st in dims:
        if out:
            pd, pst = out[-1]
            if all(ps == s * d for ps, s in zip(pst, st)):
                out[-1] = (pd * d, st)
                continue
        out.append((d, st))
    new_shape = [d for d, _ in out]
    return new_shape, [[st[k] for _, st in out] for k in range(len(strides))]


def groups_for(n_groups: int) -> tuple[int, int, int]:
    """A 2-D grid holding ``n_groups`` workgroups (each grid axis holds at most 65535)."""
    n_groups = max(1, n_groups)
    x = min(n_groups, MAX_GROUPS)
    return x, math.ceil(n_groups / x), 1


def uniform_words(**words: Any) -> np.ndarray:
    """The 64 u32 words of a dispatch's uniform block: ``w8=[...]`` puts a list from word 8 on."""
    p = np.zeros(64, dtype=np.uint32)
    for k, v in words.items():
        at = int(k[1:])
        vals = v if isinstance(v, (list, tuple)) else [v]
        for j, x in enumerate(vals):
            p[at + j] = np.uint32(int(x) & 0xFFFFFFFF)
    return p


def check_rank(node: Node, shape: list) -> None:
    if len(shape) > MAX_DIMS:
        raise UnsupportedOnGpu(
            f"{node.op} (node #{node.id} '{node.name}') needs {len(shape)} non-mergeable axes; the WGSL kernels "
            f"take at most {MAX_DIMS}. Reshape to fewer axes, or run it with backend='numpy'."
        )
