"""The wgpu Plan's contract: one submit and one host sync per run, parameters kept on the
device, float64 warning, binding-limit and feed errors that name the node, NaN
explanations, adapter selection and the fallback to numpy."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import asgteach as at
from asgteach.backends import BackendUnavailable, FeedError, KernelError, NumericsError, wgpu_backend


def _mlp():
    with at.Graph() as g:
        x = at.input("x", (5, 3))
        w = at.parameter("w", (3, 4))
        b = at.parameter("b", (4,))
        loss = at.mean(at.tanh(x @ w + b) ** 2)
        gw, gb = at.grad(loss, [w, b])
        new_w, new_b = w - 0.1 * gw, b - 0.1 * gb
    return g, x, w, b, loss, new_w, new_b


def _arrays(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32),
            rng.standard_normal(4).astype(np.float32))


@pytest.mark.gpu
def test_one_submit_and_one_sync_per_run() -> None:
    g, x, w, b, loss, new_w, new_b = _mlp()
    X, W, B = _arrays()
    plan = wgpu_backend.compile(g, [loss.node_id, new_w.node_id, new_b.node_id])
    for _ in range(3):
        plan.run({x: X}, params={w: W, b: B})
        assert plan.stats["submits"] == 1
        assert plan.stats["host_syncs"] == 1
    assert plan.totals["submits"] == plan.totals["runs"] == 3


@pytest.mark.gpu
def test_unchanged_params_are_not_uploaded_again_and_changed_ones_are() -> None:
    g, x, w, b, loss, *_ = _mlp()
    X, W, B = _arrays()
    plan = wgpu_backend.compile(g, [loss.node_id])
    first = plan.run({x: X}, params={w: W, b: B})[0]
    assert plan.stats["uploads"] >= 3
    plan.run({x: X}, params={w: W, b: B})
    assert plan.stats["uploads"] == 0, "same objects, unchanged: nothing should travel to the GPU"
    W *= 2.0   # in place: same object, new values -> must be uploaded
    second = plan.run({x: X}, params={w: W, b: B})[0]
    assert plan.stats["uploads"] == 1
    ref = at.run(loss, {x: X, w: W, b: B}, backend="numpy")
    np.testing.assert_allclose(second, ref, rtol=1e-5)
    assert not np.isclose(first, second)


@pytest.mark.gpu
def test_bound_updates_train_on_device_like_numpy() -> None:
    g, x, w, b, loss, new_w, new_b = _mlp()
    X, W, B = _arrays(1)
    plan = wgpu_backend.compile(g, [loss.node_id, new_w.node_id, new_b.node_id])
    resident = wgpu_backend.resident_training(plan)
    resident.bind_updates({w: new_w, b: new_b})
    losses = [resident.run({x: X}, params={w: W, b: B})]
    for _ in range(4):
        losses.append(resident.run({x: X}))
        assert plan.stats["uploads"] == 0 and plan.stats["submits"] == 1 and plan.stats["host_syncs"] == 1
    assert all(out[1] is None and out[2] is None for out in losses), "bound outputs stay on the device"
    cur = {w: W.astype(np.float64), b: B.astype(np.float64)}
    for out in losses:
        lo, nw, nb = at.run([loss, new_w, new_b], {x: X.astype(np.float64), **cur}, backend="numpy")
        np.testing.assert_allclose(out[0], lo, rtol=1e-5)
        cur = {w: nw, b: nb}
    held = resident.read_params()
    np.testing.assert_allclose(held["w"], cur[w], rtol=1e-5, atol=1e-6)
    # the plan underneath is as compiled: its own run reads every output back and writes no update (the
    # parameter's buffer holds what this run was fed)
    out = plan.run({x: X}, params={w: W, b: B})
    assert all(o is not None for o in out)
    want = at.run([loss, new_w], {x: X.astype(np.float64), w: W, b: B}, backend="numpy")
    np.testing.assert_allclose(out[1], want[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(resident.read_params()["w"], W, rtol=0, atol=0)


@pytest.mark.gpu
def test_float64_feeds_warn_once_and_give_float32() -> None:
    with at.Graph():
        x = at.input("x", (3,))
        y = at.exp(x)
    wgpu_backend.warn_float64_again()
    with pytest.warns(UserWarning, match="float32"):
        out = at.run(y, {x: np.ones(3)}, backend="wgpu")
    assert out.dtype == np.float32
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        at.run(y, {x: np.zeros(3)}, backend="wgpu")


@pytest.mark.gpu
def test_buffer_over_the_binding_limit_names_the_node() -> None:
    with at.Graph() as g:
        x = at.input("x", (40, 1))
        y = at.relu(x @ at.constant(np.ones((1, 40)), name="row"))   # (40, 40): 6400 bytes
    with pytest.raises(wgpu_backend.BindingLimitError, match=r"matmul \(node #\d+ 'matmul', shape \(40, 40\)\) "
                                                           r"needs 6400 bytes") as e:
        wgpu_backend.compile(g, [y.node_id], max_binding=1000)
    assert "backend='numpy'" in str(e.value)


@pytest.mark.gpu
def test_missing_feed_and_bad_ids_name_the_node() -> None:
    with at.Graph():
        ids = at.input("ids", (3,), dtype="int")
        table = at.input("table", (4, 2))
        y = at.embedding(ids, table)
    with pytest.raises(FeedError, match="missing feed for input 'table'"):
        at.run(y, {ids: np.array([0, 1, 2])}, backend="wgpu")
    with pytest.raises(KernelError, match=r"embedding .*ids must be in \[0, V\) with V = 4"):
        at.run(y, {ids: np.array([0, 4, 1]), table: np.ones((4, 2), np.float32)}, backend="wgpu")


@pytest.mark.gpu
def test_int_outputs_come_back_as_int64() -> None:
    with at.Graph():
        x = at.input("x", (3, 5))
        i = at.argmax(x, axis=1)
    X = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    out = at.run(i, {x: X}, backend="wgpu")
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, np.argmax(X, axis=1))


@pytest.mark.gpu
def test_nan_is_explained_by_the_numpy_rerun() -> None:
    with at.Graph():
        x = at.input("x", (3,))
        y = at.log(x - 2.0) * 3.0
    with pytest.raises(NumericsError, match=r"NaN first appears in log[\s\S]*numpy backend"):
        at.run(y, {x: np.ones(3, np.float32)}, backend="wgpu")
    out = at.run(y, {x: np.ones(3, np.float32)}, backend="wgpu", on_nan="ignore")
    assert np.isnan(out).all()


@pytest.mark.gpu
def test_shader_for_returns_the_wgsl_of_a_node() -> None:
    with at.Graph() as g:
        x = at.input("x", (2, 3))
        y = at.softmax(x @ at.constant(np.ones((3, 3))), axis=0)
    plan = at.backends.compile([y], backend="wgpu")
    src = plan.shader_for(y)
    assert "fn softmax_wg" in src and "@compute" in src
    assert "fn matmul" in plan.shader_for(y.node.inputs[0])
    with pytest.raises(KeyError, match="runs no kernel"):
        plan.shader_for(x)
    assert g is y.graph


@pytest.mark.gpu
def test_describe_reports_the_adapter() -> None:
    info = at.backends.describe()["wgpu"]
    assert info["available"] and info["backend_type"] == "Vulkan"
    assert info["cpu_adapter"] == (info["device_type"] == "CPU")
    assert info["limits"]["max-storage-buffer-binding-size"] > 0


def test_no_matching_adapter_says_how_to_get_one_and_auto_falls_back(monkeypatch) -> None:
    monkeypatch.setenv("ASGTEACH_WGPU_ADAPTER", "no-such-adapter-anywhere")
    with pytest.raises(BackendUnavailable, match="mesa-vulkan-drivers"):
        at.backends.get_backend("wgpu")
    assert at.backends.available() == ["numpy"]
    assert at.backends.describe()["wgpu"]["available"] is False
    with at.Graph():
        x = at.input("x", (2,))
        y = x * 2.0
    out = at.run(y, {x: np.array([1.0, 2.0])}, backend="auto")
    assert out.dtype == np.float64   # numpy ran it: the GPU would have given float32
    np.testing.assert_array_equal(out, [2.0, 4.0])


@pytest.mark.gpu
def test_plan_rewrites_reshapes_transposes_and_batched_weight_gradients() -> None:
    """reshape shares its input's buffer, x^T is read in place, sum_to(x^T @ g) is one GEMM; same numbers."""
    rng = np.random.default_rng(0)
    with at.Graph():
        x, w = at.input("x", (2, 8, 4)), at.parameter("w", (4, 6))
        h = at.tanh(x @ w).reshape(16, 6)
        loss = at.sum(h * h)
        gx, gw = at.grad(loss, [x, w])
    plan = at.backends.compile([loss, gx, gw], backend="wgpu")
    g = plan.graph
    ops = {n.op for n in g.nodes}
    assert {"transpose", "reshape", "sum_to"} <= ops
    kinds = [g.nodes[i].op for i in plan.fusion.skip]
    assert "reshape" in kinds and "transpose" in kinds and "matmul" in kinds
    (s,) = plan.fusion.gemm_sum
    assert g.nodes[s].op == "sum_to" and ":TN" in [d.key[2][-3:] for d in plan.dispatches if d.node.id == s][0]
    assert all(d.node.id not in plan.fusion.skip for d in plan.dispatches)
    skipped_t = next(i for i in plan.fusion.skip if g.nodes[i].op == "transpose")
    assert "runs no kernel of its own" in plan.shader_for(skipped_t) and "fn matmul" in plan.shader_for(skipped_t)
    X, W = rng.standard_normal((2, 8, 4)), rng.standard_normal((4, 6))
    want = at.run([loss, gx, gw], {x: X, w: W}, backend="numpy")
    got = plan.run({x: X.astype(np.float32), w: W.astype(np.float32)})
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5 * max(1.0, np.abs(b).max()))


