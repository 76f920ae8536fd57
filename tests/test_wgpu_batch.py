"""Neighbouring fused chains of one kernel launched as ONE dispatch (``wgpu_batch``).

An optimizer's update is the same chain for every parameter; the plan records those chains as
slots of one batched kernel. Checked here: the batch computes what the chains compute alone (and
what numpy computes), each slot with its own sizes, constants and buffers; a run is cut where one
chain writes a buffer another reads, and where the device's binding limit is reached; the
inspector says which kernel a node runs in."""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at
from asgteach.backends import wgpu_backend
from asgteach.backends.wgpu_batch import MAX_SLOTS, plan_launches
from asgteach.backends.wgpu_kernels import Dispatch

from wgpu_helpers import run_both


def _batches(plan) -> list:
    return [la for la in plan.launches if la.count > 1]


@pytest.mark.gpu
def test_chains_of_one_structure_with_their_own_sizes_and_constants_run_as_one_launch() -> None:
    """Five chains ``a * c1 + c2`` (c1, c2 differ per chain; sizes 1 .. 70 000; one reads a broadcast row)."""
    rng = np.random.default_rng(0)
    shapes = [(1,), (1000,), (300, 7), (70_000,), (5, 3)]
    with at.Graph() as g:
        xs = [at.input(f"x{k}", s) for k, s in enumerate(shapes)]
        row = at.input("row", (3,))
        ys = [at.tanh(x * (k + 2.0) + (0.5 - k)) for k, x in enumerate(xs[:-1])]
        ys.append(at.tanh(xs[-1] * 6.0 + row))   # another structure: a broadcast input
    feeds = {x: rng.standard_normal(s) for x, s in zip(xs, shapes)} | {row: rng.standard_normal(3)}
    plan = wgpu_backend.compile(g, [y.node_id for y in ys])
    batches = _batches(plan)
    assert [la.count for la in batches] == [4], [la.members for la in plan.launches]
    assert len(plan.launches) == len(plan.dispatches) - 3
    run_both(ys, feeds, "four chains in one batch, one alone")
    plan.run(feeds)
    assert plan.stats["dispatches"] == len(plan.launches) == 2
    note = plan.shader_for(ys[1])
    assert "launched in a batch: ONE dispatch runs this kernel's code for 4 chains" in note, note[:400]


def test_a_chain_that_reads_what_its_neighbour_wrote_is_not_in_its_batch() -> None:
    """The memory plan may put a later chain's output where an earlier one's input was: that cuts the run."""
    calls = []

    def fake(nid: int, writes: int, reads: tuple[int, ...], kernel: str = "mul+add:x", chain: bool = True
             ) -> Dispatch:
        class N:
            id = nid
        d = Dispatch(N(), ("fused", "f32", kernel), "", "fused", np.zeros(64, np.uint32),
                     {1: writes, **{2 + k: r for k, r in enumerate(reads)}}, (1, 1, 1),
                     parts={"BODY": kernel} if chain else None, batch="chain" if chain else None)
        calls.append(d)
        return d

    ds = [fake(10, 100, (200,)), fake(11, 101, (201,)), fake(12, 102, (101,)),   # reads what #11 wrote
          fake(13, 101, (202,)), fake(14, 103, (203,))]                          # writes what #12 read
    with pytest.MonkeyPatch.context() as mp:   # (the batched kernel's text is not what this test is about)
        mp.setattr("asgteach.backends.wgpu_batch.batched_dispatch", lambda members, align: members[0])
        runs = [la.members for la in plan_launches(ds, lambda n: n, 64, 256)]
        assert runs == [(0, 1), (2,), (3, 4)]
        limited = [la.members for la in plan_launches(ds[:2] + ds[3:], lambda n: n, 3, 256)]
        assert limited == [(0,), (1,), (2,), (3,)], "two chains of 2 bindings do not fit in 3"
        # two kernels alternating (weights' and biases' updates) form two batches; a dispatch that reads what
        # a member wrote closes that batch before itself, and the other batch goes on past it
        mixed = [fake(30, 500, (600,)), fake(31, 501, (601,), "other"), fake(32, 502, (602,)),
                 fake(33, 700, (500,), "matmul", chain=False), fake(34, 503, (603,), "other"),
                 fake(35, 504, (604,))]
        assert [la.members for la in plan_launches(mixed, lambda n: n, 64, 256)] == [(0, 2), (3,), (1, 4), (5,)]
        many = [fake(20 + k, 300 + k, (400 + k,)) for k in range(MAX_SLOTS + 3)]
        assert [la.count for la in plan_launches(many, lambda n: n, 1000, 256)] == [MAX_SLOTS, 3]


