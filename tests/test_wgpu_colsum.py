"""A bias gradient computed by its layer's weight-gradient GEMM on the wgpu backend.

``dW = sum_to(transpose(x) @ g)`` runs as one GEMM, and ``db = sum_to(g, (N,))`` reads the same
``g``: the GEMM's kernel adds up g's columns while it multiplies (variant ``:colsum``), one row
per K-chunk when the GEMM is split (added up by a short kernel, or by the optimizer's update
that reads db). The bounds-checked kernel (odd sizes) leaves db to its own kernels. Every case
is checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at
from asgteach.backends import wgpu_backend

from wgpu_helpers import require_adapter, run_both

require_adapter()


def _linear(batch: tuple, k: int, n: int, seed: int, twice: bool = False):
    rng = np.random.default_rng(seed)
    with at.Graph() as gr:
        x = at.input("x", batch + (k,))
        t = at.input("t", batch + (n,))
        w = at.parameter("w", (k, n))
        b = at.parameter("b", (n,))
        y = x @ w + b
        feeds = {x: rng.standard_normal(batch + (k,)), t: rng.standard_normal(batch + (n,)),
                 w: rng.standard_normal((k, n)) * 0.2, b: rng.standard_normal(n)}
        if twice:   # the bias read by two layers: its gradient is a sum of two sum_to's
            w2 = at.parameter("w2", (n, n))
            feeds[w2] = rng.standard_normal((n, n)) * 0.2
            y = at.tanh(y) @ w2 + b
        loss = at.sum(at.softmax(y, axis=-1) * t)
        gw, gb = at.grad(loss, [w, b])
        new_w, new_b = w - 0.1 * gw, b - 0.1 * gb
    return gr, (gw, gb, new_w, new_b), feeds


def _variants(plan) -> list[str]:
    return [d.key[2] for d in plan.dispatches if d.entry == "matmul"]


@pytest.mark.parametrize("batch,k,n", [((64, 64), 128, 128), ((2, 8), 128, 128), ((32, 32), 128, 64)],
                         ids=["split-K", "one-chunk", "128x64-tile"])
@pytest.mark.parametrize("asked", ["update", "grads"])
def test_the_gemm_adds_up_the_bias_gradient(batch: tuple, k: int, n: int, asked: str) -> None:
    gr, (gw, gb, new_w, new_b), feeds = _linear(batch, k, n, seed=k + n + len(asked))
    outs = [new_w, new_b] if asked == "update" else [gw, gb]
    plan = wgpu_backend.compile(gr, [o.node_id for o in outs])
    assert any(v.endswith(":colsum") for v in _variants(plan)), _variants(plan)
    assert not any(d.entry in ("sum_cols",) and d.node.id == gb.node_id for d in plan.dispatches)
    assert "by-product" in plan.shader_for(gb.node_id) or "partial sums" in plan.shader_for(gb.node_id)
    run_both(outs, feeds, f"bias gradient from the GEMM {batch} {k}x{n} ({asked})", rtol=1e-4, atol=1e-4)


def test_odd_sizes_leave_the_bias_gradient_to_its_own_kernels() -> None:
    gr, (gw, gb, new_w, new_b), feeds = _linear((3, 37), 19, 23, seed=1)
    plan = wgpu_backend.compile(gr, [new_w.node_id, new_b.node_id])
    assert not any(v.endswith(":colsum") for v in _variants(plan))
    run_both([new_w, new_b, gw, gb], feeds, "bias gradient on its own (edge kernel)", rtol=1e-4, atol=1e-4)


def test_a_bias_used_twice_gets_both_contributions() -> None:
    gr, (gw, gb, new_w, new_b), feeds = _linear((16, 32), 64, 64, seed=2, twice=True)
    run_both([gw, gb, new_w, new_b], feeds, "a bias read by two layers", rtol=1e-4, atol=1e-4)
