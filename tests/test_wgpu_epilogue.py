"""A Linear layer's bias added in the matmul's epilogue on the wgpu backend.

``x @ W + b`` with ``b`` of shape (N,), where the add is the product's only reader and no
elementwise chain takes the add in, runs as ONE matmul kernel that adds ``b`` to each row it
stores (pass ``wgpu_passes.epilogue``, variant ``:bias``). Every case is checked against numpy, with the
gradients; the cases where the rewrite must NOT happen are checked too."""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at
from asgteach.backends import wgpu_backend

from wgpu_helpers import run_both

pytestmark = pytest.mark.gpu   # every test here runs kernels (no adapter: skipped loudly; CI=true: failed)


def _matmul_variants(plan) -> list[str]:
    return [d.key[2] for d in plan.dispatches if d.entry == "matmul"]


@pytest.mark.parametrize("shape", [(4, 37, 13, 11), (2, 128, 64, 128), (1, 256, 32, 256), (3, 5, 1, 1)],
                         ids=["odd", "tile-multiple", "one-batch", "N=1"])
@pytest.mark.parametrize("transposed_w", [False, True], ids=["xW", "xWt"])
def test_bias_epilogue_matches_numpy_with_gradients(shape: tuple, transposed_w: bool) -> None:
    b_, t, k, n = shape
    rng = np.random.default_rng(sum(shape) + transposed_w)
    with at.Graph():
        x = at.input("x", (b_, t, k))
        w = at.parameter("w", (n, k) if transposed_w else (k, n))
        bias = at.parameter("b", (n,))
        y = x @ (w.T if transposed_w else w) + bias
        out = at.tanh(y) * at.tanh(y)            # two readers of y: the add stays a kernel's own result
        loss = at.sum(out)
        grads = at.grad(loss, [x, w, bias])
        plan = wgpu_backend.compile(y.graph, [out.node_id])
    feeds = {x: rng.standard_normal((b_, t, k)), w: rng.standard_normal(w.shape) * 0.3,
             bias: rng.standard_normal((n,))}
    variants = _matmul_variants(plan)
    assert len(variants) == 1 and variants[0].endswith(":bias"), variants
    add = [nid for nid in plan.node_ids if y.graph.nodes[nid].op == "add"]
    text = plan.shader_for(add[0])
    assert "computes this value as it stores its result" in text and "Bias" in text
    run_both([out, loss, *grads], feeds, f"bias epilogue {shape} {'W^T' if transposed_w else 'W'}")


def test_bias_first_and_row_vector_bias() -> None:
    """``b + x @ W`` is the same add; a (1, N) or (M, N) addend is not a bias and keeps its add."""
    rng = np.random.default_rng(7)
    with at.Graph():
        x = at.input("x", (6, 8))
        w = at.parameter("w", (8, 12))
        b = at.parameter("b", (12,))
        row = at.parameter("row", (1, 12))
        full = at.parameter("full", (6, 12))
        # (a softmax reads each sum: an elementwise reader would take the add into its own chain instead)
        ys = [at.softmax(b + x @ w, axis=-1), at.softmax(x @ w + row, axis=-1), at.softmax(x @ w + full, axis=-1)]
        plan = wgpu_backend.compile(x.graph, [y.node_id for y in ys])
    assert sorted(v.endswith(":bias") for v in _matmul_variants(plan)) == [False, False, True]
    feeds = {x: rng.standard_normal((6, 8)), w: rng.standard_normal((8, 12)), b: rng.standard_normal(12),
             row: rng.standard_normal((1, 12)), full: rng.standard_normal((6, 12))}
    run_both(ys, feeds, "bias first, row and full addends")


def test_no_epilogue_when_the_product_or_the_sum_is_asked_for_or_read_twice() -> None:
    rng = np.random.default_rng(8)
    with at.Graph():
        x = at.input("x", (16, 8))
        w = at.parameter("w", (8, 16))
        b = at.parameter("b", (16,))
        p1 = x @ w
        y1 = p1 + b                       # the product itself is an output
        y2 = x @ w + b                    # the sum is an output (read back): it keeps its own buffer
        p3 = x @ w
        y3 = at.softmax(p3 + b, axis=-1) + p3   # the product has two readers
        outs = [p1, y1, y2, y3]
        plan = wgpu_backend.compile(x.graph, [o.node_id for o in outs])
    assert not any(v.endswith(":bias") for v in _matmul_variants(plan))
    feeds = {x: rng.standard_normal((16, 8)), w: rng.standard_normal((8, 16)), b: rng.standard_normal(16)}
    run_both(outs, feeds, "no epilogue")