@pytest.mark.gpu
def test_adamw_updates_run_batched_in_place_and_match_numpy_over_steps() -> None:
    """A Trainer's AdamW: every parameter's update chain writes p, m and v in place, in batches."""
    results = {}
    for backend in ("numpy", "wgpu"):
        with at.Graph():
            x = at.input("x", (8, 16))
            target = at.input("t", (8, 4))
            net = at.nn.MLP([16, 32, 24, 4], activation="tanh", name="mlp")
            err = net(x) - target
            loss = at.mean(err * err)
            tr = at.Trainer(loss, optimizer=at.optim.AdamW(lr=1e-2), backend=backend, seed=3)
        rng = np.random.default_rng(5)
        feeds = {x: rng.standard_normal((8, 16)).astype(np.float32),
                 target: rng.standard_normal((8, 4)).astype(np.float32)}
        losses = [tr.train_step(feeds) for _ in range(5)]
        results[backend] = (losses, {k: np.asarray(v) for k, v in tr.params.items()}, tr)
    plan = results["wgpu"][2].plan
    resident = results["wgpu"][2].resident          # (the layer that runs the Trainer's steps: wgpu_resident)
    batches = _batches(resident)
    assert batches and sum(la.count for la in batches) >= 6, [la.members for la in resident.launches]
    assert all(la.dispatch.entry == "fused_batch" for la in batches)
    # (the gate adds its check and its arguments: two launches)
    assert plan.stats["dispatches"] - plan.stats["gate_dispatches"] == len(resident.launches) < len(plan.dispatches)
    assert plan.stats["gate_dispatches"] == 2
    np.testing.assert_allclose(results["wgpu"][0], results["numpy"][0], rtol=2e-4, atol=1e-6)
    for k, v in results["numpy"][1].items():
        np.testing.assert_allclose(results["wgpu"][1][k], v, rtol=2e-4, atol=2e-5, err_msg=k)
    # a second Trainer on the same plan structure batches the same way, and a re-bound plan re-batches
    resident.bind_updates({})
    assert _batches(resident) and _batches(plan)


@pytest.mark.gpu
def test_a_large_update_alone_writes_in_place_four_elements_per_thread() -> None:
    """One big weight (300 000 numbers) and no bias: its AdamW chain runs alone, on the large-chain
    kernel (four elements per thread), reading p, m and v from the buffers it writes."""
    results = {}
    for backend in ("numpy", "wgpu"):
        with at.Graph():
            x = at.input("x", (16, 600))
            w = at.parameter("w", (600, 500))
            loss = at.mean(at.tanh(x @ w) ** 2)
            tr = at.Trainer(loss, optimizer=at.optim.AdamW(lr=1e-2), backend=backend, seed=1)
        feeds = {x: np.random.default_rng(2).standard_normal((16, 600)).astype(np.float32)}
        results[backend] = ([tr.train_step(feeds) for _ in range(3)], np.asarray(tr.params["w"]), tr)
    res = results["wgpu"][2].resident   # (the Trainer's layer over the plan runs the in-place update kernels)
    update = [d for d in res.dispatches if d.entry == "fused" and d.node.size == 300_000]
    assert len(update) == 1 and "let i_3 = min(first + 768u, last);" in update[0].source
    assert "(written into node" in res.shader_for(update[0].node.id)
    np.testing.assert_allclose(results["wgpu"][0], results["numpy"][0], rtol=2e-4, atol=1e-6)
    # Adam moves an element whose gradient is almost 0 by lr * m / (sqrt(v) + eps), where float32's rounding
    # of that tiny g matters: 22 of the 300 000 differ by up to 2e-4 (lr is 1e-2), one element per thread too
    np.testing.assert_allclose(results["wgpu"][1], results["numpy"][1], rtol=2e-4, atol=5e-4)
    assert np.mean(np.abs(results["wgpu"][1] - results["numpy"][1]) > 2e-5) < 1e-3


@pytest.mark.gpu
def test_split_sums_last_stages_wait_and_run_as_one_launch() -> None:
    """Bias-like gradients (long sums over leading axes: two stages) read only at the end: their second
    stages run together in ONE sum_batch launch, and every sum is still numpy's."""
    rng = np.random.default_rng(4)
    with at.Graph() as g:
        xs = [at.input(f"x{k}", (300, n)) for k, n in enumerate((64, 7, 130))]
        sums = [at.sum_to(at.tanh(x), (x.shape[1],)) for x in xs]
        means = [at.mean(at.exp(-x * x), axis=0) for x in xs]   # (a mean's second stage divides: not batched)
        total = sum(at.sum(s_ * s_) for s_ in sums)
    feeds = {x: rng.standard_normal(x.shape) for x in xs}
    outs = [total, *sums[:1], *means]
    plan = wgpu_backend.compile(g, [o.node_id for o in outs])
    batches = _batches(plan)
    assert [la.dispatch.entry for la in batches] == ["sum_batch"] and batches[0].count == 3, \
        [(d.entry, d.batch) for d in plan.dispatches]
    assert "the last stage of this sum" in plan.shader_for(sums[1])
    run_both(outs, feeds, "split sums with their last stages batched")


@pytest.mark.gpu
def test_a_second_trainer_of_the_same_shapes_reuses_the_launches() -> None:
    """The batching is pure work on the lowered plan: a second plan of the same structure takes it as it is,
    and binds its own buffers."""
    from asgteach.backends import wgpu_plan_cache

    wgpu_plan_cache.clear()
    plans, losses = [], []
    for _ in range(2):
        with at.Graph():
            x = at.input("x", (8, 16))
            net = at.nn.MLP([16, 32, 4], activation="tanh", name="mlp")
            loss = at.mean(net(x) ** 2)
            tr = at.Trainer(loss, optimizer=at.optim.AdamW(lr=1e-2), backend="wgpu", seed=3)
        feeds = {x: np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32)}
        losses.append([tr.train_step(feeds) for _ in range(3)])
        plans.append(tr.resident)   # (what the Trainer's steps record: the layer over its plan)
    assert plans[1].launches is plans[0].launches and _batches(plans[1])
    np.testing.assert_array_equal(losses[0], losses[1])
