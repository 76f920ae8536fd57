"""Lesson 11's checks (the GPU): a tiled matmul's global reads, a workgroup's tree sum.

Both exercises write, in numpy, what a kernel of the wgpu backend does, and each check runs the student's
function on cases of its own (shapes, tiles, lengths and widths the lesson never used) and compares with the
answer keys' references (``instructor/answer_keys.py``, loaded inside the check), bit for bit:

* Exercise 1: :func:`blocked_matmul_check` (``blocked_matmul(A, B, bm, bn, bk)`` -> ``(C, reads)``): the
  product as ``shaders/matmul.wgsl`` computes it, tile by tile with accumulators kept across the K tiles, in
  float32, and the number of elements it reads from global memory (edge tiles read only what is inside);
* Exercise 2: :func:`tree_sum_check` (``tree_sum(x, width)``): the float32 sum of ``x`` in the order one
  workgroup of ``width`` threads of ``shaders/reduce.wgsl`` adds it (``seg_sum``), on lengths that are not
  powers of two, shorter than the workgroup, and far longer.

Bit for bit is what keeps the shortcuts out: ``A @ B`` (BLAS) and ``np.sum`` (numpy's pairwise blocks) add in
orders of their own, so their float32 results differ in the last bits; the check says which order it
recognises. ``RULES`` also refuses, from the answer's source, asgteach (whose wgpu backend runs the real
kernels) and numpy's product functions for exercise 1 (the operator ``@`` is refused by the bits).

:func:`step_costs` and :func:`roofline` are the lesson's own display (section 3): the flops and bytes of each
step of a plan, and the time a device with a given bandwidth and peak needs for it at best.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..grading.exercises import ExerciseError
from ..grading.keys import load as load_keys
from ..grading.rules import STAND_INS, Rule, enforce
from .common import call_answer, fresh

__all__ = ["LESSON", "RULES", "step_costs", "roofline", "cpu_name", "blocked_matmul_check", "tree_sum_check"]

LESSON = "11-backends"

_ASGTEACH = frozenset({"at", "asgteach"})
#: numpy's (and Python's) whole products: each adds the K terms in an order of its own
_PRODUCTS = frozenset({"matmul", "dot", "einsum", "tensordot", "inner", "vdot", "linalg", "multi_dot", "matvec",
                       "vecmat", "vecdot", "kron"})

#: exercise -> what its answer may not use (the notebook's text states it)
RULES: dict[int, Rule] = {
    1: Rule(why="multiply the tiles yourself, one k at a time, in numpy: asgteach (whose wgpu backend runs the real "
                "kernel) and numpy's products (matmul, dot, einsum...) do the work in an order of their own",
            imports=STAND_INS | {"asgteach"}, names=_ASGTEACH | _PRODUCTS, attrs=_PRODUCTS),
    2: Rule(why="add the numbers yourself, in numpy, in the kernel's order: asgteach (whose wgpu backend runs "
                "the real kernel) would do the work", imports=STAND_INS | {"asgteach"}, names=_ASGTEACH),
}

_ELEMENTWISE = ("arithmetic", "activation", "comparison")


def step_costs(plan: Any) -> list[dict[str, Any]]:
    """Per step of a numpy plan (one kernel per node; folded steps left out): the flops it does and the bytes it
    moves, reading each distinct input once and writing its output once (float32: 4 bytes a number).

    A matmul does 2 flops (a multiply and an add) per term: 2 * (size of C) * K. An elementwise step does one per
    output element (tanh or exp cost a few more on real hardware, still far from the compute roof), a reduction
    one per input element, a copy (transpose, broadcast_to, reshape...) none."""
    from ..ops.registry import spec

    g = plan.graph
    rows = []
    for step in plan.steps:
        node = step.node
        if node.id in plan.folded:
            continue
        ins = [g.nodes[i] for i in dict.fromkeys(node.inputs)]
        moved = 4 * (sum(n.size for n in ins) + node.size)
        if node.op == "matmul":
            flops = 2 * node.size * g.nodes[node.inputs[0]].shape[-1]
        elif spec(node.op).category in _ELEMENTWISE:
            flops = node.size
        elif spec(node.op).gpu.kernel == "reduce":   # (the ops the reduce kernels run: sum, mean, max, sum_to...)
            flops = ins[0].size
        else:
            flops = 0
        rows.append({"node": node.id, "op": node.op, "shape": node.shape, "flops": flops, "bytes": moved})
    return rows


def roofline(plan: Any, bandwidth: float, peak: float) -> list[dict[str, Any]]:
    """:func:`step_costs` with, per step, its arithmetic intensity (flops per byte), its time at best on a device
    of ``bandwidth`` bytes/s and ``peak`` flop/s (max of bytes / bandwidth and flops / peak) and which roof
    decides it ("memory" or "compute")."""
    rows = step_costs(plan)
    for r in rows:
        t_mem, t_flop = r["bytes"] / bandwidth, r["flops"] / peak
        r["intensity"] = r["flops"] / r["bytes"] if r["bytes"] else math.inf
        r["seconds"] = max(t_mem, t_flop)
        r["bound"] = "memory" if t_mem >= t_flop else "compute"
    return rows


def cpu_name() -> str:
    """This machine's processor, as the operating system names it (for a timing's label)."""
    import platform

    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "this machine's CPU"


# --- exercise 1: a blocked matmul and its global reads ----------------------------------------------------------

#: (M, K, N, bm, bn, bk): tiles that divide the sizes, tiles that do not, a tile larger than the matrix, thin
#: operands, bk that does not divide K; the check adds random ones
_MATMUL_CASES = ((8, 24, 12, 4, 4, 8), (13, 29, 11, 4, 8, 8), (6, 21, 5, 16, 16, 16), (40, 33, 3, 16, 2, 4),
                 (2, 50, 37, 1, 8, 16), (24, 40, 24, 8, 12, 5))


def _matmul_cases(rng: np.random.Generator) -> list[tuple[int, ...]]:
    cases = list(_MATMUL_CASES)
    for _ in range(2):
        cases.append((int(rng.integers(9, 41)), int(rng.integers(20, 61)), int(rng.integers(9, 41)),
                      int(rng.choice([2, 4, 8, 16])), int(rng.choice([4, 8, 16])), int(rng.choice([3, 4, 8]))))
    return cases


def _reads_hint(got: int, want: int, M: int, K: int, N: int, bm: int, bn: int, bk: int) -> str:
    if got == 2 * M * N * K:
        return ("that is a kernel without tiles, each output reading its own row of A and column of B (2K reads per "
                "output). A tile copied into workgroup memory is read from global memory once and used by every "
                "thread of the workgroup")
    if got == M * K + K * N:
        return ("that reads every element once, as if one workgroup held all of A and B: each workgroup (one per "
                "bm x bn block of C) reads its own band of A and band of B")
    full = M * K * math.ceil(N / bn) + K * N * math.ceil(M / bm)
    padded = (math.ceil(M / bm) * bm * math.ceil(K / bk) * bk * math.ceil(N / bn)
              + math.ceil(K / bk) * bk * math.ceil(N / bn) * bn * math.ceil(M / bm))
    if got == padded and got != full:
        return ("that counts the zeros an edge tile is padded with: the kernel does not read past the matrix "
                "(count only the elements inside A and B, as a slice A[i0:i0 + bm, k0:k0 + bk] holds)")
    return ("count, for every workgroup and every K step, the elements copied into its A tile and its B tile (the "
            "sizes of the two slices)")


def blocked_matmul_check(fn: Callable[..., Any]) -> None:
    """``fn(A, B, bm, bn, bk)`` -> ``(C, reads)``: C bit for bit as the tiled kernel's loop order gives it in
    float32, reads exactly (the elements copied from A and B into tiles)."""
    enforce(fn, RULES[1], "blocked_matmul")
    if not callable(fn):
        raise ExerciseError(f"blocked_matmul should be a function, got {type(fn).__name__}")
    keys = load_keys()
    rng = fresh()
    for M, K, N, bm, bn, bk in _matmul_cases(rng):
        A = rng.standard_normal((M, K)).astype(np.float32)
        B = rng.standard_normal((K, N)).astype(np.float32)
        call = f"blocked_matmul(A of {(M, K)}, B of {(K, N)}, bm={bm}, bn={bn}, bk={bk})"
        got = call_answer(fn, call, A.copy(), B.copy(), bm, bn, bk)
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            raise ExerciseError(f"{call} should return the pair (C, reads), got {type(got).__name__}")
        want_c, want_reads = keys.blocked_matmul(A, B, bm, bn, bk)
        c = np.asarray(got[0])
        if c.shape != want_c.shape:
            raise ExerciseError(f"{call}: C should have shape {want_c.shape}, got {c.shape}")
        if not np.allclose(c.astype(np.float64), want_c, rtol=1e-4, atol=1e-4 * math.sqrt(K)):
            i, j = np.unravel_index(int(np.argmax(np.abs(c.astype(np.float64) - want_c))), c.shape)
            raise ExerciseError(f"{call}: C[{i}, {j}] should be {float(want_c[i, j]):.6g}, got {float(c[i, j]):.6g}."
                                " Hint: does every workgroup's block of C get every K tile, the edge blocks too?")
        if c.dtype != np.float32 or not np.array_equal(c.view(np.uint32), want_c.view(np.uint32)):
            bits = np.sum(c.astype(np.float32) != want_c)
            if np.array_equal(c.astype(np.float32), np.matmul(A, B)):
                how = ("it is what numpy's @ (np.matmul) gives here: BLAS adds the K terms in an order of its own (in "
                       "blocks, with fma)")
            elif c.dtype != np.float32:
                how = f"it is {c.dtype}: the kernel computes in float32, and every addition rounds to float32"
            else:   # (BLAS's order depends on its threads: numpy's @ in another process need not give these bits)
                how = ("the order of the additions is not the kernel's (numpy's @ adds in BLAS's order; a tile's "
                       "partial sum added to C at the end is another): keep one accumulator per output across all "
                       "the K tiles (the kernel's registers), starting at 0, and add a[:, k] * b[k, :] one k at a "
                       "time, k in order")
            raise ExerciseError(f"{call}: C is right to rounding but not bit for bit ({bits} of {c.size} elements "
                                f"differ in their last bits): {how}")
        try:
            reads = int(got[1])
        except (TypeError, ValueError):
            raise ExerciseError(f"{call}: reads should be a whole number, got {got[1]!r:.60}") from None
        if reads != want_reads:
            raise ExerciseError(f"{call}: reads should be {want_reads}, got {reads}. Hint: "
                                + _reads_hint(reads, want_reads, M, K, N, bm, bn, bk))


# --- exercise 2: a workgroup's tree sum ------------------------------------------------------------------------

#: (length, width): lengths that are not powers of two, shorter than the workgroup, exactly one thread each,
#: many elements per thread, one thread (a plain running sum), two threads; the check adds random ones
_TREE_CASES = ((1000, 256), (37, 64), (256, 256), (5000, 32), (777, 1), (3, 2), (10_001, 128), (1, 8), (513, 4))


def _values(rng: np.random.Generator, n: int) -> np.ndarray:
    """float32 numbers of mixed signs and magnitudes (10^-3 .. 10^3), so that the order of additions shows."""
    return (rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n)).astype(np.float32)


def _adjacent_pairs(x: np.ndarray, width: int) -> np.float32:
    """A tree that pairs neighbours (v[0] + v[1], v[2] + v[3], ...) after the same first phase: not the kernel's."""
    v = np.zeros(width, np.float32)
    for start in range(0, x.size, width):
        part = x[start:start + width]
        v[:part.size] += part
    while v.size > 1:
        v = v[0::2] + v[1::2]
    return np.float32(v[0])


