"""The pass ``softmax_grad`` on the wgpu backend: softmax's backward along the last axis as ONE kernel.

softmax's rule builds dx = y * (g - sum(g * y, axis=-1, keepdims=True)) from four graph ops. The
optimised GPU plan recognises them (``wgpu_passes.softmax_grad``, which reads no mark from the op
layer), and with a following ``* c`` (c a scalar constant: the scale in front of attention's softmax)
runs shaders/softmax_grad.wgsl once: a row's y and g read once, s added up in registers. Checked here
against numpy on rows of 1 to 3000 elements (the kernel's three ways: a thread per row, a row in
registers, a row read twice), with and without the scale, an attention-like causal case, and near
misses that must stay as the other passes make them. Sizes stay small: this runs on lavapipe.
"""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at
from asgteach.backends import wgpu_backend
from asgteach.backends.wgpu_passes import NAMES

from wgpu_helpers import BOTH_PLANS, run_both

pytestmark = pytest.mark.gpu   # every test here runs kernels (no adapter: skipped loudly; CI=true: failed)

ENTRIES = ("softmax_grad_wg", "softmax_grad_t")


def _record(plan) -> str:
    return next(r for r in plan.passes if r.name == "softmax_grad").rewrote


def _entries(plan) -> list[str]:
    return [d.entry for d in plan.dispatches]


def _softmax_graph(shape: tuple, scale: float | None, seed: int = 0):
    """x -> softmax(x * scale or x) -> sum(y * r); the gradient w.r.t. x (with a scale: dx * scale)."""
    rng = np.random.default_rng(seed)
    with at.Graph() as gr:
        x = at.input("x", shape)
        r = at.constant(rng.standard_normal(shape))
        y = at.softmax(x * scale if scale is not None else x, axis=-1)
        (gx,) = at.grad(at.sum(y * r), [x])
    return gr, gx, {x: rng.standard_normal(shape) * 2}


