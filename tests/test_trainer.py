"""Trainer: determinism, data loading, safetensors round trip and its errors, and the examples' targets."""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at
from asgteach import examples, nn


def _model(name="net"):
    with at.Graph() as g:
        x, t = at.input("x", (8, 3)), at.input("t", (8, 1))
        net = nn.MLP([3, 5, 1], activation="tanh", name=name)
        loss = nn.mse_loss(net(x), t)
    return g, x, t, net, loss


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((8, 3))
    return X, np.sin(X.sum(1, keepdims=True))


def test_fit_is_deterministic_with_a_seed_and_differs_without():
    X, T = _data()
    runs = []
    for seed in (0, 0, 1):
        g, x, t, net, loss = _model()
        tr = at.Trainer(loss, optimizer=at.optim.Adam(lr=0.05), seed=seed)
        runs.append((tr.fit({x: X, t: T}, steps=20, progress=False), tr.params))
    assert runs[0][0] == runs[1][0]
    for k in runs[0][1]:
        np.testing.assert_array_equal(runs[0][1][k], runs[1][1][k])
    assert runs[0][0] != runs[2][0]


def test_fit_returns_falling_losses_in_float32():
    X, T = _data()
    g, x, t, net, loss = _model()
    tr = at.Trainer(loss, optimizer=at.optim.Adam(lr=0.05))
    hist = tr.fit({x: X, t: T}, steps=100, progress=False)
    assert len(hist) == 100 and hist[-1] < 0.1 * hist[0]
    assert all(v.dtype == np.float32 for v in tr.params.values())
    assert tr.step == 100 and tr.history == hist


def test_fit_with_chart_draws_one_live_loss_chart_in_a_notebook(monkeypatch):
    """chart=True: one display handle, redrawn in place, ending on the last loss (the Trainer imports
    no widgets: the chart is asgteach.plots, a leaf)."""
    import IPython
    import IPython.display

    shown = []

    class Handle:
        def update(self, fig):
            shown.append(fig)

    def display(fig, display_id=False):
        assert display_id is True
        shown.append(fig)
        return Handle()

    monkeypatch.setattr(IPython, "get_ipython", lambda: object())  # as if in a notebook
    monkeypatch.setattr(IPython.display, "display", display)
    X, T = _data()
    g, x, t, net, loss = _model()
    tr = at.Trainer(loss, optimizer=at.optim.Adam(lr=0.05))
    hist = tr.fit({x: X, t: T}, steps=30, progress=False, chart=True)
    assert shown, "no chart was drawn"
    title = shown[-1].axes[0].get_title()
    assert title.endswith(f"{hist[-1]:.4g}") and len(shown[-1].axes[0].lines[0].get_xdata()) == 30
    shown.clear()
    tr.fit({x: X, t: T}, steps=3, progress=False)
    assert not shown, "chart=False draws nothing"


def test_fit_with_dataloader_epochs_and_steps():
    rng = np.random.default_rng(0)
    X, T = rng.standard_normal((40, 3)), rng.standard_normal((40, 1))
    g, x, t, net, loss = _model()
    tr = at.Trainer(loss, optimizer=at.optim.SGD(lr=0.01))
    loader = nn.DataLoader(nn.Dataset({x: X, t: T}), batch_size=8, shuffle=True, seed=3)
    assert len(loader) == 5
    assert len(tr.fit(loader, epochs=2, progress=False)) == 10
    assert len(tr.fit(loader, steps=7, progress=False)) == 7
    seen = []
    tr.fit(loader, epochs=1, progress=False, callback=lambda step, loss: seen.append(step))
    assert seen == list(range(18, 23))


