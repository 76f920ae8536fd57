"""Compiling on wgpu twice: what is reused, that reuse changes no number, and what forgets it.

A wgpu plan's pure work (fusion, WGSL, uniform words, memory plan) is kept per graph
*structure* (``asgteach/backends/wgpu_plan_cache.py``); a second compile of a fresh graph of
the same shape only creates its own buffers and bind groups. These tests count (never
time): a second compile or Trainer lowers nothing, gives bit-identical results to a fresh
compile, and anything that changes the generated code — a shape, a constant, an op
registered again or patched, the matmul tile, a shader file — compiles afresh.
Also here: the pipeline prefetch thread and the cffi type shortcut of ``wgpu_ffi``.
"""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at
from asgteach.backends import wgpu_backend, wgpu_device, wgpu_program
from asgteach.backends import wgpu_plan_cache as plan_cache
from asgteach.ops import GPU, OpSpec, registered


X = np.random.default_rng(0).uniform(-1, 1, (4, 6)).astype(np.float32)
Y = np.random.default_rng(1).uniform(-1, 1, (4, 3)).astype(np.float32)


def _model(scale: float = 2.0, hidden: int = 8, act: str = "gelu"):
    """A small MLP in a graph of its own: matmuls, a fused elementwise chain, a scalar constant."""
    with at.Graph("cache") as g:
        x = at.input("x", (4, 6))
        y = at.input("y", (4, 3))
        h = at.ops.apply(act, at.nn.Linear(6, hidden, name="l1")(x)) * scale
        loss = at.mean((at.nn.Linear(hidden, 3, name="l2")(h) - y) ** 2)
    return g, x, y, loss


def _params(g: at.Graph) -> dict:
    rng = np.random.default_rng(2)
    return {n.name: rng.uniform(-0.5, 0.5, n.shape).astype(np.float32) for n in g.parameters()}


def _compile_and_run(**model):
    g, x, y, loss = _model(**model)
    plan = wgpu_backend.compile(g, [loss.node_id])
    return plan, plan.run({x: X, y: Y, **_params(g)})[0]


@pytest.fixture(autouse=True)
def fresh_cache():
    plan_cache.clear()
    yield
    plan_cache.clear()


@pytest.mark.gpu
def test_a_second_compile_of_the_same_shape_reuses_the_lowering_and_only_rebinds() -> None:
    p1, out1 = _compile_and_run()
    assert plan_cache.stats["misses"] == 1 and plan_cache.stats["hits"] == 0
    p2, out2 = _compile_and_run()
    assert plan_cache.stats["misses"] == 1 and plan_cache.stats["hits"] == 1, "the second compile lowered again"
    assert p2.lowered is p1.lowered
    # the reused dispatches name the new graph's nodes; the buffers are the new plan's own
    assert all(d.node is p2.graph.nodes[d.node.id] for d in p2.dispatches)
    assert not {id(b) for b in p1.buffers.values()} & {id(b) for b in p2.buffers.values()}
    np.testing.assert_array_equal(out1, out2)
    # and a compile from nothing gives the same kernels and the same bits
    plan_cache.clear()
    p3, out3 = _compile_and_run()
    assert plan_cache.stats["misses"] == 1 and p3.lowered is not p1.lowered
    assert [(d.key, d.source, d.params.tolist(), d.binds, d.groups) for d in p3.dispatches] == \
        [(d.key, d.source, d.params.tolist(), d.binds, d.groups) for d in p2.dispatches]
    np.testing.assert_array_equal(out3, out2)


@pytest.mark.gpu
def test_a_second_trainer_reuses_the_plan_and_trains_exactly_like_a_fresh_one() -> None:
    def train() -> tuple[list[float], dict, at.Trainer]:
        g, x, y, loss = _model()
        tr = at.Trainer(loss, optimizer=at.optim.AdamW(lr=1e-2), backend="wgpu", seed=0)
        return [tr.train_step({x: X, y: Y}) for _ in range(3)], tr.params, tr

    first = train()
    second = train()
    assert plan_cache.stats == {"hits": 1, "misses": 1, "update_hits": 1, "update_misses": 1}
    assert second[2].resident.in_place == first[2].resident.in_place and second[2].resident.in_place
    plan_cache.clear()
    fresh = train()
    assert plan_cache.stats["misses"] == 1 and plan_cache.stats["hits"] == 0
    for got in (first, second):
        assert got[0] == fresh[0]
        for name, value in fresh[1].items():
            np.testing.assert_array_equal(got[1][name], value, err_msg=name)


