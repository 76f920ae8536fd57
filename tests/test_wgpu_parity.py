"""Parity of the wgpu backend with the numpy reference, for EVERY op in the registry.

Each case of tests/opcases.py (which covers every registry op, with broadcasting,
axis variants and index forms) runs forward AND through its backward graph (the VJP of
sum(y * r) for a fixed random r), once on numpy in float64 and once on the GPU in
float32. Extra cases below cover what the GPU kernels branch on: odd sizes and exact
tile multiples for matmul, the one-thread and one-workgroup reduction layouts, grids
with more than 65535 workgroups, repeated embedding ids.

Runs on lavapipe (CPU Vulkan) in CI; skips, saying so, only when no adapter exists.
"""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at
from asgteach.backends import wgpu_kernels
from asgteach.ops import REGISTRY

from opcases import CASES, cases_for
from wgpu_helpers import BOTH_PLANS, run_both

OPS = sorted(n for n, s in REGISTRY.items() if not s.leaf)


@pytest.mark.parametrize("op", OPS)
def test_every_registry_op_has_a_wgpu_kernel_and_case(op: str) -> None:
    spec = REGISTRY[op]
    family = wgpu_kernels.family_of(op)
    assert family, f"{op} names no WGSL kernel family"
    assert family in wgpu_kernels.FAMILIES, f"{op}: the wgpu backend has no family {family!r}"
    if family == "elementwise":
        assert spec.gpu.expr, f"{op} has no WGSL formula"
    assert cases_for(op) or any(c.op == op for c in EXTRA), f"{op} has no parity case"


def _vjp_outputs(b) -> list[at.Tensor]:
    """The gradients of sum(y * r) w.r.t. the case's inputs (r random, fixed): every VJP rule used."""
    if b.y.dtype != "float" or not b.xs or REGISTRY[b.y.op].not_differentiable or REGISTRY[b.y.op].zero_gradient:
        return []
    rng = np.random.default_rng(7)
    with b.graph:
        r = at.constant(rng.uniform(-1, 1, b.y.shape))
        return list(at.grad(at.sum(b.y * r), b.xs))


@pytest.mark.gpu
@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
def test_forward_and_vjp_match_numpy(c) -> None:
    b = c.build()
    outs = [b.y] + _vjp_outputs(b)
    run_both(outs, b.feeds, c.id, plans=BOTH_PLANS)


# --- cases for the GPU's own branches ---------------------------------------------------------
def _x(shape, lo=-1.5, hi=1.5, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, shape)


def _matmul(sa, sb):
    def build():
        a, b = at.input("a", sa), at.input("b", sb)
        return a @ b, [a, b], {a: _x(sa, seed=1), b: _x(sb, seed=2)}
    return build


def _reduce(op, shape, axis, keepdims=False):
    def build():
        x = at.input("x", shape)
        return getattr(at, op)(x, axis=axis, keepdims=keepdims), [x], {x: _x(shape, seed=3)}
    return build


def _softmax(op, shape, axis):
    def build():
        x = at.input("x", shape)
        return getattr(at, op)(x, axis=axis), [x], {x: _x(shape, -4, 4, seed=4)}
    return build


def _sum_to(shape, to):
    def build():
        x = at.input("x", shape)
        return at.sum_to(x, to), [x], {x: _x(shape, seed=10)}
    return build


def _embedding_repeated():
    ids = np.array([[1, 3, 1, 1], [0, 3, 9, 1]])
    x = at.input("ids", ids.shape, dtype="int")
    t = at.input("t", (10, 5))
    return at.embedding(x, t), [t], {x: ids, t: _x((10, 5), seed=5)}


def _getitem_steps():
    x = at.input("x", (7, 6, 5))
    return x[::-2, None, 1:5:3, ..., -1], [x], {x: _x((7, 6, 5), seed=6)}