def test_dataloader_shuffles_reproducibly_and_covers_everything():
    ds = nn.Dataset({"a": np.arange(10), "b": np.arange(10) * 2})
    a1 = [b["a"] for b in nn.DataLoader(ds, 3, shuffle=True, seed=5, drop_last=False)]
    a2 = [b["a"] for b in nn.DataLoader(ds, 3, shuffle=True, seed=5, drop_last=False)]
    assert all((u == v).all() for u, v in zip(a1, a2))
    assert sorted(np.concatenate(a1).tolist()) == list(range(10))
    batch = next(iter(nn.DataLoader(ds, 4, shuffle=True, seed=1)))
    np.testing.assert_array_equal(batch["b"], batch["a"] * 2)
    with pytest.raises(ValueError, match="same length"):
        nn.Dataset({"a": np.arange(3), "b": np.arange(4)})


def test_save_load_round_trip(tmp_path):
    X, T = _data()
    g, x, t, net, loss = _model()
    tr = at.Trainer(loss, optimizer=at.optim.Adam(lr=0.05))
    tr.fit({x: X, t: T}, steps=10, progress=False)
    path = tmp_path / "w.safetensors"
    tr.save(path)
    g2, x2, t2, net2, loss2 = _model()
    tr2 = at.Trainer(loss2, optimizer=at.optim.Adam(lr=0.05), seed=99)
    tr2.load(path)
    for k, v in tr.params.items():
        np.testing.assert_array_equal(tr2.params[k], v)
    np.testing.assert_array_equal(tr.run([loss], {x: X, t: T})[0], tr2.run([loss2], {x2: X, t2: T})[0])
    assert b"pickle" not in path.read_bytes()[:200]


def test_load_errors_name_the_tensor_and_shapes(tmp_path):
    from safetensors.numpy import save_file

    g, x, t, net, loss = _model()
    tr = at.Trainer(loss, optimizer=at.optim.SGD(lr=0.1))
    good = {k: v for k, v in tr.params.items()}
    bad_shape = dict(good, **{"net.0.weight": np.zeros((4, 5), np.float32)})
    save_file(bad_shape, str(tmp_path / "shape.safetensors"))
    with pytest.raises(at.WeightsFileError, match=r"'net\.0\.weight'.*\(4, 5\).*\(3, 5\)"):
        tr.load(tmp_path / "shape.safetensors")
    missing = {k: v for k, v in good.items() if k != "net.1.bias"}
    save_file(missing, str(tmp_path / "missing.safetensors"))
    with pytest.raises(at.WeightsFileError, match="no tensor 'net.1.bias'"):
        tr.load(tmp_path / "missing.safetensors")
    extra = dict(good, stray=np.zeros(2, np.float32))
    save_file(extra, str(tmp_path / "extra.safetensors"))
    with pytest.raises(at.WeightsFileError, match="stray"):
        tr.load(tmp_path / "extra.safetensors")
    corrupt = tmp_path / "corrupt.safetensors"
    tr.save(corrupt)
    corrupt.write_bytes(corrupt.read_bytes()[:40])
    with pytest.raises(at.WeightsFileError, match="not a readable safetensors"):
        tr.load(corrupt)
    nan = dict(good, **{"net.0.bias": np.full(5, np.nan, np.float32)})
    save_file(nan, str(tmp_path / "nan.safetensors"))
    with pytest.raises(at.WeightsFileError, match="not a finite"):
        tr.load(tmp_path / "nan.safetensors")
    for k, v in good.items():  # a failed load changes nothing
        np.testing.assert_array_equal(tr.params[k], v)


def test_trainer_errors():
    with at.Graph():
        x = at.input("x", (3,))
        with pytest.raises(ValueError, match="must be a scalar"):
            at.Trainer(x * 2.0, optimizer=at.optim.SGD(lr=0.1))
        with pytest.raises(ValueError, match="no parameters"):
            at.Trainer(at.sum(x), optimizer=at.optim.SGD(lr=0.1))


def test_diverging_training_names_the_nan_node():
    with at.Graph():
        x = at.input("x", (4, 1))
        w = at.parameter("w", (1, 1), init="ones")
        loss = at.mean(at.log(x @ w))
    tr = at.Trainer(loss, optimizer=at.optim.SGD(lr=0.1))
    with pytest.raises(at.NumericsError, match="log"):
        tr.fit({x: -np.ones((4, 1))}, steps=1, progress=False)


