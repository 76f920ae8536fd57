"""Lesson 11 (the GPU): its checks (asgteach.lessons.lesson11), and what its text says of the library.

The checks compare bit for bit with the answer keys' references (a tiled matmul's order of additions and its global
reads; a workgroup's tree sum), so numpy's own product and sum fail by their bits and the rules refuse asgteach and
numpy's product functions from the source. The lesson's claims about the wgpu backend are tested here too: the
backend's sum is the keys' tree, bit for bit, at the width its dispatch names; tiling changes the reads, not the bits;
the roofline numbers the text quotes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import asgteach as at
from asgteach.backends.wgpu_matmul import DEFAULT_TILE
from asgteach.grading.keys import load as load_keys
from asgteach.grading.rules import problems
from asgteach.lessons import ExerciseError, lesson11
from asgteach.lessons.kernels import dispatches_for

KEYS = load_keys()


# --- exercise 1: a blocked matmul -------------------------------------------------------------------------------

def _tiled(A: np.ndarray, B: np.ndarray, bm: int, bn: int, bk: int) -> tuple[np.ndarray, int]:
    """A right answer in the exercise's terms (the reads counted from the tiles' bounds)."""
    M, K = A.shape
    N = B.shape[1]
    C = np.zeros((M, N), np.float32)
    reads = 0
    for i in range(0, M, bm):
        for j in range(0, N, bn):
            acc = C[i:i + bm, j:j + bn]          # a view: the block's accumulators, kept across the K tiles
            for k0 in range(0, K, bk):
                k1 = min(k0 + bk, K)
                reads += acc.shape[0] * (k1 - k0) + (k1 - k0) * acc.shape[1]
                for k in range(k0, k1):
                    acc += np.multiply.outer(A[i:i + bm, k], B[k, j:j + bn])
    return C, reads


def _with_reads(fn_c, reads_of):
    def answer(A, B, bm, bn, bk):
        return fn_c(A, B), reads_of(A.shape[0], A.shape[1], B.shape[1], bm, bn, bk)
    return answer


def _in_order(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    C = np.zeros((A.shape[0], B.shape[1]), np.float32)
    for k in range(A.shape[1]):
        C += A[:, k:k + 1] * B[k:k + 1, :]
    return C


def _formula(M: int, K: int, N: int, bm: int, bn: int, bk: int) -> int:
    return M * K * math.ceil(N / bn) + K * N * math.ceil(M / bm)


def test_blocked_matmul_passes_a_right_answer_in_another_style() -> None:
    lesson11.blocked_matmul_check(_tiled)


@pytest.mark.parametrize(("answer", "words"), [
    (_with_reads(lambda A, B: A @ B, _formula), "numpy's @"),                               # BLAS's order
    (_with_reads(lambda A, B: (A.astype(np.float64) @ B).astype(np.float32), _formula), "not bit for bit"),
    (_with_reads(_in_order, lambda M, K, N, bm, bn, bk: 2 * M * N * K), "a kernel without tiles"),
    (_with_reads(_in_order, lambda M, K, N, bm, bn, bk: M * K + K * N), "as if one workgroup held all of A and B"),
    (_with_reads(_in_order, lambda M, K, N, bm, bn, bk: _formula(M, K, N, bm, bn, bk) + 1), "reads should be"),
    (_with_reads(lambda A, B: _in_order(A, B).astype(np.float64), _formula), "it is float64"),
])
def test_blocked_matmul_refuses_other_orders_and_wrong_counts(answer, words: str) -> None:
    with pytest.raises(ExerciseError, match=words):
        lesson11.blocked_matmul_check(answer)


def test_tiling_changes_the_reads_not_the_bits() -> None:
    """The found-cell's claims: reads = MK ceil(N/bn) + KN ceil(M/bm), bk plays no part; C's bits are the same for
    every tile (one accumulator per output, k in order); no tiles (1 x 1) read 2MNK."""
    rng = np.random.default_rng(5)
    A = rng.standard_normal((21, 34)).astype(np.float32)
    B = rng.standard_normal((34, 13)).astype(np.float32)
    reference = _in_order(A, B)
    for bm, bn, bk in [(1, 1, 1), (4, 4, 4), (8, 5, 3), (16, 16, 7), (32, 32, 64)]:
        C, reads = KEYS.blocked_matmul(A, B, bm, bn, bk)
        assert np.array_equal(C.view(np.uint32), reference.view(np.uint32))
        assert reads == _formula(21, 34, 13, bm, bn, bk)
    assert KEYS.blocked_matmul(A, B, 1, 1, 5)[1] == 2 * 21 * 34 * 13


def test_the_default_tiles_numbers_are_the_lessons() -> None:
    """Section 5: 128 x 128 x 16, 256 invocations of 8 x 8 outputs, 16 KiB of workgroup memory, 32 flops per byte
    read from global memory per K step (above an H100's ridge of 67 / 3.35 = 20); the default tile for 2048 x 2048."""
    t = DEFAULT_TILE
    assert (t.bm, t.bn, t.bk, t.tm, t.tn) == (128, 128, 16, 8, 8)
    assert t.threads == (16, 16)
    assert 4 * t.bk * (t.bm + t.bn) == 16 * 1024
    assert 2 * t.bm * t.bn * t.bk / (4 * t.bk * (t.bm + t.bn)) == 32
    with at.Graph():
        c = at.input("a", (2048, 512)) @ at.input("b", (512, 2048))
    (mm,) = dispatches_for(c)
    assert mm.key[2].startswith("128x128x16x8x8:fast") and mm.groups == (16, 16, 1)


# --- exercise 2: a workgroup's tree sum ----------------------------------------------------------------------------

def _tree_by_rows(x: np.ndarray, width: int) -> np.float32:
    """A right answer: phase 1 over the rows of a zero-padded (rows, width) matrix, phase 2 by halves."""
    x = np.asarray(x, np.float32)
    rows = np.concatenate([x, np.zeros(-len(x) % width, np.float32)]).reshape(-1, width)
    v = np.zeros(width, np.float32)
    for row in rows:
        v = v + row
    while len(v) > 1:
        v = v[:len(v) // 2] + v[len(v) // 2:]
    return v[0]


def test_tree_sum_passes_a_right_answer_in_another_style() -> None:
    lesson11.tree_sum_check(_tree_by_rows)


def _pairs_neighbours(x, width):
    v = np.zeros(width, np.float32)
    for start in range(0, len(x), width):
        part = np.asarray(x[start:start + width], np.float32)
        v[:len(part)] += part
    while len(v) > 1:
        v = v[0::2] + v[1::2]
    return v[0]


@pytest.mark.parametrize(("answer", "words"), [
    (lambda x, w: np.sum(x), "numpy's np.sum"),
    (lambda x, w: np.cumsum(np.asarray(x, np.float32))[-1], "one running sum"),
    (lambda x, w: np.float32(math.fsum(float(v) for v in x)), "a sum in float64"),
    (_pairs_neighbours, "pairs neighbours"),
    (lambda x, w: np.float32(2 * np.sum(x)), "not the sum of x"),
    (lambda x, w: [1.0, 2.0], "should return one number"),
])
def test_tree_sum_refuses_other_orders(answer, words: str) -> None:
    with pytest.raises(ExerciseError, match=words):
        lesson11.tree_sum_check(answer)


def test_the_backend_picks_the_widths_the_lesson_states() -> None:
    """The found-cell: 32 invocations for up to 256 numbers, doubling up to 256 for more than 1024; one dispatch
    (one workgroup tree) up to 65 535 numbers, a second stage beyond."""
    for n, width in [(10, 32), (256, 32), (257, 64), (512, 64), (1000, 128), (1025, 256), (60_000, 256),
                     (65_535, 256)]:
        with at.Graph():
            s = at.sum(at.input("v", (n,)))
        (d,) = dispatches_for(s)
        assert (d.entry, int(d.params[40])) == ("sum_wg", width), n
    with at.Graph():
        s = at.sum(at.input("v", (65_536,)))
    assert len(dispatches_for(s)) == 2


@pytest.mark.gpu
def test_the_backends_sum_is_the_workgroup_tree_bit_for_bit() -> None:
    """Section 6 and exercise 2's found-cell: at.sum on the wgpu backend is tree_sum(x, word 40), bit for bit."""
    rng = np.random.default_rng(11)
    for n in (7, 300, 1000, 4097, 60_000, 65_535):
        x = (rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n)).astype(np.float32)
        with at.Graph():
            v = at.input("v", (n,))
            s = at.sum(v)
        (d,) = dispatches_for(s)
        got = np.float32(at.run([s], {v: x}, backend="wgpu")[0])
        assert got.view(np.uint32) == KEYS.tree_sum(x, int(d.params[40])).view(np.uint32), n


def test_the_tree_errors_the_found_cell_quotes() -> None:
    n = 60_000
    tenths = np.full(n, 0.1, np.float32)
    exact = n * float(np.float32(0.1))
    quoted = {1: "5.8e-04", 16: "3.6e-05", 256: "2.3e-06", 65_536: "1.5e-08"}
    for width, text in quoted.items():
        assert f"{abs(float(KEYS.tree_sum(tenths, width)) - exact) / exact:.1e}" == text


# --- section 3: the roofline -------------------------------------------------------------------------------------

def test_step_costs_count_flops_and_bytes() -> None:
    with at.Graph():
        x, w = at.input("x", (8, 5)), at.input("w", (5, 3))
        y = at.tanh(x @ w)
        plan = at.compile([at.sum(y * y)])
    rows = {r["op"]: r for r in lesson11.step_costs(plan)}
    assert (rows["matmul"]["flops"], rows["matmul"]["bytes"]) == (2 * 8 * 3 * 5, 4 * (40 + 15 + 24))
    assert (rows["tanh"]["flops"], rows["tanh"]["bytes"]) == (24, 4 * 48)
    assert rows["mul"]["bytes"] == 4 * 48            # y * y reads y once
    assert (rows["sum"]["flops"], rows["sum"]["bytes"]) == (24, 4 * 25)
    r = lesson11.roofline(plan, bandwidth=1e9, peak=1e9)
    assert all(row["bound"] == "memory" for row in r)                # at a ridge of 1 flop per byte
    assert lesson11.roofline(plan, bandwidth=1e9, peak=1e7)[0]["bound"] == "compute"


def test_the_roofline_numbers_the_lesson_quotes() -> None:
    """Section 3's text: 228 flops per byte for the large matmuls, 7.85 for the thin ones, at most 0.25 for the rest;
    the large matmuls 97.6% of the flops and 73% of the time; memory-bound steps 27% of the time, 2.4% of the flops."""
    with at.Graph():
        x, t = at.input("x", (4096, 1024)), at.input("t", (4096, 16))
        w1, b1, w2 = at.parameter("w1", (1024, 1024)), at.parameter("b1", (1024,)), at.parameter("w2", (1024, 16))
        loss = at.mean((at.tanh(x @ w1 + b1) @ w2 - t) ** 2)
        plan = at.compile([loss, *at.grad(loss, [w1, b1, w2])])
    rows = lesson11.roofline(plan, 3.35e12, 67e12)
    big = [r for r in rows if r["op"] == "matmul" and r["bound"] == "compute"]
    thin = [r for r in rows if r["op"] == "matmul" and r["bound"] == "memory"]
    assert len(big) == 2 and len(thin) == 3
    assert all(round(r["intensity"]) == 228 for r in big) and all(f"{r['intensity']:.2f}" == "7.85" for r in thin)
    assert all(r["intensity"] <= 0.25 for r in rows if r["op"] != "matmul")
    flops, seconds = sum(r["flops"] for r in rows), sum(r["seconds"] for r in rows)
    assert f"{sum(r['flops'] for r in big) / flops:.1%}" == "97.6%"
    assert f"{sum(r['seconds'] for r in big) / seconds:.0%}" == "73%"
    memory = [r for r in rows if r["bound"] == "memory"]
    assert f"{sum(r['seconds'] for r in memory) / seconds:.0%}" == "27%"
    assert f"{sum(r['flops'] for r in memory) / flops:.1%}" == "2.4%"


# --- the rules -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("n", "source", "found"), [
    (1, "C = np.matmul(A, B)\n", "uses .matmul"),
    (1, "from numpy import dot\nC = dot(A, B)\n", "imports dot"),
    (1, "C = np.einsum('mk,kn->mn', A, B)\n", "uses .einsum"),
    (1, "C = A.dot(B)\n", "uses .dot"),
    (1, "C = np.linalg.multi_dot([A, B])\n", "uses .linalg"),
    (1, "import asgteach\n", "imports asgteach"),
    (2, "s = at.run([at.sum(v)], {v: x}, backend='wgpu')\n", "uses at"),
    (2, "from asgteach.backends import wgpu_kernels\n", "imports from asgteach.backends"),
])
def test_each_exercise_rule_names_the_shortcuts(n: int, source: str, found: str) -> None:
    assert found in "\n".join(problems(source, lesson11.RULES[n]))


def test_plain_numpy_answers_keep_the_rules() -> None:
    import inspect

    for fn in (_tiled, _tree_by_rows, KEYS.blocked_matmul, KEYS.tree_sum):
        source = inspect.getsource(fn)
        assert all(problems(source, rule) == [] for rule in lesson11.RULES.values()), fn.__name__
