"""The GPU plan's passes, each alone against the plain plan.

The plain plan (``optimize=False``) runs one kernel per compute node; each pass of
``asgteach/backends/wgpu_passes`` rewrites that kernel list. Here every pass runs ALONE
(``wgpu_backend.compile(..., passes=NAME)``) on a small transformer's training step (and on
graphs that give it something to do): its plan must compute what numpy computes, run no more
dispatches than the plain plan, and say in ``plan.passes`` what it did. Then all of them together.
Runs on lavapipe; skips, saying so, only when no adapter exists.
"""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at
from asgteach.backends import wgpu_backend
from asgteach.backends.wgpu_passes import NAMES, PASSES

from wgpu_helpers import assert_close, f32_feeds, reference

pytestmark = pytest.mark.gpu   # every test here runs kernels (no adapter: skipped loudly; CI=true: failed)


def _step():
    """A transformer block's loss and gradients: every pass finds something to rewrite in it."""
    rng = np.random.default_rng(11)
    with at.Graph() as g:
        x = at.input("x", (2, 8, 16))
        block = at.nn.TransformerBlock(16, 4, causal=True, name="blk")
        head = at.nn.Linear(16, 16, name="head")
        y = head(at.nn.LayerNorm(16, name="lnf")(block(x)))
        loss = at.mean(y * y)
        params = [p for p in g.nodes if p.op == "parameter"]
        grads = at.grad(loss, [at.Tensor(g, p.id) for p in params] + [x])
    feeds = {x: rng.standard_normal((2, 8, 16))}
    feeds.update({at.Tensor(g, p.id): rng.standard_normal(p.shape) * 0.3 for p in params})
    return g, [loss, *grads], feeds


def _check(g, outs, feeds, plan, what: str) -> None:
    want = reference(outs, feeds)
    got = plan.run(f32_feeds(feeds), on_nan="ignore")
    for k, (a, b) in enumerate(zip(got, want)):
        assert_close(a, b, f"{what}: output {k}", rtol=1e-4, atol=1e-4)


def test_the_pass_list_is_in_order_and_named() -> None:
    assert NAMES[:len(PASSES)] == tuple(p.NAME for p in PASSES) and NAMES[-1] == "partial_sums"
    assert all(p.__doc__ and "rewrites" in p.__doc__ and "pays" in p.__doc__ for p in PASSES), \
        "each pass's docstring says what it rewrites and why it pays"
    with pytest.raises(ValueError, match="no GPU pass named"):
        g, outs, _ = _step()
        wgpu_backend.compile(g, [t.node_id for t in outs], passes="no_such_pass")


@pytest.mark.parametrize("name", NAMES)
def test_each_pass_alone_matches_numpy_and_never_adds_kernels(name: str) -> None:
    g, outs, feeds = _step()
    ids = [t.node_id for t in outs]
    plain = wgpu_backend.compile(g, ids, optimize=False)
    alone = wgpu_backend.compile(g, ids, passes=name)
    assert [r.name for r in alone.passes] == [name]
    (record,) = alone.passes
    assert record.after <= record.before and str(record).startswith(name), str(record)
    assert len(alone.dispatches) <= len(plain.dispatches)
    _check(g, outs, feeds, alone, f"pass {name} alone")


@pytest.mark.parametrize("name", ["layer_norm_dx", "free_reshapes", "transposes", "epilogue", "chains"])
def test_these_passes_alone_remove_kernels_from_a_transformer_step(name: str) -> None:
    g, outs, _ = _step()
    ids = [t.node_id for t in outs]
    (record,) = wgpu_backend.compile(g, ids, passes=name).passes
    assert record.after < record.before, str(record)


def test_all_passes_together_are_the_default_plan() -> None:
    g, outs, feeds = _step()
    ids = [t.node_id for t in outs]
    plain = wgpu_backend.compile(g, ids, optimize=False)
    full = wgpu_backend.compile(g, ids)
    assert [r.name for r in full.passes][:len(NAMES)] == list(NAMES)
    assert full.passes[0].before == len({d.node.id for d in plain.dispatches}), "the passes start from the plain list"
    assert all(a.after == b.before for a, b in zip(full.passes[:len(PASSES) - 1], full.passes[1:len(PASSES)]))
    assert len(full.dispatches) < len(plain.dispatches) / 2
    assert plain.passes == [] and "plain plan" in str(plain.passes)
    _check(g, outs, feeds, full, "all passes")
    _check(g, outs, feeds, plain, "plain plan")


def test_at_compile_caches_the_plain_plan_apart_and_only_the_gpu_has_one() -> None:
    g, outs, _ = _step()
    plain = at.compile(outs, backend="wgpu", optimize=False)
    assert at.compile(outs, backend="wgpu", optimize=False) is plain
    assert at.compile(outs, backend="wgpu") is not plain and not plain.optimize
    assert "plain" in repr(plain) and not plain.passes
    computed = [i for i in plain.node_ids if g.nodes[i].op not in ("input", "parameter", "constant")]
    assert {d.node.id for d in plain.dispatches} == set(computed), "one kernel per compute node"
    with pytest.raises(ValueError, match="plain plan"):
        at.compile(outs, backend="numpy", optimize=False)
