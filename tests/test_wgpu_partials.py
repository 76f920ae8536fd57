"""A two-stage sum whose only reader is a fused chain: the chain adds the partial sums itself.

A weight gradient over a long batch runs as a GEMM split into K-chunks and a kernel adding the
chunks, one thread per output. When the only reader is an elementwise chain (an optimizer's update),
the plan drops that second kernel and the chain sums the chunks as it reads them
(pass ``wgpu_passes.partial_sums``). A bias gradient's partial column sums (hundreds per
output, added by a workgroup each) keep their second kernel. Checked against numpy, in a plain plan
and in a Trainer whose update writes parameters in place."""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at
from asgteach.backends import wgpu_backend

from wgpu_helpers import run_both

pytestmark = pytest.mark.gpu   # every test here runs kernels (no adapter: skipped loudly; CI=true: failed)


def _sgd_graph(batch: int, t: int, k: int, n: int):
    """y = x @ W + b over a (batch, t) of rows, a loss, and SGD's new W and b (chains reading the grads)."""
    with at.Graph() as gr:
        x = at.input("x", (batch, t, k))
        w = at.parameter("w", (k, n))
        b = at.parameter("b", (n,))
        y = at.softmax(x @ w + b, axis=-1)
        loss = at.sum(y * y)
        gw, gb = at.grad(loss, [w, b])
        new_w, new_b = w - 0.1 * gw, b - 0.1 * gb
    return gr, (x, w, b), (new_w, new_b, gw, gb)


def test_the_update_adds_the_partial_sums_and_matches_numpy() -> None:
    # 64 x 64 rows of 128 columns: the bias gradient's column pass makes partial rows; the weight
    # gradient (128 x 128 from K = 4096) is split into K-chunks
    gr, (x, w, b), (new_w, new_b, gw, gb) = _sgd_graph(64, 64, 128, 128)
    plan = wgpu_backend.compile(gr, [new_w.node_id, new_b.node_id])
    headers = "".join(plan.shader_for(t) for t in (new_w, new_b))
    assert headers.count("the sum of its partial sums, added as it is read") == 1, headers[:2000]
    # the weight gradient: one kernel (the K-chunks; the update adds them); the bias gradient keeps two
    assert [d.entry for d in plan.dispatches if d.node.id == gw.node_id] == ["matmul"]
    assert [d.entry for d in plan.dispatches if d.node.id == gb.node_id] == ["sum_cols4", "sum_wg"]
    rng = np.random.default_rng(0)
    feeds = {x: rng.standard_normal((64, 64, 128)) * 0.5, w: rng.standard_normal((128, 128)) * 0.1,
             b: rng.standard_normal(128)}
    run_both([new_w, new_b], feeds, "SGD step with partial sums in the update", rtol=1e-4, atol=1e-4)


def test_a_sum_read_by_two_kernels_or_asked_for_keeps_its_second_stage() -> None:
    gr, (x, w, b), (new_w, new_b, gw, gb) = _sgd_graph(64, 64, 128, 128)
    plan = wgpu_backend.compile(gr, [new_w.node_id, new_b.node_id, gw.node_id, gb.node_id])   # grads asked for too
    for grad in (gw, gb):
        assert len([d for d in plan.dispatches if d.node.id == grad.node_id]) == 2
    rng = np.random.default_rng(1)
    feeds = {x: rng.standard_normal((64, 64, 128)) * 0.5, w: rng.standard_normal((128, 128)) * 0.1,
             b: rng.standard_normal(128)}
    run_both([new_w, new_b, gw, gb], feeds, "second stages kept", rtol=1e-4, atol=1e-4)


def test_a_trainer_with_adamw_in_place_matches_numpy_over_steps() -> None:
    """AdamW's update chains read the partial sums AND write p, m, v in place (bind_updates)."""
    results = {}
    for backend in ("numpy", "wgpu"):
        with at.Graph():
            x = at.input("x", (32, 64, 64))
            target = at.input("t", (32, 64, 32))
            net = at.nn.MLP([64, 128, 32], activation="tanh", name="mlp")
            err = net(x) - target
            loss = at.mean(err * err)
            tr = at.Trainer(loss, optimizer=at.optim.AdamW(lr=1e-2), backend=backend, seed=3)
        rng = np.random.default_rng(5)
        feeds = {x: rng.standard_normal((32, 64, 64)).astype(np.float32),
                 target: rng.standard_normal((32, 64, 32)).astype(np.float32)}
        losses = [tr.train_step(feeds) for _ in range(4)]
        results[backend] = (losses, {k: np.asarray(v) for k, v in tr.params.items()}, tr)
    plan = results["wgpu"][2].plan
    summed = [d for d in plan.dispatches if d.entry == "fused" and "four partial sums at a time" in d.source]
    assert len(summed) == 2, "the updates of the two weights add their gradients' K-chunks"
    np.testing.assert_allclose(results["wgpu"][0], results["numpy"][0], rtol=2e-4, atol=1e-6)
    for k, v in results["numpy"][1].items():
        np.testing.assert_allclose(results["wgpu"][1][k], v, rtol=2e-4, atol=2e-5, err_msg=k)