def test_a_transformer_block_uses_the_epilogue_and_matches_numpy() -> None:
    """The q, k, v projections (read through the head split) and the FFN's first layer take the epilogue."""
    rng = np.random.default_rng(9)
    with at.Graph():
        x = at.input("x", (2, 8, 16))
        block = at.nn.TransformerBlock(16, 4, causal=True, name="blk")
        y = block(x)
        loss = at.sum(y * y)
        params = list(block.parameters())
        grads = at.grad(loss, params)
        plan = wgpu_backend.compile(x.graph, [loss.node_id, *(g.node_id for g in grads)])
    assert sum(v.endswith(":bias") for v in _matmul_variants(plan)) >= 4
    feeds = {x: rng.standard_normal((2, 8, 16))}
    feeds.update({p: rng.standard_normal(p.shape) * 0.3 for p in params})
    run_both([loss, *grads], feeds, "transformer block with bias epilogues", rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("order", ["mm+b+r", "r+(b+mm)", "mm+r", "r+mm+b"])
def test_a_residual_is_added_in_the_epilogue_too(order: str) -> None:
    """``x @ W + b + r`` (a residual connection): both adds are absorbed, in either operand order."""
    rng = np.random.default_rng(len(order))
    with at.Graph():
        x = at.input("x", (3, 20, 12))
        r = at.input("r", (3, 20, 16))
        w = at.parameter("w", (12, 16))
        b = at.parameter("b", (16,))
        mm = x @ w
        y = {"mm+b+r": lambda: mm + b + r, "r+(b+mm)": lambda: r + (b + mm), "mm+r": lambda: mm + r,
             "r+mm+b": lambda: (r + mm) + b}[order]()
        out = at.softmax(y, axis=-1)
        loss = at.sum(out * out)
        grads = at.grad(loss, [x, r, w, b])
        plan = wgpu_backend.compile(y.graph, [out.node_id])
    variants = _matmul_variants(plan)
    assert len(variants) == 1 and variants[0].endswith(":resid"), variants
    assert (":bias" in variants[0]) == ("b" in order)
    assert [d.entry for d in plan.dispatches].count("main2") == 0      # no add kernel left
    feeds = {x: rng.standard_normal((3, 20, 12)), r: rng.standard_normal((3, 20, 16)),
             w: rng.standard_normal((12, 16)) * 0.3, b: rng.standard_normal(16)}
    run_both([out, *grads], feeds, f"residual epilogue {order}")


def test_a_broadcast_addend_or_a_read_intermediate_stops_the_epilogue() -> None:
    rng = np.random.default_rng(11)
    with at.Graph():
        x = at.input("x", (4, 8))
        w = at.parameter("w", (8, 8))
        b = at.parameter("b", (8,))
        r = at.input("r", (1, 8))                    # (1, N): broadcast, not the product's shape
        c = at.input("c", (4, 8))
        s1 = x @ w + b
        y1 = at.softmax(s1 + r, axis=-1)             # the bias is absorbed, the (1, N) add is not
        s2 = x @ w + c
        y2 = at.softmax(s2 + b, axis=-1) + s2        # s2 has two readers: only the first add is absorbed
        plan = wgpu_backend.compile(x.graph, [y1.node_id, y2.node_id])
    assert sorted(_matmul_variants(plan)) == sorted([f"{v}" for v in _matmul_variants(plan)])
    kinds = sorted(v.split(":", 3)[-1] if v.count(":") >= 3 else "" for v in _matmul_variants(plan))
    assert kinds == ["bias", "resid"], _matmul_variants(plan)
    feeds = {x: rng.standard_normal((4, 8)), w: rng.standard_normal((8, 8)), b: rng.standard_normal(8),
             r: rng.standard_normal((1, 8)), c: rng.standard_normal((4, 8))}
    run_both([y1, y2], feeds, "partial epilogues")


@pytest.mark.parametrize("form", ["scale+mask", "scale", "mask", "scale+bias"])
def test_attention_scores_scale_and_mask_in_the_epilogue(form: str) -> None:
    """``(q @ k^T) * (1/sqrt(d)) + mask``: a scalar constant multiplies C first, a (T, T) matrix broadcast
    over the batch is added (``:scale``, ``:mat``); the mul and add run no kernel."""
    rng = np.random.default_rng(len(form))
    b, h, t, d = 2, 3, 20, 8
    with at.Graph():
        q = at.input("q", (b, h, t, d))
        k = at.input("k", (b, h, t, d))
        bias = at.parameter("bias", (t,))
        s = q @ at.ops.transpose(k, (0, 1, 3, 2))
        if "scale" in form:
            s = s * (1.0 / np.sqrt(d))
        if "mask" in form:
            s = s + at.constant(np.triu(np.full((t, t), -1e9), 1), name="causal mask")
        if "bias" in form:
            s = s + bias
        w = at.softmax(s, axis=-1)
        loss = at.sum(w * w)
        grads = at.grad(loss, [q, k] + ([bias] if "bias" in form else []))
        plan = wgpu_backend.compile(w.graph, [w.node_id])
    variants = _matmul_variants(plan)
    assert len(variants) == 1 and all(f":{p}" in variants[0] for p in
                                      {"scale": ["scale"], "mask": ["mat"], "scale+mask": ["scale", "mat"],
                                       "scale+bias": ["scale", "bias"]}[form]), variants
    assert [d.entry for d in plan.dispatches] == ["matmul", "softmax_wg"]
    feeds = {q: rng.standard_normal((b, h, t, d)), k: rng.standard_normal((b, h, t, d)), bias: rng.standard_normal(t)}
    run_both([w, loss, *grads], feeds, f"attention scores epilogue ({form})", rtol=1e-4, atol=1e-4)


def test_a_scale_that_is_not_a_scalar_constant_stays_a_kernel() -> None:
    rng = np.random.default_rng(12)
    with at.Graph():
        x = at.input("x", (4, 8))
        w = at.parameter("w", (8, 8))
        c = at.input("c", ())                              # fed, not a constant: not known when the plan is built
        y = at.softmax((x @ w) * c, axis=-1)
        plan = wgpu_backend.compile(x.graph, [y.node_id])
    assert not any(":scale" in v for v in _matmul_variants(plan))
    run_both([y], {x: rng.standard_normal((4, 8)), w: rng.standard_normal((8, 8)), c: np.array(0.5)}, "fed scale")
