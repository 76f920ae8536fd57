"""The pass ``layer_norm_dx`` on the wgpu backend: layer_norm's dx run as ONE kernel.

layer_norm's rule builds dx from a dozen small graph ops (the reader sees the formula). The
optimised GPU plan recognises that formula in the gradient graph (``wgpu_passes.layer_norm_dx``,
which reads no hint from the op layer), runs the op ``layer_norm_dx``'s kernel for dx, lets it
write the rule's x_hat too when dw reads it, and runs nothing for the nodes whose only use was dx.
The plain plan (``optimize=False``) runs the rule node by node. Everything here is checked against
numpy."""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at
from asgteach.backends import wgpu_backend
from asgteach.backends.wgpu_passes import layer_norm_dx, rewrite

from wgpu_helpers import BOTH_PLANS, run_both


def _ln_graph(shape: tuple, learn_w: bool = True):
    rng = np.random.default_rng(sum(shape) + learn_w)
    with at.Graph() as gr:
        x = at.input("x", shape)
        w = at.parameter("w", shape[-1:]) if learn_w else None
        b = at.parameter("b", shape[-1:])
        target = at.input("t", shape)
        out = at.layer_norm(x, w, b)
        loss = at.sum((out - target) * (out - target))
        wrt = [x, b] + ([w] if learn_w else [])
        grads = at.grad(loss, wrt)
    feeds = {x: rng.standard_normal(shape) * 2 + 1, target: rng.standard_normal(shape),
             b: rng.standard_normal(shape[-1:])}
    if learn_w:
        feeds[w] = rng.standard_normal(shape[-1:])
    return gr, grads, feeds


def _entries(gr, outs) -> list[str]:
    return [d.entry for d in wgpu_backend.compile(gr, [o.node_id for o in outs]).dispatches]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(4, 6), (2, 3, 130), (5, 512), (3, 1), (7,), (3, 1030)], ids=str)
@pytest.mark.parametrize("learn_w", [True, False], ids=["dw", "no-dw"])
def test_layer_norm_gradients_through_the_shortcut_match_numpy(shape: tuple, learn_w: bool) -> None:
    gr, grads, feeds = _ln_graph(shape, learn_w)
    entries = _entries(gr, grads)
    # x_hat is written by the shortcut's kernel only when dw still reads it
    assert entries.count("layer_norm_dx_xhat" if learn_w else "layer_norm_dx") == 1, entries
    run_both(grads, feeds, f"layer_norm grads {shape}")


@pytest.mark.gpu
def test_the_pass_replaces_the_rules_kernels_and_says_so() -> None:
    gr, grads, feeds = _ln_graph((8, 16))
    outs = [g.node_id for g in grads]
    plan = wgpu_backend.compile(gr, outs)
    dx = grads[0].node
    assert plan.fusion.shortcuts[dx.id][0] == "layer_norm_dx"
    assert "computed by the kernel of layer_norm_dx" in plan.shader_for(dx.id)
    (xhat,) = plan.fusion.provides[dx.id].values()
    assert "by-product" in plan.shader_for(xhat)
    dead = [n for n in gr.nodes if n.meta.get("vjp_of") == dx.meta.get("vjp_of") and n.op == "mean"
            and n.id < dx.id]
    assert dead and all("its only use was node" in plan.shader_for(n.id) for n in dead)
    line = next(r for r in plan.passes if r.name == "layer_norm_dx")
    assert line.after <= line.before - 12, line   # the rule's dozen kernels are gone
    # the plain plan runs the rule node by node: more kernels, same numbers
    plain = wgpu_backend.compile(gr, outs, optimize=False)
    assert len(plain.dispatches) >= len(plan.dispatches) + 12
    assert not any(d.entry.startswith("layer_norm_dx") for d in plain.dispatches)
    run_both(grads, feeds, "layer_norm grads, plain and optimised", plans=BOTH_PLANS)


def test_the_pass_alone_against_the_plain_kernel_list() -> None:
    """Run only this pass over the plain plan's kernel list: dx gets the one kernel, nothing else changes."""
    gr, grads, _ = _ln_graph((4, 6))
    outs = [g.node_id for g in grads]
    compute = [gr.nodes[i] for i in gr.ancestors(outs) if gr.nodes[i].op not in ("input", "parameter", "constant")]
    ctx, records = rewrite(gr, compute, outs, 8, passes=(layer_norm_dx,))
    (record,) = records
    assert record.name == "layer_norm_dx" and record.before == len(compute) and record.after < record.before
    assert list(ctx.f.shortcuts) == [grads[0].node_id]
    assert not ctx.f.alias and not ctx.f.chains and not ctx.f.operands   # no other pass ran
    assert str(records).split("\n")[0].split()[:2] == ["1.", "layer_norm_dx"]


@pytest.mark.gpu
def test_the_formula_written_by_hand_is_recognised_and_a_different_one_is_not() -> None:
    """The pass reads the graph, not a mark: the same formula built in a cell is found; one changed term is not."""
    rng = np.random.default_rng(5)
    for changed in (False, True):
        with at.Graph() as gr:
            x, g, w = at.input("x", (3, 10)), at.input("g", (3, 10)), at.input("w", (10,))
            xc = x - at.mean(x, axis=-1, keepdims=True)
            rstd = 1.0 / at.sqrt(at.mean(xc * xc, axis=-1, keepdims=True) + 1e-5)
            xhat = xc * rstd
            gw = g * w
            other = at.mean(gw, axis=0, keepdims=True) if changed else at.mean(gw, axis=-1, keepdims=True)
            dx = rstd * (gw - other - xhat * at.mean(gw * xhat, axis=-1, keepdims=True))
        plan = wgpu_backend.compile(gr, [dx.node_id])
        entries = [d.entry for d in plan.dispatches]
        assert any(e.startswith("layer_norm_dx") for e in entries) != changed, entries
        feeds = {x: rng.standard_normal((3, 10)), g: rng.standard_normal((3, 10)), w: rng.standard_normal(10)}
        run_both([dx], feeds, f"hand-written layer_norm dx (changed: {changed})", plans=BOTH_PLANS)