@pytest.mark.gpu
def test_another_shape_or_constant_is_another_plan() -> None:
    _, base = _compile_and_run()
    p_wide, wide = _compile_and_run(hidden=9)
    assert plan_cache.stats["misses"] == 2 and wide.shape == base.shape
    p_scaled, scaled = _compile_and_run(scale=3.0)   # the 3.0 is a uniform word of the fused kernel
    assert plan_cache.stats["misses"] == 3 and plan_cache.stats["hits"] == 0
    g, x, y, loss = _model(scale=3.0)
    want = at.run(loss, {x: X, y: Y, **_params(g)}, backend="numpy")
    np.testing.assert_allclose(scaled, want, rtol=1e-5)
    assert not np.allclose(scaled, base)
    # that 3.0 is read by no kernel as a buffer, so it has none (and is never uploaded)
    consts = p_scaled.graph.constants
    (three,) = [i for i in p_scaled.node_ids if i in consts and np.size(consts[i]) == 1 and float(consts[i]) == 3.0]
    assert three not in p_scaled.buffers and all(three not in d.binds.values() for d in p_scaled.dispatches)


def _probe_op(expr: str, fn) -> OpSpec:
    return OpSpec(name="cache_probe", category="activation", arity=1, infer=lambda s, **_: s, numpy=fn,
                  vjp=lambda c, g: (g,), gpu=GPU(expr=expr), attrs={})


@pytest.mark.gpu
def test_an_op_registered_again_with_another_formula_compiles_afresh() -> None:
    outs = []
    for expr, fn in (("x / (1.0 + abs(x))", lambda x: x / (1 + np.abs(x))),
                     ("x / (2.0 + abs(x))", lambda x: x / (2 + np.abs(x)))):
        with registered(_probe_op(expr, fn)):
            g, x, y, loss = _model(act="cache_probe")
            plan = wgpu_backend.compile(g, [loss.node_id])
            feeds = {x: X, y: Y, **_params(g)}
            outs.append(plan.run(feeds)[0])
            np.testing.assert_allclose(outs[-1], at.run(loss, feeds, backend="numpy"), rtol=1e-5)
    assert plan_cache.stats["misses"] == 2 and plan_cache.stats["hits"] == 0
    assert not np.allclose(outs[0], outs[1])


@pytest.mark.gpu
def test_a_patched_op_the_tile_or_an_edited_shader_forget_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    _compile_and_run()
    with at.ops.patched("gelu", doc="a patched spec is another object"):
        _compile_and_run()
    assert plan_cache.stats["misses"] == 2
    _compile_and_run()   # the original spec is back: its plan is still there
    assert plan_cache.stats["hits"] == 1
    monkeypatch.setattr(wgpu_program, "shaders_stamp", lambda: (("matmul.wgsl", 1, 1),))   # a file changed
    _compile_and_run()
    assert plan_cache.stats["misses"] == 3
    monkeypatch.setenv("ASGTEACH_WGPU_MATMUL_TILE", "64x64x16x4x4")
    p, out = _compile_and_run()
    assert plan_cache.stats["misses"] == 4
    g, x, y, loss = _model()
    np.testing.assert_allclose(out, at.run(loss, {x: X, y: Y, **_params(g)}, backend="numpy"), rtol=1e-5)


@pytest.mark.gpu
def test_prefetched_pipelines_are_the_ones_used_and_a_bad_shader_still_raises() -> None:
    gpu = wgpu_device.gpu()
    p, _ = _compile_and_run()
    assert not gpu.compiling, "every prefetched pipeline was collected by the plan"
    assert all(pipe is gpu.pipelines[d.key][0] for pipe, d in zip(p.pipelines, p.dispatches))
    bad = "@compute @workgroup_size(1) fn main() { let x: u32 = 1.5; }"
    gpu.prefetch(("test", "f32", "bad"), bad, "main")
    with pytest.raises(Exception, match="(?i)pars|valid|type"):
        gpu.pipeline(("test", "f32", "bad"), bad, "main")
    assert ("test", "f32", "bad") not in gpu.pipelines


def test_the_cffi_shortcut_gives_the_types_cffi_parses() -> None:
    from wgpu.backends.wgpu_native import ffi

    from asgteach.backends.wgpu_ffi import speed_up

    assert speed_up(ffi), "installed when the wgpu backend loaded"
    names = ["WGPUBindGroupDescriptor *", "WGPUBindGroupEntry[]", "WGPUBufferDescriptor *", "WGPUChainedStruct *",
             "WGPUComputePipelineDescriptor *", "uint8_t []", "uint32_t[]", "uintptr_t", "char *", "WGPULimits"]
    for cdecl in names:
        fast = ffi.typeof(cdecl)   # through the shortcut (or already cached: then it came from either path)
        tp = ffi._parser.parse_type(cdecl)
        with ffi._lock:
            assert fast is ffi._get_cached_btype(tp), cdecl
    assert ffi.typeof("unsigned int *") is not None   # not a shape the shortcut knows: cffi parses it
