"""One numpy plan run from several threads at once gives every thread its own right answer (issue 22).

``at.run`` caches one plan per outputs, so two threads (a notebook's background training and a
widget, two requests of a web app) that run the same outputs share one Plan. Its runs share the
caches a first run fills (constants per precision, the short feed path's keys); ``Plan.run``
takes a lock, so runs of one plan take turns. The lock is re-entrant: a run may start another
run of the same plan on its own thread (a kernel that calls back into the plan).
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import asgteach as at
from asgteach.backends import numpy_backend
from asgteach.ops import OpSpec, apply, registered

THREADS = 8
RUNS = 40


def _model() -> tuple[at.Graph, at.Tensor, at.Tensor, at.Tensor, list[at.Tensor]]:
    """A one-layer net's loss and gradients: in-place writes, a folded seed, constants."""
    with at.Graph() as g:
        x = at.input("x", (16, 5))
        t = at.input("t", (16, 3))
        w = at.parameter("w", (5, 3))
        h = at.tanh(x @ w + at.constant(np.linspace(-0.5, 0.5, 3)))
        loss = at.mean((at.log(h + 2.0) - t) ** 2)
        dw, dx = at.grad(loss, [w, x])
    return g, x, t, w, [loss, dw, dx]


def _feeds(k: int, x: at.Tensor, t: at.Tensor, w: at.Tensor) -> tuple[dict, dict]:
    """Thread k's own feeds: its own numbers, float32 or float64, keyed by Tensor or by name."""
    rng = np.random.default_rng(k)
    dtype = np.float32 if k % 2 else np.float64
    X, T, W = (rng.standard_normal(s).astype(dtype) for s in ((16, 5), (16, 3), (5, 3)))
    if k == THREADS - 1:   # this thread's runs find a NaN: the step-by-step search runs under the lock too
        X[0, 0] = np.nan
    feeds = {x: X, t: T} if k % 3 else {"x": X, "t": T}
    return feeds, ({w: W} if k % 4 < 2 else {"w": W})


def test_one_plan_from_eight_threads_gives_each_its_own_answer() -> None:
    g, x, t, w, outs = _model()
    plan = numpy_backend.compile(g, [o.node_id for o in outs])
    alone = numpy_backend.compile(g, [o.node_id for o in outs])   # the single-threaded answers, from a twin
    want = {}
    for k in range(THREADS):
        feeds, params = _feeds(k, x, t, w)
        want[k] = alone.run(feeds, params=params, on_nan="ignore")
    start = threading.Barrier(THREADS)   # all threads hit the fresh plan's first run together
    wrong: list[str] = []
    raised: dict[int, int] = {}

    def hammer(k: int) -> None:
        feeds, params = _feeds(k, x, t, w)
        start.wait()
        for r in range(RUNS):
            if k == THREADS - 1 and r % 2:   # the NaN search, run under the same lock
                with pytest.raises(at.NumericsError, match="the feed for input 'x' contains NaN"):
                    plan.run(feeds, params=params)
                raised[k] = raised.get(k, 0) + 1
                continue
            got = plan.run(feeds, params=params, on_nan="ignore")
            for j, (a, b) in enumerate(zip(got, want[k])):
                if a.dtype != b.dtype or not np.array_equal(a, b, equal_nan=True):
                    wrong.append(f"thread {k}, run {r}, output {j} ({outs[j].op}): differs from its single run")

    threads = [threading.Thread(target=hammer, args=(k,)) for k in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not wrong, "\n".join(wrong[:10])
    assert raised == {THREADS - 1: RUNS // 2}


def _probe(name: str, kernel) -> OpSpec:
    return OpSpec(name=name, category="arithmetic", arity=1, infer=lambda s, **_: s, numpy=kernel,
                  not_differentiable="a probe of this test")


def test_runs_of_one_plan_take_turns() -> None:
    """A kernel that counts how many runs are inside it at once never sees two."""
    inside, most = [0], [0]
    lock = threading.Lock()

    def count(x: np.ndarray) -> np.ndarray:
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.001)   # a window for another thread to come in, were it let in
        with lock:
            inside[0] -= 1
        return x * 2.0

    with registered(_probe("count_probe", count)):
        with at.Graph() as g:
            x = at.input("x", (4,))
            y = at.sum(apply("count_probe", at.tanh(x)))
        plan = numpy_backend.compile(g, [y.node_id])
        start = threading.Barrier(THREADS)

        def go(k: int) -> None:
            start.wait()
            for _ in range(10):
                plan.run({x: np.full(4, float(k))})

        threads = [threading.Thread(target=go, args=(k,)) for k in range(THREADS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    assert most[0] == 1, f"{most[0]} runs of one plan were inside a kernel at the same time"


def test_a_run_may_run_the_same_plan_again_on_its_own_thread() -> None:
    """The lock is re-entrant: a kernel that calls back into its own plan does not wait for itself forever."""
    plan_box: list = []
    inner: list[float] = []
    calls = [0]

    def again(x: np.ndarray) -> np.ndarray:
        calls[0] += 1
        if calls[0] == 1:   # the outer run: run the plan again (that inner run reaches this kernel too)
            inner.append(float(plan_box[0].run({"x": np.zeros(3)})[0]))
        return x + 1.0

    with registered(_probe("again_probe", again)):
        with at.Graph() as g:
            x = at.input("x", (3,))
            y = at.sum(apply("again_probe", x))
        plan_box.append(numpy_backend.compile(g, [y.node_id]))
        result: list[float] = []
        th = threading.Thread(target=lambda: result.append(float(plan_box[0].run({x: np.ones(3)})[0])),
                              daemon=True)   # a deadlock must not keep the test process alive
        th.start()
        th.join(timeout=20)
    assert not th.is_alive(), "a run that ran its own plan again waited for itself (a lock that is not re-entrant)"
    assert result == [6.0] and inner == [3.0]
