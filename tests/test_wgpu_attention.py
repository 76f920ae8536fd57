"""The pass ``attention`` on the wgpu backend: attention forward and backward as fused kernels.

nn.MultiHeadAttention builds attention from graph ops; the optimised GPU plan recognises that
pattern and its gradient graph (``wgpu_passes.attention``) and runs kernels that never store a
(T, T) tensor (shaders/attention_fwd.wgsl, attention_bwd.wgsl). Checked here against
numpy and against the plan without the pass, with the causal mask, a key padding mask,
sequences that are not a multiple of the kernels' row blocks and tiles, several heads and
batches, a head size that is not a multiple of 4; and near-misses that must be left alone.
Sizes stay small: this runs on lavapipe (a CPU). By default the pass fuses only attentions whose
scores are large (``attention.FUSE_FROM_BYTES``); here it is set to 0 so that small ones are fused.
"""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at
from asgteach.backends import wgpu_backend, wgpu_plan_cache
from asgteach.backends.wgpu_passes import NAMES, attention
from asgteach.nn.attention import MultiHeadAttention

from wgpu_helpers import assert_close, f32_feeds, reference, run_both

pytestmark = pytest.mark.gpu   # every test here runs kernels (no adapter: skipped loudly; CI=true: failed)

FUSED = ("attention_fwd", "attention_dq", "attention_dk", "attention_dv")
WITHOUT = tuple(n for n in NAMES if n != "attention")   # every other pass: the plan the fused one must equal
DEFAULT_FROM = attention.FUSE_FROM_BYTES


@pytest.fixture(autouse=True)
def fuse_every_size(monkeypatch):
    """Fuse attentions of any size (plans lowered under another threshold are not reused: cache cleared)."""
    wgpu_plan_cache.clear()
    monkeypatch.setattr(attention, "FUSE_FROM_BYTES", 0)
    yield
    wgpu_plan_cache.clear()


def _attention_graph(b: int, t: int, d: int, h: int, causal: bool, pad: str | None, seed: int = 0):
    """An attention layer, sum(y * r) and its gradients w.r.t. x and every parameter; ``pad``: None, "tail"
    (every row keeps key 0) or "head" (some rows see only padded keys: f32 and f64 then differ)."""
    rng = np.random.default_rng(seed)
    with at.Graph() as gr:
        x = at.input("x", (b, t, d))
        pm = at.input("pm", (b, t)) if pad else None
        att = MultiHeadAttention(d, h, causal=causal)
        y = att(x, padding_mask=pm)
        r = at.constant(rng.standard_normal((b, t, d)))
        params = list(att.parameters())
        grads = at.grad(at.sum(y * r), [x] + params)
    feeds = {x: rng.standard_normal((b, t, d))}
    for p in params:
        feeds[p] = rng.standard_normal(p.shape) * 0.5
    if pad:
        m = np.ones((b, t))
        if pad == "tail":
            m[0, -min(3, t - 1):] = 0
        else:
            m[0, :2] = 0
            m[-1, :min(4, t - 1)] = 0
        feeds[pm] = m
    return gr, [y] + grads, feeds


def _entries(plan) -> list[str]:
    return [d.entry for d in plan.dispatches]


@pytest.mark.parametrize("t", [5, 70], ids=lambda t: f"T{t}")
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("pad", [None, "tail"], ids=["no-pad", "pad"])
def test_fused_attention_and_its_gradients_match_numpy(t: int, causal: bool, pad: str | None) -> None:
    gr, outs, feeds = _attention_graph(2, t, 8, 2, causal, pad)
    plan = wgpu_backend.compile(gr, [o.node_id for o in outs])
    assert all(_entries(plan).count(e) == 1 for e in FUSED), _entries(plan)
    run_both(outs, feeds, f"attention T={t} causal={causal} pad={pad}")


@pytest.mark.parametrize("d, h, t", [(24, 2, 67), (12, 3, 9), (8, 1, 1), (8, 2, 300)],
                         ids=["dh12", "dh4-h3", "T1", "T300-three-row-blocks"])
def test_fused_attention_equals_the_plan_without_it(d: int, h: int, t: int) -> None:
    """Head sizes that are not a multiple of 4, one head, a sequence of one, a sequence over several of the
    kernels' row blocks (attention.ROWS) ending in a partial one, and padding that leaves some rows only
    padded keys (there f32 rounds the masked scores alike, as the unfused kernels do)."""
    gr, outs, feeds = _attention_graph(3, t, d, h, True, "head" if t > 4 else None, seed=d + t)
    ids = [o.node_id for o in outs]
    fused = wgpu_backend.compile(gr, ids)
    assert all(e in _entries(fused) for e in FUSED)
    plain = wgpu_backend.compile(gr, ids, passes=WITHOUT)
    assert not any(e in _entries(plain) for e in FUSED)
    got = fused.run(f32_feeds(feeds), on_nan="ignore")
    want = plain.run(f32_feeds(feeds), on_nan="ignore")
    for k, (g, w) in enumerate(zip(got, want)):
        # (the key projection's bias gets a gradient that is 0 in exact arithmetic, softmax ignoring a shift of
        # a row: a sum of B * T terms that cancel, each plan's own rounding left over: atol is for that)
        assert_close(g, w, f"output {k} ({outs[k].op} {outs[k].shape}): fused vs the plan without the pass",
                     atol=2e-4)