def _concat_axis1():
    a, b, c = at.input("a", (3, 2, 4)), at.input("b", (3, 5, 4)), at.input("c", (3, 1, 4))
    feeds = {a: _x((3, 2, 4)), b: _x((3, 5, 4), seed=1), c: _x((3, 1, 4), seed=2)}
    return at.concat([a, b, c], axis=1), [a, b, c], feeds


def _big_grid():
    # more than 65535 workgroups: the 2-D dispatch grid
    x = at.input("x", (70000, 33))
    return at.sum(x, axis=1), [x], {x: _x((70000, 33), seed=8)}


def _broadcast3():
    a, b = at.input("a", (2, 1, 3, 1)), at.input("b", (4, 1, 5))
    c = at.input("c", (3, 1))
    return at.where(a, b, c) * at.pow(at.abs(b) + 0.5, a), [b, c], {
        a: np.random.default_rng(9).integers(0, 2, (2, 1, 3, 1)).astype(float), b: _x((4, 1, 5)), c: _x((3, 1))}


def _conv(xs, ws, **kw):
    def build():
        x, w = at.input("x", xs), at.input("w", ws)
        return at.conv2d(x, w, **kw), [x, w], {x: _x(xs, seed=12), w: _x(ws, seed=13)}
    return build


def _pool_ties(op, shape, **kw):
    # integer values in a small range: most windows hold several equal maxima, so the
    # GPU must pick the FIRST one exactly as numpy does (forward, gradient and its gather)
    def build():
        x = at.input("x", shape)
        return getattr(at, op)(x, **kw), [x], {x: np.random.default_rng(14).integers(-2, 3, shape).astype(float)}
    return build


def _max_pool_grad_ties():
    # the gradient of the gradient (max_pool2d_gather) with tied windows that overlap
    x, g = at.input("x", (2, 3, 7, 6)), at.input("g", (2, 3, 4, 3))
    dx = at.ops.apply("max_pool2d_grad", x, g, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))
    feeds = {x: np.random.default_rng(15).integers(-1, 2, (2, 3, 7, 6)).astype(float), g: _x((2, 3, 4, 3), seed=16)}
    return dx, [g], feeds


