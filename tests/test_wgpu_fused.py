"""Fused elementwise chains on the GPU: which nodes fuse, and that the numbers stay numpy's.

A chain (``asgteach/backends/wgpu_passes/chains.py``, kernels from ``wgpu_chain.py``) is computed
by one generated kernel. These tests build chains that exercise each rule — broadcasting
inputs, a value that other nodes read too (it must still be written), a requested output
in the middle of a chain, where() conditions of both kinds, op attributes, scalar
constants in uniform words, chains too wide for one kernel — plus random chains
(hypothesis), and compare every output with numpy in float64.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import asgteach as at
from asgteach.backends import wgpu_backend

from wgpu_helpers import assert_close, f32_feeds, reference, run_both

pytestmark = pytest.mark.gpu   # every test here runs kernels (no adapter: skipped loudly; CI=true: failed)


def _u(shape, seed=0, lo=-2.0, hi=2.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape)


def _plan_and_check(outputs, feeds, what):
    """Compile, run, compare with numpy; return the plan for structural checks."""
    plan = wgpu_backend.compile(outputs[0].graph, [o.node_id for o in outputs])
    got = plan.run(f32_feeds(feeds), on_nan="ignore")
    for k, (g_, w) in enumerate(zip(got, reference(outputs, feeds))):
        assert_close(g_, w, f"{what}: output {k}")
    return plan


def _chain_ops(plan, root) -> list[str]:
    return [plan.graph.nodes[m].op for m in plan.fusion.chains[root.node_id].members]


def test_chain_with_broadcast_inputs_and_scalar_constants_is_one_kernel() -> None:
    with at.Graph():
        x, y, s = at.input("x", (4, 1, 3)), at.input("y", (5, 3)), at.input("s", ())
        c = at.constant(_u((3,), 9), name="c")
        out = at.exp(at.tanh(x * y + c) * 0.5) - s
    feeds = {x: _u((4, 1, 3)), y: _u((5, 3), 1), s: np.array(0.3)}
    plan = _plan_and_check([out], feeds, "broadcast chain")
    assert _chain_ops(plan, out) == ["mul", "add", "tanh", "mul", "exp", "sub"]
    assert len(plan.dispatches) == 1, [d.key for d in plan.dispatches]
    (d,) = plan.dispatches
    assert sorted(d.binds.values()) == sorted([out.node_id, x.node_id, y.node_id, s.node_id, c.node_id]), \
        "the 0.5 is a scalar constant: a uniform word, not a buffer"


def test_a_value_with_other_readers_is_written_and_ends_its_chain() -> None:
    with at.Graph():
        a, b = at.input("a", (6, 7)), at.input("b", (7,))
        t = a * b + 1.0                   # read by both chains below
        u = at.sigmoid(t) * a
        v = at.sum(t * t, axis=1)         # a reduction reads t * t
    feeds = {a: _u((6, 7)), b: _u((7,), 2)}
    plan = _plan_and_check([u, v], feeds, "shared value")
    assert t.node_id not in plan.fusion.skip and t.node_id in plan.fusion.chains, "t must be written once"
    assert _chain_ops(plan, u) == ["sigmoid", "mul"]
    (du,) = [d for d in plan.dispatches if d.node.id == u.node_id]
    assert t.node_id in du.binds.values(), "u's kernel reads t from its buffer"


def test_a_requested_output_inside_a_chain_is_computed_and_returned() -> None:
    with at.Graph():
        a = at.input("a", (3, 5))
        t = at.relu(a) * 2.0              # requested: cannot stay in registers
        u = at.log(t + 1.0) - a
    feeds = {a: _u((3, 5), 3)}
    plan = _plan_and_check([u, t], feeds, "output inside")
    assert plan.fusion.chain_of[t.node_id] == u.node_id, "t is computed in u's kernel..."
    assert plan.fusion.chains[u.node_id].stores == (t.node_id,), "...and written to its own buffer"
    assert _chain_ops(plan, u) == ["relu", "mul", "add", "log", "sub"]
    assert len(plan.dispatches) == 1
    assert "an output too" in plan.shader_for(t)


def test_where_conditions_fused_and_from_int_and_float_buffers() -> None:
    with at.Graph():
        a, b = at.input("a", (4, 6)), at.input("b", (6,))
        m = at.input("m", (4, 1), dtype="int")
        f = at.input("f", (4, 6))
        inner = at.where(at.greater(a, b), a * 3.0, a - b)        # condition computed in the chain
        y = at.where(m, -inner, a) + at.where(f, a, 0.25)         # int and float conditions read as bits
    fv = _u((4, 6), 4)
    fv[0, :3] = [0.0, -0.0, np.nan]
    feeds = {a: _u((4, 6), 5), b: _u((6,), 6), m: np.array([[0], [3], [-1], [0]]), f: fv}
    plan = _plan_and_check([y], feeds, "where")
    assert len(plan.dispatches) == 1
    assert set(_chain_ops(plan, y)) == {"greater", "mul", "sub", "where", "neg", "add"}


def test_attributes_and_the_gelu_backward_chain_match_numpy() -> None:
    with at.Graph():
        x = at.input("x", (33, 17))
        y = at.leaky_relu(x, negative_slope=0.2) + at.softplus(x * 1.5, beta=2.0) * at.gelu(x)
        (gx,) = at.grad(at.sum(at.gelu(x) * at.silu(x)), [x])
    run_both([y, gx], {x: _u((33, 17), 7, -4, 4)}, "attrs + gelu backward")


def test_identical_chains_share_one_pipeline_whatever_their_shapes_and_constants() -> None:
    with at.Graph():
        x, y = at.input("x", (8, 5)), at.input("y", (2, 3, 4))
        p = at.tanh(x * 0.5) + 1.0
        q = at.tanh(y * -3.0) + 7.0
    feeds = {x: _u((8, 5)), y: _u((2, 3, 4), 1)}
    plan = _plan_and_check([p, q], feeds, "shared pipeline")
    kp, kq = ({d.key for d in plan.dispatches if d.node.id == n.node_id} for n in (p, q))
    assert kp == kq and len(kp) == 1


def test_chains_wider_than_one_kernels_bindings_are_split() -> None:
    with at.Graph():
        xs = [at.input(f"x{k}", (3, 4)) for k in range(20)]
        total = xs[0]
        for k, x in enumerate(xs[1:]):
            total = total * x if k % 2 else total + x
    feeds = {x: _u((3, 4), k) for k, x in enumerate(xs)}
    plan = _plan_and_check([total], feeds, "wide chain")
    limit = plan.gpu.max_storage_buffers   # the device's (the plan asks for up to 16)
    assert 1 < len(plan.dispatches) < 19
    assert all(len(d.binds) <= limit for d in plan.dispatches)


def test_shader_for_a_fused_member_names_the_kernel_that_computes_it() -> None:
    with at.Graph():
        x = at.input("x", (4,))
        t = at.exp(x)
        y = t * 2.0 + x
    plan = at.backends.compile([y], backend="wgpu")
    src = plan.shader_for(t)
    assert f"fused kernel of node #{y.node_id}" in src and "fn fused" in src and "exp(x)" in src
    assert f"node #{t.node_id} exp" in plan.shader_for(y)


# --- random chains (hypothesis) ----------------------------------------------------------------
SHAPES = [(2, 3, 4), (3, 4), (4,), (1, 4), (2, 1, 4), (3, 1), ()]
UNARY = [at.neg, at.tanh, at.sigmoid, at.relu, at.abs, at.erf, at.exp, lambda v: at.log(at.abs(v) + 0.5),
         lambda v: at.sqrt(at.abs(v) + 0.1), lambda v: at.gelu(v, approximate="tanh"), at.silu, at.sign]
BINARY = [at.add, at.sub, at.mul, at.maximum, at.minimum, lambda a, b: a / (at.abs(b) + 0.5),
          lambda a, b: at.where(at.greater(a, b), a, b), lambda a, b: at.where(at.equal(a, a), b, a)]


@st.composite
def chains(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    with at.Graph("chain") as g:
        inputs, feeds = [], {}
        for k in range(draw(st.integers(1, 4))):
            shape = draw(st.sampled_from(SHAPES))
            x = at.input(f"x{k}", shape)
            inputs.append(x)
            feeds[x] = rng.uniform(-2, 2, shape)
        pool = list(inputs)
        for _ in range(draw(st.integers(2, 9))):
            if draw(st.booleans()):
                y = draw(st.sampled_from(UNARY))(draw(st.sampled_from(pool)))
            else:
                other = draw(st.sampled_from(pool + [at.constant(float(rng.uniform(-1, 1)))]))
                y = draw(st.sampled_from(BINARY))(draw(st.sampled_from(pool)), other)
            pool.append(y)
        outs = [pool[-1]] + ([draw(st.sampled_from(pool[len(inputs):]))] if draw(st.booleans()) else [])
    return g, outs, feeds


@settings(max_examples=60, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(chains())
def test_random_elementwise_chains_match_numpy(case) -> None:
    g, outs, feeds = case
    run_both(outs, feeds, "chain " + " -> ".join(n.op for n in g.nodes if n.op not in ("input", "constant")))


def test_a_scalar_with_one_elementwise_reader_joins_its_chain() -> None:
    """1 - lr * wd (a scalar per parameter in AdamW) is recomputed per element, not dispatched alone."""
    with at.Graph():
        p, lr = at.input("p", (5, 7)), at.input("lr", ())
        decay = 1.0 - lr * 0.01
        out = p * decay - lr * at.tanh(p)
    feeds = {p: _u((5, 7), 4), lr: np.array(0.3)}
    plan = _plan_and_check([out], feeds, "scalar join")
    assert len(plan.dispatches) == 1, [d.key for d in plan.dispatches]
    assert plan.fusion.chain_of[decay.node_id] == out.node_id


def test_outputs_inside_a_chain_are_all_written_by_one_kernel() -> None:
    """An optimizer's m, v and parameter: three outputs of one fused kernel, numpy's values."""
    with at.Graph():
        p, g, m, v = (at.input(n, (9, 13)) for n in "pgmv")
        m_new = 0.9 * m + 0.1 * g
        v_new = 0.999 * v + 0.001 * (g * g)
        p_new = p - 0.01 * m_new / (at.sqrt(v_new) + 1e-8)
    feeds = {p: _u((9, 13), 1), g: _u((9, 13), 2), m: _u((9, 13), 3), v: _u((9, 13), 4, 0.0, 1.0)}
    plan = _plan_and_check([p_new, m_new, v_new], feeds, "three outputs")
    assert len(plan.dispatches) == 1
    assert set(plan.fusion.chains[p_new.node_id].stores) == {m_new.node_id, v_new.node_id}


def test_bound_updates_write_in_place_when_nothing_reads_the_old_value_later() -> None:
    """bind_updates: the fused update writes the new p, m, v straight into the old buffers (no copies),
    and runs keep numpy's values step after step."""
    with at.Graph():
        x, p, m = at.input("x", (6, 11)), at.input("p", (11, 4)), at.input("m", (11, 4))
        loss = at.mean((x @ p) ** 2)
        (g,) = at.grad(loss, [p])
        m_new = 0.9 * m + 0.1 * g
        p_new = p - 0.05 * m_new
    X, P = _u((6, 11), 1), _u((11, 4), 2)
    plan = wgpu_backend.compile(loss.graph, [loss.node_id, p_new.node_id, m_new.node_id])
    res = wgpu_backend.resident_training(plan)
    res.bind_updates({p: p_new, m: m_new})
    assert res.in_place == {(p_new.node_id, p.node_id), (m_new.node_id, m.node_id)}
    assert "updated in place" in res.shader_for(p_new) and "updated in place" not in plan.shader_for(p_new)
    cur = {p: P, m: np.zeros((11, 4))}
    for step in range(3):
        first = {p: P.astype(np.float32), m: np.zeros((11, 4), np.float32)}
        (lo, _, _) = res.run({x: X.astype(np.float32)}, params=first if step == 0 else None)
        want, np_, nm = at.run([loss, p_new, m_new], {x: X, **cur}, backend="numpy")
        np.testing.assert_allclose(lo, want, rtol=1e-5)
        cur = {p: np_, m: nm}
    held = res.read_params()
    np.testing.assert_allclose(held["p"], cur[p], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(held["m"], cur[m], rtol=1e-5, atol=1e-6)


def test_bound_updates_keep_the_copy_when_the_old_value_is_read_after_the_update() -> None:
    with at.Graph():
        x, p = at.input("x", (4, 3)), at.input("p", (4, 3))
        p_new = p - 0.5 * x
        late = p_new @ at.transpose(p)   # another kernel reads p (and p_new) after p_new is computed
    plan = wgpu_backend.compile(late.graph, [late.node_id, p_new.node_id])
    res = wgpu_backend.resident_training(plan)
    res.bind_updates({p: p_new})
    assert not res.in_place
    X, P = _u((4, 3), 1), _u((4, 3), 2)
    cur = P
    for step in range(2):
        (got, _) = res.run({x: X.astype(np.float32)}, params={p: P.astype(np.float32)} if step == 0 else None)
        want, nxt = at.run([late, p_new], {x: X, p: cur}, backend="numpy")
        assert got.shape == (4, 4)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        cur = nxt


def test_an_update_read_by_its_own_kernel_may_still_be_in_place() -> None:
    """late = p_new * p is the same kernel as p_new: each thread reads p[i] before it writes p[i]."""
    with at.Graph():
        x, p = at.input("x", (4, 3)), at.input("p", (4, 3))
        p_new = p - 0.5 * x
        late = p_new * p
    plan = wgpu_backend.compile(late.graph, [late.node_id, p_new.node_id])
    res = wgpu_backend.resident_training(plan)
    res.bind_updates({p: p_new})
    assert res.in_place == {(p_new.node_id, p.node_id)} and len(res.dispatches) == len(plan.dispatches) == 1
    X, P = _u((4, 3), 1), _u((4, 3), 2)
    cur = P
    for step in range(3):
        (got, _) = res.run({x: X.astype(np.float32)}, params={p: P.astype(np.float32)} if step == 0 else None)
        want, nxt = at.run([late, p_new], {x: X, p: cur}, backend="numpy")
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        cur = nxt


def test_a_large_chain_computes_four_elements_per_thread_and_its_tail() -> None:
    """From ``ELEMS_FROM`` elements on a chain's thread loads four elements (256 apart) before it
    computes any: a broadcast row, a value read in place, a stored intermediate and the last partial
    workgroup (270 900 elements is no multiple of 1024) must all come out as numpy's."""
    from asgteach.backends.wgpu_chain import ELEMS, ELEMS_FROM

    shape = (3, 300, 301)
    assert np.prod(shape) >= ELEMS_FROM and np.prod(shape) % (256 * ELEMS)
    with at.Graph():
        a, b = at.input("a", shape), at.input("b", shape)
        row = at.input("row", (301,))
        mid = at.tanh(a * row + 0.5)
        out = mid * b - at.exp(-a)
    feeds = {a: _u(shape, 1), b: _u(shape, 2), row: _u((301,), 3)}
    plan = _plan_and_check([out, mid], feeds, "a large chain, four elements per thread")
    (d,) = [d for d in plan.dispatches if d.entry == "fused"]
    assert "let i_3 = min(first + 768u, last);" in d.source and "st0[i_3]" in d.source


def test_a_large_elementwise_node_on_its_own_runs_as_a_chain_of_one() -> None:
    """GELU of 270 900 numbers read by two nodes (so nothing fuses it): it still gets the large-chain
    kernel, four elements per thread; a small one keeps the one-op kernel of elementwise.wgsl."""
    with at.Graph():
        big, small = at.input("big", (3, 300, 301)), at.input("small", (40, 7))
        outs = []
        for x in (big, small):
            y = at.gelu(x)
            outs += [at.sum(y * y), at.exp(y)]
    feeds = {big: _u(big.shape, 8), small: _u(small.shape, 9)}
    plan = _plan_and_check(outs, feeds, "gelu alone, large and small")
    entries = {d.node.shape: d.entry for d in plan.dispatches if d.node.op == "gelu"}
    assert entries == {(3, 300, 301): "fused", (40, 7): "main1"}, entries