@pytest.mark.gpu
def test_grad_of_grad_keeps_what_the_second_pass_reads() -> None:
    """A Hessian-vector product through layer_norm: the second backward reads nodes of the first
    rule (x_hat, 1/sigma...), so those stay computed while dx itself comes from the shortcut."""
    rng = np.random.default_rng(3)
    with at.Graph():
        x = at.input("x", (3, 8))
        w = at.parameter("w", (8,))
        b = at.parameter("b", (8,))
        v = at.input("v", (3, 8))
        loss = at.sum(at.tanh(at.layer_norm(x, w, b)))
        (gx,) = at.grad(loss, [x])
        hvp = at.grad(at.sum(gx * v), [x, w])
    feeds = {x: rng.standard_normal((3, 8)), w: rng.standard_normal(8), b: rng.standard_normal(8),
             v: rng.standard_normal((3, 8))}
    run_both([gx, *hvp], feeds, "hvp through layer_norm", rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_a_transformer_step_uses_one_kernel_per_layer_norm_backward() -> None:
    rng = np.random.default_rng(4)
    with at.Graph() as gr:
        x = at.input("x", (2, 8, 16))
        block = at.nn.TransformerBlock(16, 4, causal=True, name="blk")
        ln_f = at.nn.LayerNorm(16, name="lnf")
        y = ln_f(block(x))
        loss = at.sum(y * y)
        params = list(block.parameters()) + list(ln_f.parameters())
        grads = at.grad(loss, params + [x])
    entries = _entries(gr, grads)
    n_ln = sum(1 for n in gr.nodes if n.op == "layer_norm")
    assert sum(e.startswith("layer_norm_dx") for e in entries) == n_ln >= 3
    feeds = {x: rng.standard_normal((2, 8, 16))}
    feeds.update({p: rng.standard_normal(p.shape) * 0.3 for p in params})
    run_both(grads, feeds, "transformer block with layer_norm shortcuts", rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("d", [24, 1030], ids=["row-in-registers", "long-row"])
@pytest.mark.parametrize("learn_w", [True, False], ids=["dw", "no-dw"])
def test_a_residual_blocks_input_gradient_is_added_by_the_shortcuts_kernel(learn_w: bool, d: int) -> None:
    """``h = x + f(layer_norm(x))``: x's gradient is g_h + layer_norm's dx; that kernel adds g_h as it
    writes dx (entry ``*_plus``) and the add runs no kernel. Two blocks, so one input of the sum is
    itself such a sum."""
    rng = np.random.default_rng(11 + learn_w)
    shape = (3, 5, d)
    with at.Graph() as gr:
        x = at.input("x", shape)
        ws = [at.parameter(f"w{k}", shape[-1:]) if learn_w else None for k in range(2)]
        mats = [at.parameter(f"m{k}", (d, d)) for k in range(3)]
        h = x @ mats[2]   # (x's own gradient would be an output: an output keeps its add)
        for k in range(2):
            h = h + at.tanh(at.layer_norm(h, ws[k], None) @ mats[k])
        loss = at.sum(h * h)
        grads = at.grad(loss, [*mats] + ([w for w in ws] if learn_w else []))
    feeds = {x: rng.standard_normal(shape), **{m: rng.standard_normal((d, d)) * (1.5 / d ** 0.5) for m in mats}}
    feeds.update({w: rng.standard_normal(d) for w in ws if w is not None})
    plan = wgpu_backend.compile(gr, [g_.node_id for g_ in grads])
    plus = [d for d in plan.dispatches if d.entry.endswith("_plus")]
    assert len(plus) == 2, [d.entry for d in plan.dispatches]
    adds = [n for n in plan.node_ids if gr.nodes[n].op == "add" and n in plan.fusion.bias_add]
    assert len(adds) == 2 and "adds node" in plan.shader_for(adds[0])
    run_both(grads, feeds, "residual blocks' gradients with the sum in the shortcut")


@pytest.mark.gpu
def test_no_sum_in_the_shortcut_when_dx_or_the_sum_is_asked_for() -> None:
    """An output keeps its own buffer: a requested dx (or a requested sum) keeps the add a kernel."""
    rng = np.random.default_rng(3)
    with at.Graph() as gr:
        x = at.input("x", (4, 8))
        m = at.parameter("m", (8, 8))
        e = x @ m
        h = e + at.layer_norm(e)
        loss = at.sum(h * h)
        (gm,) = at.grad(loss, [m])
    (dx,) = (gr.nodes[i] for i in wgpu_backend.compile(gr, [gm.node_id]).fusion.shortcuts)
    (total,) = [n for n in gr.nodes if n.op == "add" and dx.id in n.inputs]
    feeds = {x: rng.standard_normal((4, 8)), m: rng.standard_normal((8, 8))}
    for outs, summed in (([gm.node_id], True), ([gm.node_id, dx.id], False), ([gm.node_id, total.id], False)):
        plan = wgpu_backend.compile(gr, outs)
        assert any(d.entry.endswith("_plus") for d in plan.dispatches) == summed, (outs, plan.dispatches)
    run_both([gm], feeds, "the gradient through a summed shortcut")