def _tree_hint(x: np.ndarray, width: int, got: np.float32) -> str:
    """What the other orders of adding x give, and which of them ``got`` is (with what to change)."""
    others = [
        (np.float32(np.sum(x)), "numpy's np.sum (pairwise, over 8 running sums)",
         "the kernel's order is its own: write its two phases"),
        (np.float32(np.sum(x, dtype=np.float64)), "a sum in float64, rounded to float32 once",
         "the kernel adds in float32, and every addition rounds to float32"),
        (np.cumsum(x, dtype=np.float32)[-1], "one running sum in order",
         "that is a single invocation's order: the width invocations each add every width-th number, and then the "
         "tree adds up their width partial sums"),
        (_adjacent_pairs(x, width), "a tree that pairs neighbours (v[0] + v[1], v[2] + v[3], ...)",
         "seg_sum adds v[t + s] into v[t] for t < s, s = width/2, width/4, ..., 1: the upper half onto the lower half"),
    ]
    same = [(what, fix) for value, what, fix in others if value.view(np.uint32) == got.view(np.uint32)]
    if same:
        return (f"that is what {' and '.join(what for what, _ in same)} give{'s' if len(same) == 1 else ''}: "
                + "; ".join(fix for _, fix in same))
    return ("phase 1: invocation t (0 <= t < width) adds x[t], x[t + width], x[t + 2*width], ... in that order, "
            "starting from 0 (an invocation past the end keeps 0); phase 2: for s = width/2, ..., 1, v[t] += v[t + s] "
            "for t < s; all in float32")