# -- the examples' targets, on small budgets -------------------------------------------------------
def test_example_xor():
    r = examples.xor(steps=500)
    assert r.metrics["final_loss"] < 1e-3 and r.metrics["accuracy"] == 1.0


def test_example_linear_regression():
    r = examples.linear_regression(steps=200)
    assert r.metrics["weight_error"] < 0.02


def test_example_digits():
    r = examples.digits(epochs=15)
    assert r.metrics["test_accuracy"] >= 0.95


def test_example_char_transformer():
    r = examples.char_transformer(steps=150)
    assert r.metrics["final_loss"] < 0.75 * r.metrics["first_loss"]
    assert r.metrics["first_loss"] < r.metrics["uniform_loss"] + 0.5


@pytest.mark.gpu
def test_trainer_on_wgpu_keeps_weights_on_the_device_and_matches_numpy(tmp_path):
    X, T = _data()
    results = {}
    for backend in ("numpy", "wgpu"):
        g, x, t, net, loss = _model()
        tr = at.Trainer(loss, optimizer=at.optim.Adam(lr=0.05), backend=backend, seed=0)
        hist = tr.fit({x: X.astype(np.float32), t: T.astype(np.float32)}, steps=30, progress=False)
        results[backend] = (hist, tr.params, tr)
    np.testing.assert_allclose(results["wgpu"][0], results["numpy"][0], rtol=2e-4, atol=1e-6)
    for k, v in results["numpy"][1].items():
        np.testing.assert_allclose(results["wgpu"][1][k], v, rtol=2e-4, atol=1e-5)
    tr = results["wgpu"][2]
    stats = tr.plan.stats
    assert stats["submits"] == 1 and stats["host_syncs"] == 1
    param_bytes = sum(v.nbytes for v in tr.params.values())
    assert stats["upload_bytes"] < param_bytes, stats  # only the batch, lr and step travel
    tr.save(tmp_path / "gpu.safetensors")
    zeros = {k: np.zeros_like(v) for k, v in tr.params.items()}
    from safetensors.numpy import save_file

    save_file(zeros, str(tmp_path / "zeros.safetensors"))
    tr.load(tmp_path / "zeros.safetensors")  # the device copy must be replaced on the next step
    g = tr.graph
    x = at.Tensor(g, g.find("x").id)
    t = at.Tensor(g, g.find("t").id)
    tr.train_step({x: X.astype(np.float32), t: T.astype(np.float32)})
    assert tr.plan.stats["upload_bytes"] >= param_bytes  # parameters were uploaded again
    assert all(np.abs(v).max() < 0.2 for v in tr.params.values())  # one step away from zeros


def test_live_chart_costs_at_most_a_fifth_of_the_time_when_drawing_is_slow(monkeypatch):
    """On a loaded machine one redraw can take longer than the 0.5 s interval; the chart must then back off
    (wait 4x its own drawing time), not redraw on every step (500 steps x 0.25 s took 2 minutes in a lesson)."""
    import time

    import IPython
    import IPython.display

    from asgteach.plots import LossChart

    clock = [0.0]
    draws = []

    class Handle:
        def update(self, fig):
            draws.append(clock[0])
            clock[0] += 1.0            # every redraw takes 1 s

    def display(fig, display_id=False):
        draws.append(clock[0])
        clock[0] += 1.0
        return Handle()

    monkeypatch.setattr(IPython, "get_ipython", lambda: object())
    monkeypatch.setattr(IPython.display, "display", display)
    monkeypatch.setattr(LossChart, "figure", lambda self, history: object())
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])   # the chart's clock: this test's, not the machine's
    chart = LossChart(interval=0.5)
    for step in range(200):            # each step takes 0.1 s
        chart.update([1.0] * (step + 1))
        clock[0] += 0.1
    chart.update([1.0] * 200, final=True)
    drawing = len(draws) * 1.0
    assert drawing <= 0.25 * clock[0], f"{len(draws)} redraws of 1 s in {clock[0]:.0f} s"
    assert len(draws) >= 3, "it still redraws while training runs"