@pytest.mark.gpu
def test_commands_recorded_ahead_follow_new_feeds_and_a_later_bind_updates() -> None:
    """run() records the next run's commands early: new feeds, and a resident layer's updates, still take effect."""
    g, x, w, b, loss, new_w, new_b = _mlp()
    X, W, B = _arrays(2)
    plan = wgpu_backend.compile(g, [loss.node_id, new_w.node_id, new_b.node_id])
    plan.run({x: X}, params={w: W, b: B})
    X2 = X * -0.5
    out = plan.run({x: X2}, params={w: W, b: B})   # commands recorded by the first run, new x uploaded
    want = at.run([loss, new_w, new_b], {x: X2, w: W, b: B}, backend="numpy")
    for o, r in zip(out, want):
        np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-6)
    resident = wgpu_backend.resident_training(plan)
    resident.bind_updates({w: new_w, b: new_b})   # its runs copy the updates at the end
    first = resident.run({x: X2}, params={w: W, b: B})
    assert first[1] is None
    second = resident.run({x: X2})
    nw, nb = want[1], want[2]
    lo2 = at.run(loss, {x: X2, w: nw, b: nb}, backend="numpy")
    np.testing.assert_allclose(first[0], want[0], rtol=1e-5)
    np.testing.assert_allclose(second[0], lo2, rtol=1e-5)


