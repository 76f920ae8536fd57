"""The pass ``causal_tiles`` on the wgpu backend: causal attention's products leave out tiles of zeros.

Below the size where the pass ``attention`` fuses attention, the plan runs it as matrix products
and softmax kernels; for a causal mask the six products that read the weights (or write the
(T, T) matrices that only masked or zero-weighted terms read above the diagonal) are told which
of their K tiles add only zeros (``wgpu_passes.causal_tiles``). Checked here: the plan with the
pass equals the plan without it exactly (a left-out term is 0 * x), and numpy within f32
tolerance; the tiles really are left out (a NaN at a late key no longer reaches early queries);
near misses (no mask, a mask not negative enough, a mask that is not causal) are left alone. The
softmax and its backward run their causal entries (keys j <= i read, 0.0 written above the diagonal):
equal to the full kernels, in each of their three ways (a row group in registers, a thread per row,
long rows), and a NaN above the diagonal no longer reaches the earlier queries through them.
Sequences are longer than one tile (128) so that some tiles lie above the diagonal, and small
in every other way: this runs on lavapipe (a CPU).
"""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at
from asgteach.backends import wgpu_backend
from asgteach.backends.wgpu_passes import NAMES
from asgteach.nn.attention import MultiHeadAttention

from wgpu_helpers import assert_close, f32_feeds, run_both

pytestmark = pytest.mark.gpu   # every test here runs kernels (no adapter: skipped loudly; CI=true: failed)

WITHOUT = tuple(n for n in NAMES if n != "causal_tiles")


def _layer(b: int, t: int, d: int, h: int, pad: bool, seed: int = 0):
    """A causal attention layer, sum(y * r) and the gradients w.r.t. x and every parameter."""
    rng = np.random.default_rng(seed)
    with at.Graph() as gr:
        x = at.input("x", (b, t, d))
        pm = at.input("pm", (b, t)) if pad else None
        att = MultiHeadAttention(d, h, causal=True)
        y = att(x, padding_mask=pm)
        r = at.constant(rng.standard_normal((b, t, d)))
        params = list(att.parameters())
        outs = [y] + at.grad(at.sum(y * r), [x] + params)
    feeds = {x: rng.standard_normal((b, t, d))}
    for p in params:
        feeds[p] = rng.standard_normal(p.shape) * 0.5
    if pad:
        m = np.ones((b, t))
        m[0, :2] = 0            # rows 0 and 1 of batch 0 see only padded keys
        m[-1, -5:] = 0
        feeds[pm] = m
    return gr, outs, feeds


@pytest.mark.parametrize("t, b", [(200, 1), (256, 2), (130, 1)], ids=["T200", "T256-B2", "T130"])
def test_the_pass_changes_no_result(t: int, b: int) -> None:
    """Equal to the plan without the pass (array_equal: a left-out term is 0 * x, which changes no sum) and to
    numpy within f32 tolerance; T 200 and 130 use the edge kernels (not a tile multiple), 256 the vec4 ones."""
    gr, outs, feeds = _layer(b, t, 16, 2, False, seed=t)
    ids = [o.node_id for o in outs]
    plan = wgpu_backend.compile(gr, ids)
    rules = sorted(r for v in plan.fusion.zero.values() for r in v)
    assert rules == ["A_above", "A_above", "A_below", "B_above", "C_above", "C_above"], rules
    assert "1 causal attention(s): 6 matmul(s) leave out" in str(plan.passes)
    assert plan.fusion.causal == {n.id for n in gr.nodes if n.op == "softmax"}
    without = wgpu_backend.compile(gr, ids, passes=WITHOUT)
    assert not without.fusion.zero
    got = plan.run(f32_feeds(feeds), on_nan="ignore")
    want = without.run(f32_feeds(feeds), on_nan="ignore")
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(g, w, err_msg=f"output {k} ({outs[k].op} {outs[k].shape}) with vs without")
    run_both(outs, feeds, f"causal attention T={t}", atol=1e-4)   # (atol: the key bias's gradient, 0 + rounding)