EXTRA = [
    ("matmul", "odd 3x5 @ 5x7", _matmul((3, 5), (5, 7))),
    ("matmul", "tile multiple 128x8 @ 8x128 (vec4 path)", _matmul((128, 8), (8, 128))),
    ("matmul", "tile multiple 128x16 @ 16x256 (vec4, 2 K-steps)", _matmul((128, 16), (16, 256))),
    ("matmul", "fallback tile 128x64 (2,128,16) @ (16,64)", _matmul((2, 128, 16), (16, 64))),
    ("matmul", "fallback tile 64x64 (64,32) @ (32,64)", _matmul((64, 32), (32, 64))),
    ("matmul", "batch broadcast (2,1,3,4) @ (5,4,6)", _matmul((2, 1, 3, 4), (5, 4, 6))),
    # backward: g @ W^T reads W transposed in place (NT), dW = sum_to(x^T @ g) is one GEMM over the batch (TN)
    ("matmul", "vec4 transposed reads (2,128,64) @ (64,128)", _matmul((2, 128, 64), (64, 128))),
    ("matmul", "vec4 transposed reads, default tile (128,128) @ (128,128)", _matmul((128, 128), (128, 128))),
    ("matmul", "batched, both transposed in backward (2,64,64) @ (2,64,64)", _matmul((2, 64, 64), (2, 64, 64))),
    ("matmul", "edge transposed reads, batch-summed (3,5,7) @ (7,6)", _matmul((3, 5, 7), (7, 6))),
    # few output tiles, long K: the weight gradient's K is split into chunks, then summed
    ("matmul", "split-K weight gradient, edge (4,256,8) @ (8,8)", _matmul((4, 256, 8), (8, 8))),
    ("matmul", "split-K weight gradient, vec4 (4,256,64) @ (64,64)", _matmul((4, 256, 64), (64, 64))),
    ("matmul", "vector @ batched (4,) @ (3,4,2)", _matmul((4,), (3, 4, 2))),
    ("matmul", "batched @ vector (2,3,130) @ (130,)", _matmul((2, 3, 130), (130,))),
    ("sum", "one thread per output (4096, 5) axis 1", _reduce("sum", (4096, 5), 1)),
    ("max", "one thread per output (2048, 3) axis 1", _reduce("max", (2048, 3), 1)),
    ("var", "one thread per output (3, 2048) axis 0", _reduce("var", (3, 2048), 0)),
    ("mean", "workgroup per output (3, 500, 2) axes (0, 2)", _reduce("mean", (3, 500, 2), (0, 2), True)),
    ("argmax", "thread per output (2500, 7)", _reduce("argmax", (2500, 7), 1)),
    ("argmax", "workgroup per output (3, 700) axis 1", _reduce("argmax", (3, 700), 1)),
    ("softmax", "thread per row (4096, 6)", _softmax("softmax", (4096, 6), 1)),
    ("log_softmax", "axis 0 of (300, 4, 3)", _softmax("log_softmax", (300, 4, 3), 0)),
    ("embedding", "repeated ids", _embedding_repeated),
    ("getitem", "negative step, None, ellipsis", _getitem_steps),
    ("concat", "middle axis, three parts", _concat_axis1),
    ("sum", "2-D workgroup grid", _big_grid),
    ("mean", "two-stage: chunks of a 120000-element mean", _reduce("mean", (300, 400), None)),
    ("max", "two-stage: (2, 70000) axis 1", _reduce("max", (2, 70000), 1)),
    ("sum_to", "leading axes, one thread per output (40, 17000) -> (17000,)", _sum_to((40, 17000), (17000,))),
    ("mul", "where/pow/abs broadcast over 4 axes", _broadcast3),
    ("conv2d", "depthwise 3x3 pad 1 (groups = channels)", _conv((2, 4, 9, 7), (4, 1, 3, 3), padding=1, groups=4)),
    ("conv2d", "1x1, stride 3 > kernel (rows skipped)", _conv((1, 5, 8, 8), (3, 5, 1, 1), stride=3)),
    ("conv2d", "5x3 kernel, dilation (2,3), stride (2,1), pad (3,2), groups 3",
     _conv((2, 6, 11, 10), (9, 2, 5, 3), stride=(2, 1), padding=(3, 2), dilation=(2, 3), groups=3)),
    ("conv2d", "grad_weight sums 1600 terms per output (> one workgroup)", _conv((4, 3, 21, 21), (8, 3, 3, 3))),
    ("max_pool2d", "ties, 2x2", _pool_ties("max_pool2d", (2, 3, 6, 8), kernel_size=2)),
    ("max_pool2d", "ties, overlapping 3x3 stride 1 pad 1",
     _pool_ties("max_pool2d", (1, 2, 7, 5), kernel_size=3, stride=1, padding=1)),
    ("max_pool2d", "ties, (3,2) kernel stride (1,3)", _pool_ties("max_pool2d", (2, 2, 6, 9), kernel_size=(3, 2),
                                                                  stride=(1, 3))),
    ("max_pool2d_grad", "ties, overlapping windows (its VJP is the gather)", _max_pool_grad_ties),
    ("avg_pool2d", "overlapping 3x3 stride 1 pad 1", _pool_ties("avg_pool2d", (2, 3, 5, 6), kernel_size=3, stride=1,
                                                                 padding=1)),
]


@pytest.mark.gpu
@pytest.mark.parametrize("op,label,build", EXTRA, ids=[f"{o}[{lbl}]" for o, lbl, _ in EXTRA])
def test_gpu_branches_match_numpy(op: str, label: str, build) -> None:
    with at.Graph():
        y, xs, feeds = build()
        outs = [y]
        if y.dtype == "float" and REGISTRY[y.op].not_differentiable is None:
            r = at.constant(np.random.default_rng(11).uniform(-1, 1, y.shape))
            outs += list(at.grad(at.sum(y * r), xs))
    run_both(outs, feeds, f"{op}[{label}]", plans=BOTH_PLANS)