def test_numpy_plans_say_they_keep_no_training_state_on_a_device() -> None:
    """The Trainer asks every backend through one Protocol (common.ResidentTraining); numpy answers None."""
    g, x, w, b, loss, new_w, new_b = _mlp()
    for backend in ("numpy", "reference"):
        plan = at.compile([loss], backend=backend)
        assert at.backends.resident_training(plan) is None
    tr = at.Trainer(loss, optimizer=at.optim.SGD(lr=0.1), seed=0)
    assert tr.resident is None


@pytest.mark.gpu
def test_a_wgpu_plan_gets_its_training_layer_through_the_protocol_and_is_not_changed_by_it() -> None:
    from asgteach.backends.common import ResidentTraining

    g, x, w, b, loss, new_w, new_b = _mlp()
    plan = wgpu_backend.compile(g, [loss.node_id, new_w.node_id, new_b.node_id])
    before = (list(plan.dispatches), [s for s in plan.encoded], str(plan.passes))
    res = at.backends.resident_training(plan)
    assert isinstance(res, ResidentTraining) and res.plan is plan
    res.bind_updates({w: new_w, b: new_b})
    assert (list(plan.dispatches), [s for s in plan.encoded], str(plan.passes)) == before
    assert not hasattr(plan, "bind_updates") and not hasattr(plan, "read_params")
