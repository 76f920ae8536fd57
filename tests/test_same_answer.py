"""The same answer on every backend, or the same clear error (issue 22).

A student who moves a working notebook from ``backend="numpy"`` to ``backend="wgpu"`` must get
the same numbers or the same error, never a different silent answer. Each test here runs on
both backends (the wgpu one for real, on lavapipe in CI).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from opcases import CASES

import asgteach as at

BACKENDS = ["numpy", pytest.param("wgpu", marks=pytest.mark.gpu)]   # wgpu: no adapter -> skipped loudly (CI: failed)


# --- a feed left out of a later run ---------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_feed_left_out_of_a_later_run_is_an_error_not_the_last_value(backend: str) -> None:
    with at.Graph():
        x = at.input("x", (2, 3))
        t = at.input("t", (2, 3))
        y = at.sum((x - t) ** 2)
    rng = np.random.default_rng(0)
    X, T = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32)
    first = at.run(y, {x: X, t: T}, backend=backend)
    np.testing.assert_allclose(first, np.sum((X - T) ** 2), rtol=1e-5)
    with pytest.raises(at.FeedError, match="missing feed for input 't'"):
        at.run(y, {x: X + 1}, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_trainer_batch_without_its_targets_is_an_error(backend: str) -> None:
    with at.Graph():
        x = at.input("x", (4, 3))
        t = at.input("t", (4, 2))
        net = at.nn.Linear(3, 2, name="lin")
        loss = at.mean((net(x) - t) ** 2)
        tr = at.Trainer(loss, optimizer=at.optim.SGD(lr=0.1), backend=backend)
    rng = np.random.default_rng(1)
    X, T = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((4, 2)).astype(np.float32)
    tr.train_step({x: X, t: T})
    before = tr.params
    with pytest.raises(at.FeedError, match="missing feed for input 't'"):
        tr.train_step({x: X})
    assert tr.step == 1
    for k, v in tr.params.items():   # the failed step changed nothing
        np.testing.assert_array_equal(v, before[k], err_msg=k)


# --- a read-only view of an array that changes ------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("as_params", [False, True])
def test_a_read_only_view_of_a_changing_array_gives_its_current_numbers(backend: str, as_params: bool) -> None:
    """``setflags(write=False)`` on a view does not freeze the memory under it: every backend computes with
    the numbers the array holds at the run, as numpy does."""
    with at.Graph():
        x = at.input("x", (3,))
        y = x * 2.0
    base = np.arange(3, dtype=np.float32)
    view = base[:]
    view.setflags(write=False)

    def run() -> np.ndarray:
        kw = {"params": {x: view}} if as_params else {"feeds": {x: view}}
        return at.compile([y], backend).run(**kw)[0]

    np.testing.assert_array_equal(run(), [0, 2, 4])
    base += 10   # the view sees it
    np.testing.assert_array_equal(run(), [20, 22, 24])


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_frozen_array_fed_again_gives_its_numbers(backend: str) -> None:
    """An array that owns its memory and is read-only cannot change: fed again it is the same numbers
    (and the GPU skips uploading it again)."""
    with at.Graph():
        x = at.input("x", (3,))
        y = x + 1.0
    frozen = np.arange(3, dtype=np.float32)
    frozen.setflags(write=False)
    plan = at.compile([y], backend)
    for _ in range(3):
        np.testing.assert_array_equal(plan.run({x: frozen})[0], [1, 2, 3])
    if backend == "wgpu":
        assert plan.stats["uploads"] == 0   # the third run uploaded nothing


def test_frozen_means_no_writable_array_under_it() -> None:
    from asgteach.backends.wgpu_backend import frozen

    owner = np.zeros(4)
    owner.setflags(write=False)
    assert frozen(owner)
    assert frozen(owner[1:])                 # a view of a frozen array
    writable = np.zeros(4)
    view = writable[1:]
    view.setflags(write=False)
    assert not frozen(view)                  # the array under it can change
    assert not frozen(np.zeros(4))
    assert frozen(np.frombuffer(b"\x00" * 16, dtype=np.float32))   # bytes never change


# --- threads -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_one_plan_run_from_several_threads_gives_every_thread_its_own_answer(backend: str) -> None:
    with at.Graph():
        x = at.input("x", (64, 32))
        w = at.constant(np.linspace(-1, 1, 32 * 16).reshape(32, 16).astype(np.float32))
        y = at.sum(at.tanh(x @ w), axis=1)
    rng = np.random.default_rng(2)
    batches = [rng.standard_normal((64, 32)).astype(np.float32) for _ in range(8)]
    want = [at.run(y, {x: b}, backend=backend) for b in batches]
    got: dict[int, list[np.ndarray]] = {}
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            got[k] = [at.run(y, {x: batches[(k + i) % 8]}, backend=backend) for i in range(12)]
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    for k, values in got.items():
        for i, v in enumerate(values):
            np.testing.assert_array_equal(v, want[(k + i) % 8], err_msg=f"thread {k}, run {i}")


# --- ids out of range, also after a reshape, a slice or a concat -----------------------------------------
def _lm_loss(V: int = 5):
    with at.Graph():
        tokens = at.input("tokens", (2, 4), dtype="int")
        targets = at.input("targets", (2, 4), dtype="int")
        emb = at.nn.Embedding(V, 3, name="emb")
        head = at.nn.Linear(3, V, name="head")
        logits = head(emb(tokens))
        loss = at.nn.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))   # the line the error names
    return tokens, targets, loss


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", [-100, 5])
def test_cross_entropy_targets_out_of_range_after_a_reshape(backend: str, bad: int) -> None:
    tokens, targets, loss = _lm_loss()
    T = np.array([[0, 1, 2, 3], [4, 0, bad, 1]])
    tr = at.Trainer(loss, optimizer=at.optim.AdamW(lr=1e-2), backend=backend)
    feeds = {tokens: np.array([[0, 1, 2, 3], [4, 0, 1, 2]]), targets: T}
    with pytest.raises(at.KernelError) as info:
        tr.train_step(feeds)
    msg = str(info.value)
    assert "the targets of cross_entropy" in msg and "ids must be in [0, V) with V = 5 classes" in msg, msg
    assert f"{bad} at index (1, 2) of 'targets'" in msg and "1 of 8 are not" in msg, msg
    assert "input 'targets' (2, 4)" in msg and "test_same_answer.py" in msg, msg
    assert "reshape" in msg and "embedding" not in msg, msg
    assert ("ignore_index" in msg) == (bad == -100), msg
    assert tr.step == 0
    tr.train_step({**feeds, targets: np.where(T == bad, 0, T)})   # the step after it trains as usual
    assert tr.step == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_embedding_ids_out_of_range_after_a_slice_and_a_concat(backend: str) -> None:
    with at.Graph():
        ids = at.input("ids", (2, 5), dtype="int")
        extra = at.constant(np.array([[1], [2]]))
        table = at.constant(np.arange(12.0).reshape(4, 3))
        picked = at.embedding(at.concat([ids[:, 1:], extra], axis=1), table)
        y = at.sum(picked)
    ok = np.array([[9, 0, 1, 2, 3], [-7, 3, 2, 1, 0]])   # the bad ids are sliced away: no error
    assert at.run(y, {ids: ok}, backend=backend) == at.run(y, {ids: ok}, backend="numpy")
    bad = ok.copy()
    bad[1, 2] = 4
    with pytest.raises(at.KernelError) as info:
        at.run(y, {ids: bad}, backend=backend)
    msg = str(info.value)
    assert msg.startswith("the ids of embedding 'embedding': ids must be in [0, V) with V = 4 rows in its table"), msg
    assert "4 at index (1, 1)" in msg and "input 'ids' (2, 5)" in msg and "a constant (2, 1)" in msg, msg


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_bad_id_stops_the_embedding_gradient_too_and_changes_nothing(backend: str) -> None:
    with at.Graph():
        ids = at.input("ids", (6,), dtype="int")
        emb = at.nn.Embedding(4, 2, name="emb")
        loss = at.sum(emb(ids.reshape(2, 3)) ** 2)
        tr = at.Trainer(loss, optimizer=at.optim.SGD(lr=0.1), backend=backend)
    tr.train_step({ids: np.array([0, 1, 2, 3, 0, 1])})
    before = tr.params["emb.weight"]
    with pytest.raises(at.KernelError, match=r"embedding .*: ids must be in \[0, V\).* 4 at index \(5,\) of 'ids'"):
        tr.train_step({ids: np.array([0, 1, 2, 3, 0, 4])})
    np.testing.assert_array_equal(tr.params["emb.weight"], before)


# --- NaN and inf in a feed: the same NaNs on the GPU as on numpy, and the same report ------------------
@pytest.mark.gpu
@pytest.mark.parametrize("special", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
def test_every_op_puts_nan_and_inf_where_numpy_does(special: float) -> None:
    """Every op's case (tests/opcases.py), with one element of one float feed at a time set to NaN or +-inf:
    the GPU's output has NaN and inf (with its sign) exactly where numpy's has them, or both raise the same
    error. WGSL lets a compiler assume no NaN exists (naga + lavapipe fold ``x != x`` to false): the kernels
    judge NaN on the bits (``is_nan`` in common.wgsl), and a convolution's padded taps count 0 * inf as NaN."""
    differ = []
    for c in CASES:
        b = c.build()
        for key, val in b.feeds.items():
            if np.asarray(val).dtype.kind != "f" or np.size(val) == 0:
                continue
            v = np.array(val, dtype=np.float32, copy=True)
            v.flat[v.size // 2] = special
            feeds = {k: (np.asarray(x, np.float32) if np.asarray(x).dtype.kind == "f" else x)
                     for k, x in {**b.feeds, key: v}.items()}
            got, want = [], []
            for backend, out in (("numpy", want), ("wgpu", got)):
                try:
                    out.append(at.run([b.y], feeds, backend=backend, on_nan="ignore")[0])
                except Exception as e:  # noqa: BLE001 - the same error on both is what is checked
                    out.append(type(e).__name__)
            w, g = want[0], got[0]
            if isinstance(w, str) or isinstance(g, str):
                if not (isinstance(w, str) and isinstance(g, str) and w == g):
                    differ.append((c.id, key, *(v if isinstance(v, str) else "values" for v in (w, g))))
            elif w.dtype.kind != "f":
                if not np.array_equal(w, g):
                    differ.append((c.id, key, w.tolist(), g.tolist()))
            elif not (np.array_equal(np.isnan(w), np.isnan(g)) and np.array_equal(np.isposinf(w), np.isposinf(g))
                      and np.array_equal(np.isneginf(w), np.isneginf(g))):
                differ.append((c.id, key, f"numpy NaN at {np.argwhere(np.isnan(w)).tolist()}",
                               f"wgpu NaN at {np.argwhere(np.isnan(g)).tolist()}"))
    assert not differ, differ


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["relu", "max", "maximum", "max_pool2d", "sign"])
def test_nan_in_a_feed_is_reported_as_the_feed(backend: str, op: str) -> None:
    """relu, max, maximum and max_pool2d turned a NaN into a number on the GPU, so no NaN reached the output
    and nothing was said; numpy reports the feed."""
    with at.Graph():
        x = at.input("x", (1, 1, 2, 2))
        y = {"relu": lambda: at.relu(x), "max": lambda: at.max(x), "maximum": lambda: at.maximum(x, 0.5),
             "max_pool2d": lambda: at.max_pool2d(x, 2), "sign": lambda: at.sign(x)}[op]()
    X = np.array([[[[1.0, np.nan], [-2.0, 0.5]]]], np.float32)
    with pytest.raises(at.NumericsError, match=r"the feed for input 'x' contains NaN \(1 of 4 values, first at "
                                               r"index \(0, 0, 0, 1\)\)"):
        at.run(y, {x: X}, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_inf_in_a_feed_that_makes_a_nan_is_explained_alike(backend: str) -> None:
    with at.Graph():
        x = at.input("x", (3,))
        y = at.relu(x) - x    # inf - inf
    with pytest.raises(at.NumericsError, match=r"NaN first appears in sub (?s:.*)1 of 3 values are NaN"):
        at.run(y, {x: np.array([1.0, np.inf, -1.0], np.float32)}, backend=backend)


# --- a NaN batch does not poison a Trainer -------------------------------------------------------------
def _mlp_trainer(backend: str, rows: int = 8, optimizer=None):
    with at.Graph():
        x = at.input("x", (rows, 16))
        t = at.input("t", (rows, 4))
        net = at.nn.MLP([16, 32, 4], activation="relu", name="mlp")
        loss = at.mean((net(x) - t) ** 2)
        tr = at.Trainer(loss, optimizer=optimizer or at.optim.AdamW(lr=1e-2), backend=backend, seed=3)
    rng = np.random.default_rng(5)
    X, T = rng.standard_normal((rows, 16)).astype(np.float32), rng.standard_normal((rows, 4)).astype(np.float32)
    return tr, x, t, X, T


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("rows", [8, 600])   # 600 rows: the bias gradients are split sums (partials on the GPU)
def test_a_nan_batch_changes_nothing_and_training_goes_on_as_if_it_never_came(backend: str, rows: int) -> None:
    tr, x, t, X, T = _mlp_trainer(backend, rows)
    clean, cx, ct, _, _ = _mlp_trainer(backend, rows)
    assert tr.train_step({x: X, t: T}) == clean.train_step({cx: X, ct: T})
    before = {k: v.copy() for k, v in tr.held_values().items()}   # parameters and optimizer state
    bad = X.copy()
    bad[rows // 2, 3] = np.nan
    with pytest.raises(at.NumericsError) as info:
        tr.train_step({x: bad, t: T})
    msg = str(info.value)
    assert msg.startswith(f"the feed for input 'x' contains NaN (1 of {rows * 16} values, first at index "
                          f"({rows // 2}, 3))"), msg
    assert "this training step was not applied" in msg, msg
    assert tr.step == 1 and len(tr.history) == 1
    after = tr.held_values()
    for k, v in before.items():
        np.testing.assert_array_equal(after[k], v, err_msg=tr.graph.nodes[k].name)
    rest = [tr.train_step({x: X + 0.1 * i, t: T}) for i in range(3)]
    want = [clean.train_step({cx: X + 0.1 * i, ct: T}) for i in range(3)]
    if backend == "numpy":
        assert rest == want
    else:
        np.testing.assert_allclose(rest, want, rtol=1e-6)
    if backend == "wgpu":
        assert tr.plan.stats["host_syncs"] == 1   # the gate's flag came back with the loss


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_infinite_gradient_with_a_finite_loss_is_refused_naming_its_node(backend: str) -> None:
    """sqrt at 0 is finite, its slope is not: the loss is fine and the gradient is inf. The step is refused on
    both backends with the same message, which names the backward node where the inf started."""
    with at.Graph():
        x = at.input("x", (4,))
        w = at.parameter("w", (4,))
        loss = at.sum(at.sqrt(x * w))
        tr = at.Trainer(loss, optimizer=at.optim.SGD(lr=0.1), backend=backend, initial={"w": np.ones(4)})
    tr.train_step({x: np.array([1.0, 2.0, 3.0, 4.0], np.float32)})
    before = tr.params["w"]
    with pytest.raises(at.NumericsError) as info:
        tr.train_step({x: np.array([1.0, 0.0, 3.0, 4.0], np.float32)})
    msg = str(info.value)
    assert msg.startswith("inf first appears in div (node #") and "backward pass" in msg, msg
    assert "this training step was not applied" in msg
    np.testing.assert_array_equal(tr.params["w"], before)
    assert tr.step == 1


@pytest.mark.gpu
def test_a_gpu_plan_copies_an_update_only_when_the_run_was_finite() -> None:
    """An update that is not written in place (another output reads the new value) is copied by a kernel
    that the gate turns off too; with on_nan="ignore" the skip is silent but counted."""
    from asgteach.backends import wgpu_backend

    with at.Graph() as g:
        x = at.input("x", (3,))
        p = at.parameter("p", (3,))
        new = p - 0.5 * x
        total = at.sum(new)
    plan = wgpu_backend.compile(g, [total.node_id, new.node_id])
    res = wgpu_backend.resident_training(plan)
    res.bind_updates({p: new})
    assert res.gate is not None and res.gate.copies == [(new.node_id, p.node_id)]
    one = np.ones(3, np.float32)
    assert res.run({x: one, p: np.zeros(3, np.float32)})[0] == -1.5
    np.testing.assert_array_equal(res.read_params()["p"], [-0.5] * 3)
    out = res.run({x: np.array([1.0, np.inf, 1.0], np.float32)}, on_nan="ignore")
    assert res.updates_skipped and plan.stats["updates_skipped"] == 1 and np.isinf(out[0])
    np.testing.assert_array_equal(res.read_params()["p"], [-0.5] * 3)
    with pytest.raises(at.NumericsError, match="the feed for input 'x' contains NaN (?s:.*)updates were not applied"):
        res.run({x: np.array([np.nan, 1.0, 1.0], np.float32)})
    np.testing.assert_array_equal(res.read_params()["p"], [-0.5] * 3)
    assert res.run({x: one})[0] == -3.0 and not res.updates_skipped
    np.testing.assert_array_equal(res.read_params()["p"], [-1.0] * 3)


def test_the_gate_checks_a_gradient_made_after_the_first_update_through_what_it_is_made_from() -> None:
    """A split sum's last stage may run between two updates (wgpu_batch lets it wait until just before the update
    that reads it): the check before the first update cannot see its result yet, so it looks at its partial sums."""
    from asgteach.backends.wgpu_gate import plan_gate
    from asgteach.backends.wgpu_kernels import Dispatch

    with at.Graph() as g:
        ids = [at.input(f"v{k}", (4,)).node_id for k in range(8)]
    loss, partials, bias_grad, w_grad, p, q, p_new, q_new = ids

    def d(node: int, binds: dict, batch: str | None = None, stores: tuple = ()) -> Dispatch:
        return Dispatch(node=g.nodes[node], key=("k",), source="", entry="e", params=np.zeros(64, np.uint32),
                        binds=binds, groups=(1, 1, 1), stores=stores, batch=batch)

    dispatches = [
        d(loss, {1: loss}),                                   # 0: the loss
        d(w_grad, {1: w_grad, 2: loss}),                      # 1: a weight gradient
        d(p, {1: p, 2: w_grad}, batch="chain"),               # 2: p's update, in place
        d(bias_grad, {1: partials, 2: bias_grad}, batch="partials"),   # 3: a bias gradient's last stage
        d(q, {1: q, 2: bias_grad}, batch="chain"),            # 4: q's update, in place
    ]
    updates = [(p_new, p), (q_new, q)]   # written in place: the chains' binding 1 is the parameter itself
    gate = plan_gate(g, dispatches, [[0], [1], [2], [3], [4]], updates, set(updates), [loss, p_new, q_new],
                     {p_new, q_new}, lambda dd, n: 16)
    assert gate is not None and gate.at == 2 and gate.gated == [2, 4] and gate.copies == []
    assert sorted(n for n, _ in gate.checked) == sorted([w_grad, partials, loss])


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_feed_for_a_parameter_the_trainer_holds_is_an_error_not_ignored(backend: str) -> None:
    tr, x, t, X, T = _mlp_trainer(backend)
    w = tr.param_tensors[0]
    with pytest.raises(at.FeedError, match=f"parameter '{w.name}' is held by this Trainer"):
        tr.train_step({x: X, t: T, w: np.zeros(w.shape, np.float32)})
    with pytest.raises(at.FeedError, match="initial="):
        tr.run([tr.loss], {x: X, t: T, w.name: np.zeros(w.shape, np.float32)})
    assert tr.step == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_refused_step_does_not_move_the_dropout_masks_on(backend: str) -> None:
    """The step after a refused one draws the dropout masks the refused one would have drawn, so a run with a
    NaN batch in it goes on exactly like a run without it."""
    def make():
        with at.Graph():
            x = at.input("x", (8, 6))
            h = at.nn.Dropout(0.5)(at.tanh(at.nn.Linear(6, 5, name="a")(x)))
            loss = at.mean(at.nn.Linear(5, 1, name="b")(h) ** 2)
            return at.Trainer(loss, optimizer=at.optim.SGD(lr=0.1), backend=backend, seed=4), x

    (tr, x), (clean, cx) = make(), make()
    X = np.random.default_rng(1).standard_normal((8, 6)).astype(np.float32)
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(at.NumericsError):
        tr.train_step({x: bad})
    got = [tr.train_step({x: X}) for _ in range(3)]
    want = [clean.train_step({cx: X}) for _ in range(3)]
    np.testing.assert_allclose(got, want, rtol=1e-6)
