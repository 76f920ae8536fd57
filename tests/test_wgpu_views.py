"""Transposes folded into matmul on the wgpu backend: operands read through chains of transposes
(attention's head split) with a row stride, results written straight into the layout of the
transposes that read them (the head merge), and C^T = B^T @ A^T when that layout has C's
columns contiguous. Every case is checked against numpy; the shapes include odd sizes (the
bounds-checked kernel), tile multiples (the vec4 kernel), batch 1 and K = 1."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import asgteach as at
from asgteach.backends import wgpu_backend
from asgteach.backends.wgpu_passes import NAMES

from wgpu_helpers import run_both

pytestmark = pytest.mark.gpu   # every test here runs kernels (no adapter: skipped loudly; CI=true: failed)


def _attention(b: int, t: int, h: int, dh: int):
    """Multi-head attention written as nn.MultiHeadAttention does it, with every gradient."""
    d = h * dh
    with at.Graph():
        x = at.input("x", (b, t, d))
        wq, wk, wv, wo = (at.parameter(n, (d, d)) for n in ("wq", "wk", "wv", "wo"))

        def split(y):
            return at.ops.transpose(at.ops.reshape(y, (b, t, h, dh)), (0, 2, 1, 3))

        q, k, v = split(x @ wq), split(x @ wk), split(x @ wv)
        scores = (q @ at.ops.transpose(k, (0, 1, 3, 2))) * (1.0 / math.sqrt(dh))
        heads = at.softmax(scores, axis=-1) @ v
        merged = at.ops.reshape(at.ops.transpose(heads, (0, 2, 1, 3)), (b, t, d))
        out = merged @ wo
        loss = at.sum(out * out)
        grads = at.grad(loss, [x, wq, wk, wv, wo])
    rng = np.random.default_rng(b * 1000 + t * 100 + h * 10 + dh)
    feeds = {x: rng.standard_normal((b, t, d)) * 0.5}
    feeds.update({w: rng.standard_normal((d, d)) / math.sqrt(d) for w in (wq, wk, wv, wo)})
    return [loss, out, *grads], feeds


@pytest.mark.parametrize("b,t,h,dh", [(2, 16, 4, 16), (1, 5, 3, 7), (2, 7, 2, 1), (1, 1, 2, 3), (2, 128, 2, 64)])
def test_attention_heads_run_no_transpose_kernel_and_match_numpy(b, t, h, dh) -> None:
    outputs, feeds = _attention(b, t, h, dh)
    # (the pass attention runs this pattern as fused kernels, test_wgpu_attention.py; here: the other passes)
    plan = wgpu_backend.compile(outputs[0].graph, [o.node_id for o in outputs], passes=set(NAMES) - {"attention"})
    ops = [d.node.op for d in plan.dispatches]
    assert "transpose" not in ops, f"head split/merge transposes should fold into the matmuls: {ops}"
    g = plan.graph
    written = [i for i in plan.fusion.written_by]
    assert written, "the head merge should be written by its matmul"
    src = plan.shader_for(written[0])
    assert "runs no kernel of its own" in src and "fn matmul" in src and "LDC" in src
    read = [i for i in plan.fusion.read_through if g.nodes[i].attrs.get("axes") == (0, 2, 1, 3)]
    assert read and "fn matmul" in plan.shader_for(read[0]), "the head split is read in place by a matmul"
    run_both(outputs, feeds, f"attention b{b} t{t} h{h} dh{dh}", rtol=1e-4, atol=1e-4)


_PERMS = list(itertools.permutations(range(4)))


@pytest.mark.parametrize("perm", _PERMS)
def test_matmul_operands_read_through_any_transpose(perm) -> None:
    """A and B each the transpose of a (2, 3, 5, 4)-shaped buffer by any axis order (some fold, some don't)."""
    base = (2, 3, 5, 4)
    with at.Graph():
        xa, xb = at.input("xa", base), at.input("xb", base)
        a = at.ops.transpose(xa, perm)                                   # (.., r, c)
        bt = at.ops.transpose(at.ops.transpose(xb, perm), (0, 1, 3, 2))  # (.., c, r): a @ bt is (.., r, r)
        y = a @ bt
        loss = at.sum(y * y)
        gxa, gxb = at.grad(loss, [xa, xb])
    rng = np.random.default_rng(sum(p * 4 ** i for i, p in enumerate(perm)))
    feeds = {xa: rng.standard_normal(base), xb: rng.standard_normal(base)}
    run_both([y, gxa, gxb], feeds, f"perm {perm}", rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("perm", _PERMS)
def test_matmul_results_written_through_any_transpose(perm) -> None:
    """y = a @ b, then transposed by any axis order (and reshaped): the write folds where it can."""
    with at.Graph():
        a, b = at.input("a", (2, 3, 5, 4)), at.input("b", (2, 3, 4, 6))
        y = at.ops.transpose(a @ b, perm)
        z = at.ops.reshape(y, (-1,)) * 2.0
        ga, gb = at.grad(at.sum(z * z), [a, b])
    rng = np.random.default_rng(sum(p * 4 ** i for i, p in enumerate(perm)) + 7)
    feeds = {a: rng.standard_normal((2, 3, 5, 4)), b: rng.standard_normal((2, 3, 4, 6))}
    run_both([z, ga, gb], feeds, f"perm {perm}", rtol=1e-4, atol=1e-4)


def test_transposed_result_that_is_also_an_output_is_computed() -> None:
    """A transpose asked for as an output keeps its own buffer; the matmul's other reader reads it plainly."""
    with at.Graph():
        a, b = at.input("a", (1, 4, 3)), at.input("b", (1, 3, 5))
        m = a @ b
        t = at.ops.transpose(m, (0, 2, 1))
        u = at.ops.transpose(t, (0, 2, 1)) + 1.0
    plan = at.backends.compile([t, u], backend="wgpu")
    assert t.node_id not in plan.fusion.written_by
    rng = np.random.default_rng(3)
    run_both([t, u, m], {a: rng.standard_normal((1, 4, 3)), b: rng.standard_normal((1, 3, 5))}, "output transpose")


def test_lm_block_through_the_public_api_matches_numpy() -> None:
    """nn.TransformerBlock (causal) forward and every parameter gradient: the folds on a real model."""
    with at.Graph():
        x = at.input("x", (2, 6, 12))
        blk = at.nn.TransformerBlock(12, 3, causal=True, name="blk")
        y = blk(x)
        loss = at.sum(y * y)
        params = blk.parameters()
        grads = at.grad(loss, [x, *params])
    rng = np.random.default_rng(11)
    feeds = {x: rng.standard_normal((2, 6, 12))}
    feeds.update({p: rng.standard_normal(p.shape) * 0.3 for p in params})
    plan = at.backends.compile([loss, *grads], backend="wgpu")
    assert "transpose" not in [d.node.op for d in plan.dispatches if d.node.attrs.get("axes") == (0, 2, 1, 3)]
    run_both([loss, *grads], feeds, "transformer block", rtol=2e-4, atol=2e-4)


def test_weight_gradient_of_a_matmul_result_keeps_its_layout() -> None:
    """sum_to(transpose(m) @ g) reads m as it is (one GEMM): m must not be written in another layout."""
    with at.Graph():
        a, b = at.input("a", (3, 4, 5)), at.input("b", (3, 5, 6))
        g_ = at.input("g", (3, 4, 7))
        m = a @ b                                              # (3, 4, 6), read only by its transpose
        s = at.ops.sum_to(at.ops.transpose(m, (0, 2, 1)) @ g_, (6, 7))
    rng = np.random.default_rng(5)
    feeds = {a: rng.standard_normal((3, 4, 5)), b: rng.standard_normal((3, 5, 6)), g_: rng.standard_normal((3, 4, 7))}
    plan = at.backends.compile([s], backend="wgpu")
    assert plan.fusion.gemm_sum and not plan.fusion.written_by
    run_both([s], feeds, "gemm_sum of a matmul result")


def test_empty_inner_dimension_with_a_transposed_result() -> None:
    """K = 0: the product is zeros (computed once, not by a kernel); its transpose still reads it plainly."""
    with at.Graph():
        a, b = at.input("a", (2, 3, 0)), at.input("b", (2, 0, 4))
        y = at.ops.transpose(a @ b, (0, 2, 1)) + 1.0
    run_both([y], {a: np.zeros((2, 3, 0)), b: np.zeros((2, 0, 4))}, "K = 0")


# --- a sum or mean of a product: the reduction multiplies while it reads (the mul runs no kernel) ----------
_PRODUCT_CASES = [
    ("mean last axis (segmented rows)", (6, 5, 37), lambda p: at.mean(p, axis=-1)),
    ("sum last axis, keepdims", (2, 3, 64), lambda p: at.sum(p, axis=-1, keepdims=True)),
    ("sum over leading axes (column pass)", (4, 33, 7), lambda p: at.sum(p, axis=(0, 1))),
    ("sum_to a bias shape (column pass)", (8, 16, 5), lambda p: at.ops.sum_to(p, (5,))),
    ("sum of everything (two stages)", (300, 301), lambda p: at.sum(p)),
    ("mean, thread per output", (4096, 3), lambda p: at.mean(p, axis=-1)),
    ("mean of a middle axis", (3, 9, 4), lambda p: at.mean(p, axis=1)),
    ("batch 1, one element", (1, 1), lambda p: at.sum(p, axis=0)),
]


@pytest.mark.parametrize("what,shape,reduce", _PRODUCT_CASES, ids=[c[0] for c in _PRODUCT_CASES])
def test_reduction_of_a_product_is_one_kernel_and_matches_numpy(what, shape, reduce) -> None:
    with at.Graph():
        a, b = at.input("a", shape), at.input("b", shape)
        p = a * b
        r = reduce(p)
        sq = at.sum(a * a)                       # both factors the same buffer
    plan = at.backends.compile([r, sq], backend="wgpu")
    assert "mul" not in [d.node.op for d in plan.dispatches], what
    assert r.node_id in plan.fusion.products
    src = plan.shader_for(p)
    assert "runs no kernel of its own" in src and "x[i] * y[i]" in src
    rng = np.random.default_rng(len(what))
    run_both([r, sq], {a: rng.standard_normal(shape), b: rng.standard_normal(shape)}, what)


def test_product_that_is_also_read_elsewhere_is_written() -> None:
    """mul with a second reader (or asked for as an output) keeps its kernel; the reduction reads it plainly."""
    with at.Graph():
        a, b = at.input("a", (3, 8)), at.input("b", (3, 8))
        p = a * b
        r = at.mean(p, axis=-1)
        q = at.ops.broadcast_to(at.reshape(r, (3, 1)), (3, 8)) - p
        c = at.input("c", (8,))
        s = at.sum(a * c, axis=-1)               # broadcast factor: not fused
    plan = at.backends.compile([r, q, s, p], backend="wgpu")
    assert not plan.fusion.products
    rng = np.random.default_rng(2)
    run_both([r, q, s, p], {a: rng.standard_normal((3, 8)), b: rng.standard_normal((3, 8)),
                            c: rng.standard_normal(8)}, "mul read twice")