def test_no_t_by_t_tensor_and_less_memory() -> None:
    b, t, d, h = 2, 96, 8, 2
    gr, outs, feeds = _attention_graph(b, t, d, h, True, None)
    ids = [o.node_id for o in outs]
    fused = wgpu_backend.compile(gr, ids)
    unfused = wgpu_backend.compile(gr, ids, passes=WITHOUT)
    scores = b * h * t * t * 4
    assert max(fused.lowered.slot_sizes) < scores // 4, "a buffer as large as the scores exists"
    assert max(unfused.lowered.slot_sizes) >= scores
    assert fused.bytes_owned + fused.bytes_pooled < unfused.bytes_owned + unfused.bytes_pooled
    run_both(outs, feeds, "attention T=96", atol=1e-4)   # (atol: the key bias's gradient, 0 up to rounding)


def test_the_binding_limit_counts_the_buffers_the_plan_allocates() -> None:
    """A GPU binds at most ``max_binding`` bytes per buffer (an H100: 2 GiB). The fused plan never allocates
    the (T, T) scores, so it compiles and runs where they alone are over the limit; without the pass, the
    error names the first node whose buffer is too large, its shape and the user's line that made it."""
    b, t, d, h = 2, 96, 8, 2
    gr, outs, feeds = _attention_graph(b, t, d, h, True, None)
    ids = [o.node_id for o in outs]
    scores = b * h * t * t * 4
    limit = scores // 2
    fused = wgpu_backend.compile(gr, ids, max_binding=limit)
    assert all(e in _entries(fused) for e in FUSED) and max(fused.lowered.slot_sizes) <= limit
    for k, (got, want) in enumerate(zip(fused.run(f32_feeds(feeds)), reference(outs, feeds))):
        assert_close(got, want, f"output {k} under a binding limit of {limit} bytes", atol=1e-4)
    with pytest.raises(wgpu_backend.BindingLimitError,
                       match=rf"matmul \(node #\d+ 'matmul', shape \({b}, {h}, {t}, {t}\)\) needs {scores} bytes, "
                             rf"but this GPU adapter binds at most {limit} bytes per buffer \(created at "
                             rf".*test_wgpu_attention.py:\d+\)") as e:   # (the line of _attention_graph)
        wgpu_backend.compile(gr, ids, max_binding=limit, passes=WITHOUT)
    assert "backend='numpy'" in str(e.value)


def test_the_inspector_shows_the_fused_kernel_for_every_node_of_the_pattern() -> None:
    gr, outs, _ = _attention_graph(1, 6, 8, 2, True, None)
    plan = wgpu_backend.compile(gr, [o.node_id for o in outs])
    nodes = gr.nodes
    softmax = next(n for n in nodes if n.op == "softmax")
    heads = next(n for n in nodes if n.op == "matmul" and softmax.id in n.inputs)
    assert "fn attention_fwd" in plan.shader_for(softmax.id) and "runs no kernel" in plan.shader_for(softmax.id)
    assert "fused attention kernel" in plan.shader_for(heads.id)
    row_sums = [n for n in nodes if n.op == "sum" and n.attrs.get("keepdims") and n.phase == "backward"]
    assert row_sums and all("fn dkv" in plan.shader_for(n.id) for n in row_sums)
    assert "attention" in str(plan.passes) and "1 attention(s) -> the fused kernels (1 with their backward)" \
        in str(plan.passes)


def _hand_attention(t: int, mask: np.ndarray | None, weights_out: bool):
    """q @ k^T * s (+ mask), softmax, @ v written by hand on (1, 2, t, 4) inputs, with its gradients."""
    rng = np.random.default_rng(t)
    shape = (1, 2, t, 4)
    with at.Graph() as gr:
        q, k, v = (at.input(n, shape) for n in "qkv")
        s = (q @ at.transpose(k, (0, 1, 3, 2))) * 0.5
        if mask is not None:
            s = s + at.constant(mask)
        w = at.softmax(s, axis=-1)
        y = w @ v
        outs = [y, *at.grad(at.sum(y * at.constant(rng.standard_normal(shape))), [q, k, v])]
        if weights_out:
            outs.append(w)
    return gr, outs, {x: rng.standard_normal(shape) for x in (q, k, v)}


@pytest.mark.parametrize("case", ["plain", "causal", "weights-read", "other-mask"])
def test_a_near_miss_is_left_to_the_other_passes(case: str) -> None:
    t = 7
    causal = np.triu(np.full((t, t), -1e9), k=1)
    other = np.random.default_rng(1).standard_normal((t, t))   # a (T, T) mask that is not causal: not fused
    mask = {"plain": None, "causal": causal, "weights-read": None, "other-mask": other}[case]
    gr, outs, feeds = _hand_attention(t, mask, weights_out=case == "weights-read")
    plan = wgpu_backend.compile(gr, [o.node_id for o in outs])
    fused = all(e in _entries(plan) for e in FUSED)
    assert fused == (case in ("plain", "causal")), (case, _entries(plan))
    if not fused:
        assert "near-miss" in str(plan.passes) or "no attention pattern" in str(plan.passes)
    run_both(outs, feeds, f"hand-written attention, {case}")


def test_forward_only_plans_fuse_the_forward() -> None:
    gr, outs, feeds = _attention_graph(2, 9, 8, 2, True, "tail")
    plan = wgpu_backend.compile(gr, [outs[0].node_id])
    entries = _entries(plan)
    assert "attention_fwd" in entries and "attention_dq" not in entries
    run_both(outs[:1], feeds, "attention forward only")


def test_by_default_small_attentions_are_left_unfused(monkeypatch) -> None:
    monkeypatch.setattr(attention, "FUSE_FROM_BYTES", DEFAULT_FROM)
    gr, outs, feeds = _attention_graph(2, 9, 8, 2, True, None)
    plan = wgpu_backend.compile(gr, [o.node_id for o in outs])
    assert not any(e in _entries(plan) for e in FUSED)
    assert "1 attention(s) left unfused" in str(plan.passes)
    assert 2 * 2 * 9 * 9 * 4 < DEFAULT_FROM