def tree_sum_check(fn: Callable[..., Any]) -> None:
    """``fn(x, width)``: the float32 sum in the order of one workgroup of ``width`` threads of reduce.wgsl, bit for
    bit, on lengths and widths of the check's own."""
    enforce(fn, RULES[2], "tree_sum")
    if not callable(fn):
        raise ExerciseError(f"tree_sum should be a function, got {type(fn).__name__}")
    keys = load_keys()
    rng = fresh()
    cases = list(_TREE_CASES) + [(int(rng.integers(300, 9000)), int(2 ** rng.integers(3, 9))) for _ in range(2)]
    for n, width in cases:
        x = _values(rng, n)
        call = f"tree_sum(x of {n} float32 numbers, width={width})"
        got = call_answer(fn, call, x.copy(), width)
        want = keys.tree_sum(x, width)
        try:
            g = np.asarray(got)
            value = np.float32(g.item()) if g.size == 1 else None
        except (TypeError, ValueError):
            value = None
        if value is None:
            raise ExerciseError(f"{call} should return one number, got {type(got).__name__}: {got!r:.60}")
        if value.view(np.uint32) == want.view(np.uint32) and (g.dtype == np.float32 or float(g) == float(want)):
            continue
        if not np.isclose(float(value), float(want), rtol=1e-3, atol=1e-3 * float(np.sum(np.abs(x))) / max(n, 1)):
            raise ExerciseError(f"{call} should be {float(want)!r}, got {float(value)!r}: that is not the sum of x "
                                "(does every element get added once, for lengths that are not a multiple of width?)")
        raise ExerciseError(f"{call} should be {float(want)!r} bit for bit, got {float(value)!r}: the same sum in "
                            f"another order of additions. Hint: {_tree_hint(x, width, value)}")
