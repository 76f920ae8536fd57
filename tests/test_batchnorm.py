"""BatchNorm1d / BatchNorm2d (issue 35, item 3): PyTorch's semantics, one graph for training and evaluation.

The oracle is PyTorch's BatchNorm as its documentation states it, written here in numpy (no PyTorch in the
tests): training normalises with the batch's mean and biased variance and moves the running mean and the
UNBIASED running variance by ``momentum``; evaluation normalises with the running statistics. The Trainer
keeps those in ``trainer.buffers``, checkpoints carry them, a refused (NaN) step leaves them alone, and the
GPU gives numpy's numbers.
"""

from __future__ import annotations

import numpy as np
import pytest
from safetensors import safe_open

import asgteach as at
from asgteach import nn
from asgteach.nn.trainer import WeightsFileError

from wgpu_helpers import need_gpu

EPS, MOMENTUM = 1e-5, 0.1


class TorchBatchNorm:
    """``torch.nn.BatchNorm1d/2d(c)`` (affine, tracking running statistics), from its documentation.

    "The mean and standard-deviation are calculated per-dimension over the mini-batches ... the standard-
    deviation is calculated via the biased estimator ... the running estimate of the variance is calculated
    via the unbiased estimator"; x_new = (1 - momentum) * x_hat + momentum * x_t; running_mean starts at 0,
    running_var at 1; in eval mode the running estimates normalise.
    """

    def __init__(self, c: int, eps: float = EPS, momentum: float = MOMENTUM) -> None:
        self.eps, self.momentum = eps, momentum
        self.running_mean, self.running_var = np.zeros(c), np.ones(c)

    def __call__(self, x: np.ndarray, weight: np.ndarray, bias: np.ndarray, training: bool) -> np.ndarray:
        x = np.asarray(x, np.float64)
        axes = tuple(a for a in range(x.ndim) if a != 1)
        if training:
            mean, var = x.mean(axis=axes), x.var(axis=axes)
            m = self.momentum
            self.running_mean = (1 - m) * self.running_mean + m * mean
            self.running_var = (1 - m) * self.running_var + m * x.var(axis=axes, ddof=1)
        else:
            mean, var = self.running_mean, self.running_var
        shape = [1] * x.ndim
        shape[1] = -1

        def c(v: np.ndarray) -> np.ndarray:
            return np.asarray(v, np.float64).reshape(shape)

        return (x - c(mean)) / np.sqrt(c(var) + self.eps) * c(weight) + c(bias)


SHAPES = {"1d (N, C)": (nn.BatchNorm1d, (6, 3)), "1d (N, C, L)": (nn.BatchNorm1d, (4, 3, 5)),
          "2d": (nn.BatchNorm2d, (3, 2, 4, 5))}


def _wgpu() -> str:
    """The wgpu backend's name, or this test skipped (loudly) without an adapter; under CI=true it fails."""
    need_gpu()
    return "wgpu"


def _layer(kind: str):
    layer_cls, shape = SHAPES[kind]
    with at.Graph() as g:
        x = at.input("x", shape)
        bn = layer_cls(shape[1], name="bn")
        y = bn(x)
    return g, x, bn, y


def _x(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) * rng.uniform(0.5, 3.0, (1, shape[1], *([1] * (len(shape) - 2)))) + 2.0