def test_the_tiles_above_the_diagonal_are_not_read() -> None:
    """A NaN in v at key 190 reaches every query through 0 * NaN when the product runs in full; with the pass,
    the first row block of queries (0..127, one tile) never reads keys past 127, so its heads stay finite."""
    t = 200
    rng = np.random.default_rng(3)
    with at.Graph() as gr:
        q, k, v = (at.input(n, (1, 1, t, 8)) for n in "qkv")
        s = (q @ at.transpose(k, (0, 1, 3, 2))) * 0.25 + at.constant(np.triu(np.full((t, t), -1e9), k=1))
        y = at.softmax(s, axis=-1) @ v
    feeds = {x: rng.standard_normal((1, 1, t, 8)).astype(np.float32) for x in (q, k, v)}
    feeds[v][0, 0, 190] = np.nan
    skipping = wgpu_backend.compile(gr, [y.node_id]).run(feeds, on_nan="ignore")[0][0, 0]
    full = wgpu_backend.compile(gr, [y.node_id], passes=WITHOUT).run(feeds, on_nan="ignore")[0][0, 0]
    assert np.isnan(full).all(), "without the pass every query multiplies v's NaN by a weight of 0"
    assert np.isfinite(skipping[:128]).all() and np.isnan(skipping[190:]).all()
    shown = wgpu_backend.compile(gr, [y.node_id]).shader_for(y.node_id)
    assert "t_hi = min(t_hi, (row0 + BM + BK - 1u) / BK);" in shown


def test_with_a_key_padding_bias_every_tile_runs() -> None:
    """Rows 0 and 1 of batch 0 see only padded keys: every score of theirs is near -1e9, masked or not, so their
    weights above the diagonal are not 0 and no tile may be left out (the pass leaves such an attention alone)."""
    gr, outs, feeds = _layer(2, 140, 16, 2, True, seed=5)
    plan = wgpu_backend.compile(gr, [o.node_id for o in outs])
    assert not plan.fusion.zero and not plan.fusion.causal and "no unfused causal attention" in str(plan.passes)
    # (against the plain GPU plan, which runs every product in full: numpy's float64 rounds those rows' scores,
    # all near -1e9, differently from float32)
    got = plan.run(f32_feeds(feeds), on_nan="ignore")
    full = wgpu_backend.compile(gr, [o.node_id for o in outs], optimize=False).run(f32_feeds(feeds), on_nan="ignore")
    for k, (g, w) in enumerate(zip(got, full)):
        assert_close(g, w, f"output {k}: the optimised plan vs the plain one", atol=1e-4)


@pytest.mark.parametrize("mask", ["none", "weak", "not-causal"])
def test_a_near_miss_runs_every_tile(mask: str) -> None:
    """No mask, a causal mask of -100 (exp(-100) is not 0 in f32: tiny weights above the diagonal still count),
    a (T, T) mask that is not causal: no rules, and the results still match numpy."""
    t = 140
    rng = np.random.default_rng(4)
    m = {"none": None, "weak": np.triu(np.full((t, t), -100.0), k=1),
         "not-causal": np.tril(np.full((t, t), -1e9), k=-1)}[mask]
    with at.Graph():
        q, k, v = (at.input(n, (1, 2, t, 4)) for n in "qkv")
        s = (q @ at.transpose(k, (0, 1, 3, 2))) * 0.5
        if m is not None:
            s = s + at.constant(m)
        y = at.softmax(s, axis=-1) @ v
        outs = [y, *at.grad(at.sum(y * at.constant(rng.standard_normal((1, 2, t, 4)))), [q, k, v])]
    plan = at.compile(outs, backend="wgpu")
    assert not plan.fusion.zero and "no unfused causal attention" in str(plan.passes)
    run_both(outs, {x: rng.standard_normal((1, 2, t, 4)) for x in (q, k, v)}, f"attention, mask {mask}")


def _qkv_attention(b: int, h: int, t: int, dh: int, seed: int = 0):
    """softmax(q @ k^T * 0.5 + causal mask of -1e9) @ v and the gradients w.r.t. q, k, v; the feeds (float32),
    the weights w and the inputs (q, k, v)."""
    rng = np.random.default_rng(seed)
    with at.Graph() as gr:
        q, k, v = (at.input(n, (b, h, t, dh)) for n in "qkv")
        s = (q @ at.transpose(k, (0, 1, 3, 2))) * 0.5 + at.constant(np.triu(np.full((t, t), -1e9), k=1))
        w = at.softmax(s, axis=-1)
        y = w @ v
        outs = [y, *at.grad(at.sum(y * at.constant(rng.standard_normal((b, h, t, dh)))), [q, k, v])]
    feeds = {x: rng.standard_normal((b, h, t, dh)).astype(np.float32) for x in (q, k, v)}
    return gr, outs, feeds, w, (q, k, v)


