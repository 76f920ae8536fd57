"""Optimizer updates (built as graph ops) against the same algorithms written by hand in numpy,
and learning-rate schedules against their closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest

import asgteach as at
from asgteach.nn import optim


def _quadratic(shape=(3, 2)):
    """loss = sum(A * w^2) / 2 + sum(B * w): gradient A * w + B, known in closed form."""
    rng = np.random.default_rng(0)
    A = rng.uniform(0.5, 2.0, shape)
    B = rng.standard_normal(shape)
    with at.Graph() as g:
        w = at.parameter("w", shape, init="normal")
        loss = at.sum(at.constant(A) * w * w) / 2.0 + at.sum(at.constant(B) * w)
    return g, w, loss, (lambda W: A * W + B)


def _run(opt, steps=5, scheduler=None):
    g, w, loss, grad_fn = _quadratic()
    tr = at.Trainer(loss, optimizer=opt, dtype=np.float64, seed=3, scheduler=scheduler)
    w0 = tr.params["w"].copy()
    seen = [w0]
    for _ in range(steps):
        tr.train_step({})
        seen.append(tr.params["w"].copy())
    return seen, grad_fn


def _reference(kind, w0, grad_fn, steps, lr, **h):
    """The PyTorch algorithms (torch.optim docs), written out in numpy."""
    w = w0.copy()
    state = {"v": np.zeros_like(w), "m": np.zeros_like(w), "s": np.zeros_like(w)}
    out = [w.copy()]
    for t in range(1, steps + 1):
        g = grad_fn(w)
        if kind == "sgd":
            g = g + h.get("weight_decay", 0.0) * w
            if h.get("momentum"):
                state["v"] = h["momentum"] * state["v"] + g
                g = g + h["momentum"] * state["v"] if h.get("nesterov") else state["v"]
            w = w - lr * g
        elif kind in ("adam", "adamw"):
            b1, b2, eps, wd = 0.9, 0.999, 1e-8, h.get("weight_decay", 0.0)
            if kind == "adam":
                g = g + wd * w
            else:
                w = w * (1 - lr * wd)
            state["m"] = b1 * state["m"] + (1 - b1) * g
            state["s"] = b2 * state["s"] + (1 - b2) * g * g
            mhat = state["m"] / (1 - b1**t)
            vhat = state["s"] / (1 - b2**t)
            w = w - lr * mhat / (np.sqrt(vhat) + eps)
        elif kind == "adagrad":
            g = g + h.get("weight_decay", 0.0) * w
            state["s"] = state["s"] + g * g if t > 1 else h.get("initial", 0.0) + g * g
            clr = lr / (1 + (t - 1) * h.get("lr_decay", 0.0))
            w = w - clr * g / (np.sqrt(state["s"]) + 1e-10)
        elif kind == "rmsprop":
            state["s"] = 0.99 * state["s"] + 0.01 * g * g
            w = w - lr * g / (np.sqrt(state["s"]) + 1e-8)
        out.append(w.copy())
    return out


@pytest.mark.parametrize("kind,opt,hyper", [
    ("sgd", lambda: optim.SGD(lr=0.1), {}),
    ("sgd", lambda: optim.SGD(lr=0.1, momentum=0.9), {"momentum": 0.9}),
    ("sgd", lambda: optim.SGD(lr=0.1, momentum=0.9, nesterov=True), {"momentum": 0.9, "nesterov": True}),
    ("sgd", lambda: optim.SGD(lr=0.1, momentum=0.5, weight_decay=0.1), {"momentum": 0.5, "weight_decay": 0.1}),
    ("adam", lambda: optim.Adam(lr=0.05), {}),
    ("adam", lambda: optim.Adam(lr=0.05, weight_decay=0.1), {"weight_decay": 0.1}),
    ("adamw", lambda: optim.AdamW(lr=0.05, weight_decay=0.1), {"weight_decay": 0.1}),
    ("rmsprop", lambda: optim.RMSprop(lr=0.01), {}),
    ("adagrad", lambda: optim.AdaGrad(lr=0.1), {}),
    ("adagrad", lambda: optim.AdaGrad(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.5),
     {"lr_decay": 0.05, "weight_decay": 0.1, "initial": 0.5}),
])
def test_optimizer_matches_hand_written_update(kind, opt, hyper):
    o = opt()
    seen, grad_fn = _run(o, steps=6)
    ref = _reference(kind, seen[0], grad_fn, 6, o.lr, **hyper)
    for step, (a, b) in enumerate(zip(seen, ref)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=f"{kind} step {step}")


def test_update_is_part_of_the_graph():
    g, w, loss, _ = _quadratic()
    tr = at.Trainer(loss, optimizer=optim.Adam(lr=0.1))
    update_nodes = [n for n in g.nodes if n.meta.get("update") == "adam"]
    assert update_nodes, "the Adam update must be graph nodes"
    assert all(n.phase == "backward" for n in update_nodes)
    states = [n for n in g.nodes if n.meta.get("optimizer_state")]
    assert {n.meta["optimizer_state"] for n in states} == {"m", "v"}
    assert tr.update.new_params[0].shape == w.shape


def test_clip_grad_norm_and_value():
    with at.Graph():
        a, b = at.input("a", (3,)), at.input("b", (2,))
        ca, cb = optim.clip_grad_norm([a, b], max_norm=1.0)
        va, vb = optim.clip_grad_value([a, b], 0.5)
    A, B = np.array([3.0, 0.0, 4.0]), np.array([0.0, 12.0])  # global norm 13
    got = at.run([ca, cb, va, vb], {a: A, b: B})
    np.testing.assert_allclose(np.concatenate(got[:2]), np.concatenate([A, B]) / (13 + 1e-6), rtol=1e-12)
    np.testing.assert_allclose(got[2], [0.5, 0.0, 0.5])
    np.testing.assert_allclose(got[3], [0.0, 0.5])
    small = at.run([ca], {a: A / 100, b: B / 100})[0]
    np.testing.assert_allclose(small, A / 100)  # under the limit: untouched


def test_clipping_inside_an_optimizer():
    seen, grad_fn = _run(optim.SGD(lr=0.1, clip_value=0.01), steps=1)
    np.testing.assert_allclose(seen[1], seen[0] - 0.1 * np.clip(grad_fn(seen[0]), -0.01, 0.01), rtol=1e-12)


@pytest.mark.parametrize("sched,closed", [
    (optim.StepLR(step_size=3, gamma=0.5), lambda s: 0.2 * 0.5 ** (s // 3)),
    (optim.ExponentialLR(gamma=0.9), lambda s: 0.2 * 0.9**s),
    (optim.CosineAnnealingLR(T_max=10, eta_min=0.01),
     lambda s: 0.01 + (0.2 - 0.01) * (1 + math.cos(math.pi * min(s, 10) / 10)) / 2),
    (optim.LinearWarmup(4), lambda s: 0.2 * (s + 1) / 4 if s < 4 else 0.2),
    (optim.LinearWarmup(2, after=optim.ExponentialLR(0.5)),
     lambda s: 0.2 * (s + 1) / 2 if s < 2 else 0.2 * 0.5 ** (s - 2)),
])
def test_schedules_match_closed_form(sched, closed):
    for s in range(15):
        assert sched(0.2, s) == pytest.approx(closed(s), rel=1e-12)


def test_schedule_drives_the_fed_learning_rate():
    sched = optim.StepLR(step_size=1, gamma=0.5)
    seen, grad_fn = _run(optim.SGD(lr=0.1), steps=3, scheduler=sched)
    w = seen[0]
    for s in range(3):
        w = w - 0.1 * 0.5**s * grad_fn(w)
        np.testing.assert_allclose(seen[s + 1], w, rtol=1e-12)


def test_bad_hyperparameters():
    with pytest.raises(ValueError, match="lr must be positive"):
        optim.SGD(lr=0.0)
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD(lr=0.1, nesterov=True)


@pytest.mark.gpu
def test_adagrad_on_the_gpu_matches_numpy():
    """AdaGrad's update is graph ops like the others: the wgpu backend runs it (fused, in place) to numpy's numbers."""
    losses = {}
    for backend in ("numpy", "wgpu"):
        g, w, loss, _ = _quadratic()
        tr = at.Trainer(loss, optimizer=optim.AdaGrad(lr=0.1, lr_decay=0.01), backend=backend, seed=3)
        losses[backend] = [tr.train_step({}) for _ in range(8)]
    np.testing.assert_allclose(losses["wgpu"], losses["numpy"], rtol=1e-5)
    assert losses["numpy"][-1] < losses["numpy"][0]