# --- the layer against the oracle -----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", SHAPES)
def test_training_and_evaluation_are_pytorchs(kind: str) -> None:
    g, x, bn, y = _layer(kind)
    c = bn.num_features
    rng = np.random.default_rng(1)
    W, B = rng.uniform(0.5, 2, c), rng.standard_normal(c)
    ref = TorchBatchNorm(c)
    next_mean = at.Tensor(g, g.find("bn.running_mean").supplied.next)
    next_var = at.Tensor(g, g.find("bn.running_var").supplied.next)
    rm, rv = np.zeros(c), np.ones(c)
    for step in range(3):   # three training steps, carrying the running statistics by hand
        X = _x(x.shape, seed=step)
        feeds = {x: X, "bn.weight": W, "bn.bias": B, "bn.running_mean": rm, "bn.running_var": rv}
        got, rm, rv = at.run([y, next_mean, next_var], feeds, training=True)
        np.testing.assert_allclose(got, ref(X, W, B, training=True), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(rm, ref.running_mean, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(rv, ref.running_var, rtol=1e-12)
    X = _x(x.shape, seed=9)
    got = at.run(y, {x: X, "bn.weight": W, "bn.bias": B, "bn.running_mean": rm, "bn.running_var": rv})
    np.testing.assert_allclose(got, ref(X, W, B, training=False), rtol=1e-12, atol=1e-12)
    # evaluation normalises with the running statistics, not the batch's: one example's output does not
    # depend on the rest of its batch
    other = X.copy()
    other[1:] += 5.0
    again = at.run(y, {x: other, "bn.weight": W, "bn.bias": B, "bn.running_mean": rm, "bn.running_var": rv})
    np.testing.assert_array_equal(again[0], got[0])


@pytest.mark.parametrize("kind", SHAPES)
def test_gradients_in_training_mode_pass_gradcheck(kind: str) -> None:
    g, x, bn, y = _layer(kind)
    c = bn.num_features
    rng = np.random.default_rng(2)
    feeds = {x: _x(x.shape, seed=3), bn.weight: rng.uniform(0.5, 2, c), bn.bias: rng.standard_normal(c),
             "bn.training": 1.0, "bn.running_mean": rng.standard_normal(c), "bn.running_var": rng.uniform(1, 2, c)}
    rep = at.gradcheck(y, [x, bn.weight, bn.bias], feeds)
    assert rep.ok, rep
    # evaluation: x's gradient is the running statistics' affine map alone (no path through the batch's)
    feeds["bn.training"] = 0.0
    rep = at.gradcheck(y, [x, bn.weight, bn.bias], feeds)
    assert rep.ok, rep
    (dx,) = at.run(at.grad(at.sum(y), [x]), feeds)
    scale = feeds[bn.weight] / np.sqrt(feeds["bn.running_var"] + EPS)
    shape = [1] * x.ndim
    shape[1] = -1
    np.testing.assert_allclose(dx, np.broadcast_to(scale.reshape(shape), x.shape), rtol=1e-12)


def test_layer_options_and_shape_errors() -> None:
    with at.Graph() as g:
        x = at.input("x", (5, 3))
        y = nn.BatchNorm1d(3, affine=False, track_running_stats=False, name="plain")(x)
        with pytest.raises(at.ShapeError, match=r"expects x of shape \(N, 4\) or \(N, 4, L\), got \(5, 3\)"):
            nn.BatchNorm1d(4, name="wrong")(x)
        with pytest.raises(at.ShapeError, match=r"\(N, 3, H, W\)"):
            nn.BatchNorm2d(3, name="flat")(x)
        with pytest.raises(at.ShapeError, match="1 value per channel.*track_running_stats=False"):
            nn.BatchNorm1d(3, track_running_stats=False, name="single")(at.input("one", (1, 3)))
        with pytest.raises(ValueError, match="momentum"):
            nn.BatchNorm1d(3, momentum=None)
    # no parameters (affine=False), no flag and no running statistics (track_running_stats=False)
    assert not [n for n in g.nodes if n.op in ("parameter", "input") and n.meta.get("layer") == "plain"]
    X = _x((5, 3))
    want = (X - X.mean(0)) / np.sqrt(X.var(0) + EPS)   # batch statistics in both modes
    np.testing.assert_allclose(at.run(y, {x: X}), want, rtol=1e-12)
    np.testing.assert_allclose(at.run(y, {x: X}, training=True), want, rtol=1e-12)


@pytest.mark.parametrize("backend", ["numpy", "reference", "wgpu"])
def test_a_batch_of_one_is_evaluated_and_refused_training_naming_the_layer_and_line(backend: str) -> None:
    """As PyTorch: one value per channel evaluates with the running statistics; training it raises."""
    if backend == "wgpu":
        _wgpu()
    with at.Graph() as g:
        x = at.input("x", (1, 3))
        y = nn.BatchNorm1d(3, name="single")(x)
    X, W, B = _x((1, 3)), np.array([2.0, 1.0, 0.5]), np.array([0.0, 1.0, -1.0])
    feeds = {x: X, "single.weight": W, "single.bias": B,
             "single.running_mean": np.array([1.0, 2.0, 3.0]), "single.running_var": np.array([4.0, 1.0, 0.25])}
    want = (X - feeds["single.running_mean"]) / np.sqrt(feeds["single.running_var"] + EPS) * W + B
    if backend == "wgpu":       # (it computes in float32: fed as such, it has nothing to warn about)
        feeds = {k: np.asarray(v, np.float32) for k, v in feeds.items()}
        X = X.astype(np.float32)
    np.testing.assert_allclose(at.run(y, feeds, backend=backend), want, rtol=1e-5 if backend == "wgpu" else 1e-12)
    said = r"BatchNorm1d: layer 'single' has 1 value per channel in x of shape \(1, 3\): it cannot train"
    with pytest.raises(at.ShapeError, match=said + r"(?s:.*)test_batchnorm.py:\d+(?s:.*)batches of 2"):
        at.run(y, feeds, backend=backend, training=True)
    # the reason is part of the graph: saved with it and loaded back
    (flag,) = [n for n in at.load_graph(g.to_json()).nodes if n.name == "single.training"]
    assert "cannot train" in flag.supplied.refuse
    # a Trainer refuses the step before it changes anything, and evaluates
    with at.Graph():
        x1, t1 = at.input("x", (1, 3)), at.input("t", (1, 3))
        loss = nn.mse_loss(nn.BatchNorm1d(3, name="bn")(x1), t1)
    tr = at.Trainer(loss, optimizer=at.optim.Adam(lr=0.1), backend=backend, seed=0)
    params, buffers = {k: v.copy() for k, v in tr.params.items()}, tr.buffers
    with pytest.raises(at.ShapeError, match="layer 'bn' has 1 value per channel"):
        tr.train_step({x1: X, t1: X})
    assert tr.step == 0
    for k, v in {**params, **buffers}.items():
        np.testing.assert_array_equal({**tr.params, **tr.buffers}[k], v, err_msg=k)
    assert np.isfinite(tr.run([loss], {x1: X, t1: X})[0]).all()


# --- at.run's mode -------------------------------------------------------------------------------------------
def test_at_run_evaluates_by_default_and_trains_when_asked() -> None:
    with at.Graph():
        x = at.input("x", (16, 4))
        y = nn.BatchNorm1d(4, name="bn")(x)
        out = nn.Dropout(0.5, name="drop")(y)
    X = _x((16, 4))
    P = {"bn.weight": np.full(4, 2.0), "bn.bias": np.full(4, 0.5)}
    # evaluation, nothing fed but the data and the parameters: a fresh layer's running statistics
    # (mean 0, variance 1) and no dropout
    np.testing.assert_allclose(at.run(out, {x: X, **P}), X / np.sqrt(1 + EPS) * 2.0 + 0.5, rtol=1e-12)
    # running statistics fed by name are used
    stats = {"bn.running_mean": np.arange(4.0), "bn.running_var": np.full(4, 4.0)}
    np.testing.assert_allclose(at.run(y, {x: X, **P, **stats}), (X - np.arange(4.0)) / np.sqrt(4 + EPS) * 2 + 0.5,
                               rtol=1e-12)
    # training: the batch's statistics, and a fresh dropout mask drawn from rng
    batch = (X - X.mean(0)) / np.sqrt(X.var(0) + EPS) * 2.0 + 0.5
    np.testing.assert_allclose(at.run(y, {x: X, **P}, training=True), batch, rtol=1e-12)
    a = at.run(out, {x: X, **P}, training=True, rng=7)
    np.testing.assert_array_equal(a, at.run(out, {x: X, **P}, training=True, rng=7))   # a seed: the same mask
    kept = a != 0
    assert 0.3 < kept.mean() < 0.7
    np.testing.assert_allclose(a[kept], 2 * batch[kept], rtol=1e-12)                   # kept, scaled by 1/(1-p)
    gen = np.random.default_rng(7)
    first = at.run(out, {x: X, **P}, training=True, rng=gen)
    np.testing.assert_array_equal(first, a)
    assert not np.array_equal(at.run(out, {x: X, **P}, training=True, rng=gen), a)   # a Generator advances
    # what the caller feeds wins over the mode
    np.testing.assert_allclose(at.run(y, {x: X, **P, "bn.training": 1.0}), batch, rtol=1e-12)
    np.testing.assert_allclose(at.run(out, {x: X, **P, "drop.mask": np.ones((16, 4))}, training=True), batch,
                               rtol=1e-12)
    # the precision follows the feeds
    assert at.run(y, {x: X.astype(np.float32), **{k: v.astype(np.float32) for k, v in P.items()}}).dtype == np.float32


# --- the Trainer -----------------------------------------------------------------------------------------------
def _input_bn_trainer(kind: str, backend: str = "numpy"):
    """BatchNorm straight on the data: its running statistics depend on the batches only, not on training."""
    layer_cls, shape = SHAPES[kind]
    with at.Graph():
        x, t = at.input("x", shape), at.input("t", shape)
        h = layer_cls(shape[1], name="bn")(x)
        loss = nn.mse_loss(h, t)
    tr = at.Trainer(loss, optimizer=at.optim.SGD(lr=0.1), backend=backend, seed=0)
    return tr, x, t, h


def _batches(shape: tuple[int, ...], k: int) -> list[np.ndarray]:
    return [_x(shape, seed=10 + i).astype(np.float32) for i in range(k)]


@pytest.mark.parametrize("kind", SHAPES)
def test_trainer_buffers_follow_the_reference_and_evaluation_uses_them(kind: str) -> None:
    tr, x, t, h = _input_bn_trainer(kind)
    c = x.shape[1]
    assert tr.buffers.keys() == {"bn.running_mean", "bn.running_var"}
    np.testing.assert_array_equal(tr.buffers["bn.running_var"], np.ones(c, np.float32))
    ref = TorchBatchNorm(c)
    T = np.zeros(x.shape, np.float32)
    for X in _batches(x.shape, 4):
        tr.train_step({x: X, t: T})
        ref(X, np.ones(c), np.zeros(c), training=True)
    buffers = tr.buffers
    assert all(v.dtype == np.float32 for v in buffers.values())
    np.testing.assert_allclose(buffers["bn.running_mean"], ref.running_mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(buffers["bn.running_var"], ref.running_var, rtol=1e-5)
    X = _x(x.shape, seed=99).astype(np.float32)
    (got,) = tr.run([h], {x: X})
    p = tr.params
    np.testing.assert_allclose(got, ref(X, p["bn.weight"], p["bn.bias"], training=False), rtol=1e-5, atol=1e-5)
    # at.run evaluates the same way with the Trainer's parameters and buffers fed by name
    np.testing.assert_allclose(at.run(h, {x: X, **p, **buffers}), got, rtol=1e-6, atol=1e-6)
    with pytest.raises(at.FeedError, match="'bn.running_mean' is held by this Trainer"):
        tr.run([h], {x: X, "bn.running_mean": np.zeros(c)})


def _model(backend: str = "numpy", seed: int = 0):
    """Two BatchNorms, one on (N, C) and one on (N, C, L) after a Linear (whose statistics move as it learns),
    and dropout, so a checkpoint needs buffers, optimizer state and the mask generator."""
    with at.Graph():
        x, t = at.input("x", (8, 4)), at.input("t", (8, 1))
        h = nn.Linear(4, 6, name="l1")(nn.BatchNorm1d(4, name="bn0")(x))
        h = at.reshape(nn.BatchNorm1d(3, momentum=0.3, name="bn1")(at.reshape(h, (8, 3, 2))), (8, 6))
        h = nn.Dropout(0.2, name="drop")(at.tanh(h))
        loss = nn.mse_loss(nn.Linear(6, 1, name="l2")(h), t)
    tr = at.Trainer(loss, optimizer=at.optim.AdamW(lr=0.05), backend=backend, seed=seed)
    return tr, x, t


def _data(k: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(4)
    out = []
    for _ in range(k):
        X = (rng.standard_normal((8, 4)) * 2 + 1).astype(np.float32)
        out.append((X, np.sin(X.sum(1, keepdims=True)).astype(np.float32)))
    return out


def test_save_load_and_go_on_is_the_run_that_never_stopped(tmp_path) -> None:
    data = _data(8)
    whole, x, t = _model()
    for X, T in data:
        whole.train_step({x: X, t: T})
    first, x1, t1 = _model()
    for X, T in data[:4]:
        first.train_step({x1: X, t1: T})
    first.save(tmp_path / "ck.safetensors")
    with safe_open(str(tmp_path / "ck.safetensors"), framework="numpy") as f:
        keys = set(f.keys())
        np.testing.assert_array_equal(f.get_tensor("@buffers/bn1.running_var"), first.buffers["bn1.running_var"])
    assert {"@buffers/bn0.running_mean", "@buffers/bn0.running_var", "@buffers/bn1.running_mean"} <= keys
    resumed, x2, t2 = _model(seed=5)   # other initial weights and generator: the file replaces them all
    resumed.load(tmp_path / "ck.safetensors")
    assert resumed.buffers.keys() == whole.buffers.keys()
    for X, T in data[4:]:
        resumed.train_step({x2: X, t2: T})
    assert resumed.history == whole.history   # bit for bit
    for k, v in whole.buffers.items():
        np.testing.assert_array_equal(resumed.buffers[k], v, err_msg=k)
    for k, v in whole.params.items():
        np.testing.assert_array_equal(resumed.params[k], v, err_msg=k)


def test_a_checkpoint_without_the_buffers_is_refused_and_changes_nothing(tmp_path) -> None:
    from safetensors.numpy import save_file

    tr, x, t = _model()
    X, T = _data(1)[0]
    tr.train_step({x: X, t: T})
    before = tr.buffers
    save_file(tr.params, str(tmp_path / "weights.safetensors"))   # parameters only
    with pytest.raises(WeightsFileError, match="no tensor '@buffers/bn0.running_mean'"):
        tr.load(tmp_path / "weights.safetensors")
    bad = {**tr.params, **{f"@buffers/{k}": v for k, v in before.items()}}
    bad["@buffers/bn1.running_var"] = np.zeros(5, np.float32)
    save_file(bad, str(tmp_path / "bad.safetensors"))
    with pytest.raises(WeightsFileError, match=r"'@buffers/bn1.running_var' .* shape \(5,\), but the model's buffer"):
        tr.load(tmp_path / "bad.safetensors")
    for k, v in before.items():
        np.testing.assert_array_equal(tr.buffers[k], v)


def test_a_layer_called_twice_in_one_loss_is_refused() -> None:
    with at.Graph():
        x = at.input("x", (4, 3))
        bn = nn.BatchNorm1d(3, name="bn")
        loss = at.mean(bn(bn(x)) ** 2)
    with pytest.raises(ValueError, match="two buffers named 'bn.running_mean'"):
        at.Trainer(loss, optimizer=at.optim.SGD(lr=0.1))


# --- the same answer on the GPU, and NaN steps on both -------------------------------------------------------
@pytest.mark.parametrize("backend", ["numpy", "wgpu"])
def test_a_nan_step_leaves_the_buffers_as_they_were(backend: str) -> None:
    if backend == "wgpu":
        _wgpu()
    data = _data(4)
    tr, x, t = _model(backend)
    clean, cx, ct = _model(backend)
    X, T = data[0]
    assert tr.train_step({x: X, t: T}) == clean.train_step({cx: X, ct: T})
    before = tr.buffers
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(at.NumericsError, match="the buffers and the step count"):
        tr.train_step({x: bad, t: T})
    for k, v in before.items():
        np.testing.assert_array_equal(tr.buffers[k], v, err_msg=k)
    rest = [tr.train_step({x: X, t: T}) for X, T in data[1:]]
    want = [clean.train_step({cx: X, ct: T}) for X, T in data[1:]]
    assert rest == want
    for k, v in clean.buffers.items():
        np.testing.assert_array_equal(tr.buffers[k], v, err_msg=k)


def test_wgpu_trains_and_evaluates_as_numpy() -> None:
    backend = _wgpu()
    data = _data(6)
    results = {}
    for name in ("numpy", backend):
        tr, x, t = _model(name)
        hist = [tr.train_step({x: X, t: T}) for X, T in data]
        results[name] = (tr, x, t, hist)
    (cpu, cx, ct, cpu_hist), (gpu, gx, gt, gpu_hist) = results["numpy"], results[backend]
    np.testing.assert_allclose(gpu_hist, cpu_hist, rtol=1e-4, atol=1e-6)
    for k, v in cpu.buffers.items():
        np.testing.assert_allclose(gpu.buffers[k], v, rtol=1e-4, atol=1e-5, err_msg=k)
    for k, v in cpu.params.items():
        np.testing.assert_allclose(gpu.params[k], v, rtol=1e-4, atol=1e-5, err_msg=k)
    # evaluation on each backend (the running statistics, no dropout), and the same with at.run
    X, T = data[0]
    (want,) = cpu.run([cpu.loss], {cx: X, ct: T})
    (got,) = gpu.run([gpu.loss], {gx: X, gt: T})
    np.testing.assert_allclose(got, want, rtol=1e-4)
    np.testing.assert_allclose(at.run(gpu.loss, {gx: X, gt: T, **gpu.params, **gpu.buffers}, backend=backend), want,
                               rtol=1e-4)


@pytest.mark.parametrize("kind", SHAPES)
def test_at_run_on_wgpu_is_numpys_in_both_modes(kind: str) -> None:
    backend = _wgpu()
    g, x, bn, y = _layer(kind)
    c = bn.num_features
    rng = np.random.default_rng(6)
    feeds = {x: _x(x.shape, seed=2).astype(np.float32), "bn.weight": rng.uniform(0.5, 2, c).astype(np.float32),
             "bn.bias": rng.standard_normal(c).astype(np.float32),
             "bn.running_mean": rng.standard_normal(c).astype(np.float32),
             "bn.running_var": rng.uniform(1, 2, c).astype(np.float32)}
    next_var = at.Tensor(g, g.find("bn.running_var").supplied.next)
    for training in (False, True):
        want = at.run([y, next_var], feeds, training=training)
        got = at.run([y, next_var], feeds, backend=backend, training=training)
        for w, v in zip(want, got):
            np.testing.assert_allclose(v, w, rtol=1e-5, atol=1e-5, err_msg=f"training={training}")