# (1, 1, 40): a row group per row (*_wg), in registers; (1, 128, 16): 2048 rows of 16, a thread per row (*_t);
# (1, 1, 2050): rows longer than the registers hold (the *_wg loops)
@pytest.mark.parametrize("b, h, t, entry", [(2, 2, 40, "wg"), (1, 128, 16, "t"), (1, 1, 2050, "wg")],
                         ids=["T40", "T16-thread-rows", "T2050-long-rows"])
def test_the_row_kernels_read_only_keys_up_to_the_query(b: int, h: int, t: int, entry: str) -> None:
    """softmax and its backward run their causal entries (keys j <= i read, 0.0 written above the diagonal) and
    give exactly what the full kernels give in the plan without the pass (array_equal), and numpy's numbers."""
    gr, outs, feeds, w, _ = _qkv_attention(b, h, t, 4, seed=t)
    ids = [o.node_id for o in outs]
    plan = wgpu_backend.compile(gr, ids)
    entries = [d.entry for d in plan.dispatches]
    assert plan.fusion.causal == {w.node_id}
    assert entries.count(f"softmax_causal_{entry}") == 1 and entries.count(f"softmax_grad_causal_{entry}") == 1, \
        entries
    assert "1 softmax(es) read only the keys j <= i" in str(plan.passes)
    without = wgpu_backend.compile(gr, ids, passes=WITHOUT)
    plain = [d.entry for d in without.dispatches]
    assert f"softmax_{entry}" in plain and f"softmax_grad_{entry}" in plain and "causal" not in " ".join(plain)
    got, want = plan.run(feeds, on_nan="ignore"), without.run(feeds, on_nan="ignore")
    for k, (g, x) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(g, x, err_msg=f"output {k} ({outs[k].op} {outs[k].shape}) with vs without")
    if t < 1000:   # (numpy in float64 at T = 2050 only costs time: the row kernels are compared just above)
        run_both(outs, feeds, f"causal attention {b, h, t}", atol=1e-4)


def test_the_softmax_does_not_read_above_the_diagonal() -> None:
    """A NaN in k at the last key puts a NaN in every query's score for it (T = 40: one tile, computed in full):
    the full softmax takes it into every row's max and sum, the causal one only into the last query's row."""
    t = 40
    gr, outs, feeds, w, (_, k, _) = _qkv_attention(1, 1, t, 8, seed=11)
    feeds[k][0, 0, t - 1] = np.nan
    y = outs[0].node_id
    causal = wgpu_backend.compile(gr, [y]).run(feeds, on_nan="ignore")[0][0, 0]
    full = wgpu_backend.compile(gr, [y], passes=WITHOUT).run(feeds, on_nan="ignore")[0][0, 0]
    assert np.isnan(full).all(), "the full softmax reads the NaN score above the diagonal in every row"
    assert np.isfinite(causal[: t - 1]).all() and np.isnan(causal[t - 1]).all()
    shown = wgpu_backend.compile(gr, [y]).shader_for(w.node_id)
    assert "entry softmax_causal_wg reads only keys j <= i" in shown and "fn softmax_causal_wg" in shown


def test_the_softmax_backward_does_not_read_above_the_diagonal() -> None:
    """A NaN in v at the last key puts a NaN in every row of dW = dO @ v^T (softmax's g) at that key: the full
    softmax backward multiplies it by y = 0 and every row's sum s is NaN, so dq = dS @ k is NaN everywhere; the
    causal one reads g only at keys j <= i, so only the last query's dq is NaN."""
    t = 40
    gr, outs, feeds, w, (_, _, v) = _qkv_attention(1, 1, t, 8, seed=12)
    feeds[v][0, 0, t - 1] = np.nan
    ids = [o.node_id for o in outs]   # (with dq alone the heads are not computed: no attention is found)
    plan = wgpu_backend.compile(gr, ids)
    causal = plan.run(feeds, on_nan="ignore")[1][0, 0]
    full = wgpu_backend.compile(gr, ids, passes=WITHOUT).run(feeds, on_nan="ignore")[1][0, 0]
    assert np.isnan(full).all(), "the full softmax backward adds 0 * NaN into every row's sum"
    assert np.isfinite(causal[: t - 1]).all() and np.isnan(causal[t - 1]).all()
    (holder,) = [n for n, s in plan.fusion.shortcuts.items() if s[0] == "softmax_grad"]
    assert plan.fusion.shortcuts[holder][1][0] == w.node_id   # (its y is the causal softmax)
    shown = plan.shader_for(holder)
    assert "y is a causal attention's weights" in shown and "fn softmax_grad_causal_wg" in shown