# (2100, 3): a thread per row (*_t); (2, 3000): rows longer than a workgroup holds in registers
SHAPES = [(7,), (3, 1), (4, 3), (5, 7), (2, 3, 33), (3, 300), (2100, 3), (2, 3000)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("scale", [None, 0.125], ids=["no-scale", "scale"])
def test_softmax_gradients_through_the_one_kernel_match_numpy(shape: tuple, scale: float | None) -> None:
    gr, gx, feeds = _softmax_graph(shape, scale)
    plan = at.compile([gx], backend="wgpu")
    want = "softmax_grad_t" if shape == (2100, 3) else "softmax_grad_wg"
    assert _entries(plan).count(want) == 1, _entries(plan)
    assert _record(plan).startswith(f"1 softmax backward(s) -> one softmax_grad kernel each ({int(scale is not None)}"
                                    f" with the following scale)"), _record(plan)
    # the kernel writes x's gradient: dx itself, or (the scale joined) the node dx * scale
    assert plan.fusion.shortcuts[gx.node_id][0] == "softmax_grad"
    run_both([gx], feeds, f"softmax grad {shape} scale {scale}", plans=BOTH_PLANS)


def test_the_removed_nodes_show_the_one_kernel() -> None:
    gr, gx, feeds = _softmax_graph((4, 9), 0.5)
    plan = at.compile([gx], backend="wgpu")
    (holder,) = [k for k, v in plan.fusion.shortcuts.items() if v[0] == "softmax_grad"]
    assert holder == gx.node_id   # dx * 0.5 is the node the kernel writes
    inner = [n for n in gr.nodes if n.id in plan.fusion.skip and n.op in ("mul", "sum", "sub")]
    assert sorted(n.op for n in inner) == ["mul", "mul", "sub", "sum"], inner   # g * y, its sum, g - s, dx
    for n in inner:
        text = plan.shader_for(n.id)
        assert f"the softmax_grad kernel of node #{holder}" in text and "fn softmax_grad_wg" in text, text[:400]
    text = plan.shader_for(holder)
    assert "recognised y * (g - sum(g * y, axis=-1)), times 0.5" in text and "fn softmax_grad_wg" in text
    # the plain plan runs the rule node by node (a sum and elementwise kernels), never this kernel
    plain = at.compile([gx], backend="wgpu", optimize=False)
    assert not set(ENTRIES) & set(_entries(plain)) and len(plain.dispatches) >= len(plan.dispatches) + 4
    # without the pass, products and chains take the rule: a sum of the product, then one chain
    without = wgpu_backend.compile(gr, [gx.node_id], passes=[p for p in NAMES if p != "softmax_grad"])
    assert "sum_wg" in _entries(without) and not set(ENTRIES) & set(_entries(without))
    assert len(without.dispatches) == len(plan.dispatches) + 1, (_entries(without), _entries(plan))


def _attention_like(b: int, h: int, t: int, dh: int, seed: int = 0):
    """softmax(q @ k^T * scale + causal mask) @ v, written out; gradients w.r.t. q, k, v."""
    rng = np.random.default_rng(seed)
    mask = np.triu(np.full((t, t), -1e9), k=1)
    with at.Graph() as gr:
        q, k, v = (at.input(name, (b, h, t, dh)) for name in "qkv")
        s = q @ at.transpose(k, (0, 1, 3, 2)) * (1 / np.sqrt(dh)) + at.constant(mask)
        o = at.softmax(s, axis=-1) @ v
        grads = at.grad(at.sum(o * at.constant(rng.standard_normal((b, h, t, dh)))), [q, k, v])
    return gr, grads, {x: rng.standard_normal((b, h, t, dh)) for x in (q, k, v)}


def test_an_attention_like_causal_softmax_backward_with_its_scale() -> None:
    gr, grads, feeds = _attention_like(2, 2, 33, 8)
    plan = at.compile(grads, backend="wgpu")
    assert _entries(plan).count("softmax_grad_wg") == 1, _entries(plan)
    assert _record(plan).startswith("1 softmax backward(s) -> one softmax_grad kernel each (1 with the following"), \
        _record(plan)
    run_both(grads, feeds, "attention-like gradients, causal", plans=BOTH_PLANS)


def _by_hand(shape: tuple, variant: str, rng: np.random.Generator):
    """dx = y * (g - sum(g * y)) written in a cell; ``variant`` changes one thing (or nothing: "same")."""
    with at.Graph():
        x, g = at.input("x", shape), at.input("g", shape)
        feeds = {x: rng.standard_normal(shape), g: rng.standard_normal(shape)}
        y = at.softmax(x, axis=-1)
        p = y * g if variant != "same" else g * y   # either order of the commutative mul is the pattern
        axis = 0 if variant == "axis 0" else -1
        s = at.sum(p, axis=axis, keepdims=True)
        dx = (g - s) * y
        outs = [dx]
        if variant == "sum asked for":
            outs.append(s)
        elif variant == "g * y read elsewhere":
            outs.append(at.sum(p * p))
        elif variant == "dx asked for, scaled":
            outs.append(dx * 3.0)
        elif variant == "scale by a tensor":
            c = at.input("c", (1,))
            feeds[c] = np.array([0.75])
            outs = [dx * c]
    return outs, feeds


@pytest.mark.parametrize("variant", ["same", "axis 0", "sum asked for", "g * y read elsewhere",
                                     "dx asked for, scaled", "scale by a tensor"])
def test_a_formula_by_hand_and_its_near_misses(variant: str) -> None:
    """The pass reads the graph: the formula built by hand is recognised; a near miss is left to products
    and chains (and still gives numpy's numbers)."""
    rng = np.random.default_rng(7)
    shape = (3, 10)
    outs, feeds = _by_hand(shape, variant, rng)
    plan = at.compile(outs, backend="wgpu")
    fused = variant in ("same", "dx asked for, scaled", "scale by a tensor")
    assert bool(set(ENTRIES) & set(_entries(plan))) == fused, (variant, _entries(plan))
    if not fused:
        assert _record(plan) == "no softmax backward along the last axis in this plan"
    if variant == "dx asked for, scaled":   # dx is an output: the scale is not folded in, a chain computes it
        assert "(0 with the following scale)" in _record(plan)
    run_both(outs, feeds, f"softmax grad by hand, {variant}", plans=BOTH_PLANS)


def test_grad_of_grad_through_softmax() -> None:
    """A Hessian-vector product through softmax: the second backward reads nodes of the first rule (s, g - s),
    so those keep their kernels where they must; every value still equals numpy's."""
    rng = np.random.default_rng(3)
    with at.Graph():
        x, v = at.input("x", (3, 12)), at.input("v", (3, 12))
        r = at.constant(rng.standard_normal((3, 12)))
        (gx,) = at.grad(at.sum(at.softmax(x * 0.5, axis=-1) * r), [x])
        (hvp,) = at.grad(at.sum(gx * v), [x])
    feeds = {x: rng.standard_normal((3, 12)), v: rng.standard_normal((3, 12))}
    run_both([gx, hvp], feeds, "hvp through softmax", plans=BOTH_PLANS, rtol=1e-4, atol=1e-4)
