"""Checkpoints: save + load into a fresh Trainer + train on is the run that never stopped (issue 22, item 8).

A checkpoint holds the parameters, every optimizer state tensor, the step (the schedule's position), the loss
history and the dropout generator; older weights-only files still load (the optimizer then starts fresh, with
a CheckpointWarning); a bad file is refused, naming the tensor, before anything changes.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import save_file
from wgpu_helpers import need_gpu

import asgteach as at
from asgteach import nn
from asgteach.nn.trainer import CHECKPOINT_VERSION, CheckpointWarning

# optimizers with state, each with a schedule (whose position is the step the checkpoint keeps)
SETUPS = {
    "adamw+cosine": (lambda: at.optim.AdamW(lr=0.05, weight_decay=0.1),
                     lambda: at.optim.CosineAnnealingLR(T_max=10)),
    "sgd-nesterov+step": (lambda: at.optim.SGD(lr=0.1, momentum=0.9, nesterov=True),
                          lambda: at.optim.StepLR(step_size=3, gamma=0.5)),
    "rmsprop+warmup": (lambda: at.optim.RMSprop(lr=0.01),
                       lambda: at.optim.LinearWarmup(4, at.optim.ExponentialLR(0.9))),
}


def _backend(name: str) -> str:
    if name == "wgpu":
        need_gpu()   # skips this test (loudly; CI=true: fails) without a Vulkan adapter; the numpy tests still run
    return name


def _model(dropout: bool = True):
    """A tiny net (3 -> 5 -> 1) with dropout, so the checkpoint must also carry the mask generator."""
    with at.Graph():
        x, t = at.input("x", (8, 3)), at.input("t", (8, 1))
        h = at.tanh(nn.Linear(3, 5, name="l1")(x))
        if dropout:
            h = nn.Dropout(0.25, name="drop")(h)
        loss = nn.mse_loss(nn.Linear(5, 1, name="l2")(h), t)
    return x, t, loss


def _data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((8, 3)).astype(np.float32)
    return X, np.sin(X.sum(1, keepdims=True))


def _trainer(setup: str, backend: str = "numpy", seed: int = 0, dtype=np.float32, dropout: bool = True, **kw):
    make_opt, make_sched = SETUPS[setup]
    x, t, loss = _model(dropout)
    tr = at.Trainer(loss, optimizer=make_opt(), scheduler=make_sched(), backend=backend, seed=seed, dtype=dtype,
                    **kw)
    X, T = _data()
    return tr, {x: X, t: T}


def _rewrite(src, dst, tensors=None, metadata=None) -> None:
    """Copy a checkpoint, replacing some tensors and metadata entries (a hand-edited or damaged file)."""
    with safe_open(str(src), framework="numpy") as f:
        all_tensors = {k: f.get_tensor(k) for k in f.keys()}
        meta = dict(f.metadata())
    save_file({**all_tensors, **(tensors or {})}, str(dst), metadata={**meta, **(metadata or {})})


def _same_losses(got, want, backend):
    if backend == "numpy":
        assert got == want   # bit for bit: the same float operations on the same bits
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("backend,dtype", [("numpy", np.float32), ("numpy", np.float64), ("wgpu", np.float32)])
@pytest.mark.parametrize("setup", list(SETUPS))
def test_five_steps_save_load_five_steps_is_ten_steps(tmp_path, setup, backend, dtype):
    backend = _backend(backend)
    ref_tr, feeds = _trainer(setup, backend, dtype=dtype)
    ref = ref_tr.fit(feeds, steps=10, progress=False)

    tr, feeds = _trainer(setup, backend, dtype=dtype)
    first = tr.fit(feeds, steps=5, progress=False)
    tr.save(tmp_path / "ckpt.safetensors")
    # a fresh Trainer: a new graph from the same model code, other initial weights, another dropout seed
    fresh, feeds2 = _trainer(setup, backend, seed=7, dtype=dtype)
    fresh.load(tmp_path / "ckpt.safetensors")
    second = fresh.fit(feeds2, steps=5, progress=False)

    _same_losses(first + second, ref, backend)
    assert fresh.step == 10 and fresh.history == first + second
    for name, value in ref_tr.params.items():
        if backend == "numpy":
            np.testing.assert_array_equal(fresh.params[name], value, err_msg=name)
        else:
            np.testing.assert_allclose(fresh.params[name], value, rtol=1e-5, atol=1e-6, err_msg=name)


def test_the_file_names_its_tensors_and_says_what_trained_them(tmp_path):
    tr, feeds = _trainer("adamw+cosine")
    tr.fit(feeds, steps=5, progress=False)
    path = tmp_path / "ckpt.safetensors"
    tr.save(path)
    with safe_open(str(path), framework="numpy") as f:
        names, meta = set(f.keys()), f.metadata()
        history = f.get_tensor("@trainer/history")
    params = {"l1.weight", "l1.bias", "l2.weight", "l2.bias"}
    state = {f"@optimizer/adamw.{k}[{p}]" for k in "mv" for p in params}
    assert names == params | state | {"@trainer/history"}
    assert history.tolist() == tr.history
    assert meta["format"] == "asgteach" and meta["format_version"] == str(CHECKPOINT_VERSION)
    assert meta["optimizer"] == "adamw" and meta["optimizer_class"] == "AdamW" and meta["step"] == "5"
    hyper = json.loads(meta["hyperparameters"])
    assert hyper["lr"] == 0.05 and hyper["weight_decay"] == 0.1 and hyper["b1"] == 0.9 and hyper["b2"] == 0.999
    assert json.loads(meta["schedule"]) == {"scheduler": "CosineAnnealingLR", "base_lr": 0.05, "step": 5}
    assert b"pickle" not in path.read_bytes()[:400]


def test_a_weights_only_file_still_loads_and_the_optimizer_starts_fresh(tmp_path):
    """Files written before checkpoints held the optimizer state: the parameters load, the optimizer restarts
    as in a new Trainer (zero moments, step 0, schedule from its start), and a warning says so."""
    tr, feeds = _trainer("adamw+cosine", dropout=False)
    tr.fit(feeds, steps=5, progress=False)
    weights = tr.params
    old = tmp_path / "weights.safetensors"
    save_file(weights, str(old), metadata={"format": "asgteach", "step": "5"})   # what save() wrote before

    other, feeds2 = _trainer("adamw+cosine", seed=3, dropout=False)
    other.fit(feeds2, steps=4, progress=False)
    with pytest.warns(CheckpointWarning, match=r"only parameters.*'adamw'.*starts fresh \(zero state, step 0"):
        other.load(old)
    assert other.step == 0
    for k, v in weights.items():
        np.testing.assert_array_equal(other.params[k], v)
    new, feeds3 = _trainer("adamw+cosine", dropout=False, initial=weights)
    assert other.fit(feeds2, steps=4, progress=False) == new.fit(feeds3, steps=4, progress=False)


@pytest.mark.parametrize("saved,loaded", [("sgd-nesterov+step", "adamw+cosine"), ("adamw+cosine", "rmsprop+warmup")])
def test_another_optimizers_checkpoint_loads_the_parameters_and_says_the_state_is_not_used(tmp_path, saved, loaded):
    src, feeds = _trainer(saved)
    src.fit(feeds, steps=3, progress=False)
    src.save(tmp_path / "ckpt.safetensors")
    tr, feeds2 = _trainer(loaded, seed=5)
    tr.fit(feeds2, steps=2, progress=False)
    file_opt, own_opt, n = src.optimizer.name, tr.optimizer.name, len(src.update.state_in)
    with pytest.warns(CheckpointWarning, match=rf"optimizer '{file_opt}' with {n} state tensors.*'{own_opt}'.*fresh"):
        tr.load(tmp_path / "ckpt.safetensors")
    assert tr.step == 0
    for k, v in src.params.items():
        np.testing.assert_array_equal(tr.params[k], v)


def test_a_float64_value_too_large_for_float32_is_refused_not_loaded_as_inf(tmp_path):
    tr, feeds = _trainer("adamw+cosine")
    before = tr.params
    weights = {k: v.astype(np.float64) for k, v in before.items()}
    weights["l1.bias"][2] = 1e39    # finite in float64; inf once cast to the Trainer's float32
    save_file(weights, str(tmp_path / "big.safetensors"))
    with pytest.raises(at.WeightsFileError, match=r"'l1\.bias'.*not a finite float32"):
        tr.load(tmp_path / "big.safetensors")
    for k, v in before.items():
        np.testing.assert_array_equal(tr.params[k], v)
    # the same in the optimizer state of a full checkpoint
    tr.save(tmp_path / "ckpt.safetensors")
    m = np.full((3, 5), 1e39)
    _rewrite(tmp_path / "ckpt.safetensors", tmp_path / "big_state.safetensors", {"@optimizer/adamw.m[l1.weight]": m})
    with pytest.raises(at.WeightsFileError, match=r"'@optimizer/adamw\.m\[l1\.weight\]'.*not a finite float32"):
        tr.load(tmp_path / "big_state.safetensors")


@pytest.mark.parametrize("backend", ["numpy", "wgpu"])
def test_a_failed_load_changes_nothing(tmp_path, backend):
    """Each damaged file below has valid, different parameters: a load that assigned them before finding the
    damage would change the run. After the refusals, the run goes on exactly as if no load had been tried."""
    backend = _backend(backend)
    ref_tr, feeds = _trainer("adamw+cosine", backend)
    ref = ref_tr.fit(feeds, steps=10, progress=False)
    tr, feeds = _trainer("adamw+cosine", backend)
    first = tr.fit(feeds, steps=5, progress=False)   # (on wgpu the newest values now live on the GPU)

    other, feeds2 = _trainer("adamw+cosine", backend, seed=3)
    other.fit(feeds2, steps=3, progress=False)
    good = tmp_path / "other.safetensors"
    other.save(good)
    bad = tmp_path / "bad.safetensors"
    damages = [
        ({"@optimizer/adamw.v[l2.bias]": np.zeros(2, np.float32)}, {},
         r"'@optimizer/adamw\.v\[l2\.bias\]'.*shape \(2,\).*optimizer state has shape \(1,\)"),
        ({"@optimizer/adamw.m[l2.weight]": np.full((5, 1), np.nan, np.float32)}, {},
         r"'@optimizer/adamw\.m\[l2\.weight\]'.*not a finite"),
        ({}, {"step": "minus one"}, "'step'"),
        ({}, {"rng": '{"bit_generator": "MT19937"}'}, "dropout generator"),
        ({}, {"format_version": "99"}, "newer asgteach"),
    ]
    for tensors, meta, match in damages:
        _rewrite(good, bad, tensors, meta)
        with pytest.raises(at.WeightsFileError, match=match):
            tr.load(bad)
    assert tr.step == 5 and tr.history == first
    second = tr.fit(feeds, steps=5, progress=False)
    _same_losses(first + second, ref, backend)


def test_save_writes_a_new_file_beside_the_old_and_swaps_them(tmp_path, monkeypatch):
    """A save that fails midway (here: the disk fills up) leaves the previous file whole and no debris."""
    tr, feeds = _trainer("adamw+cosine")
    path = tmp_path / "ckpt.safetensors"
    tr.fit(feeds, steps=2, progress=False)
    tr.save(path)
    saved = tr.params
    tr.fit(feeds, steps=2, progress=False)

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space"):
        tr.save(path)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["ckpt.safetensors"]
    fresh, _ = _trainer("adamw+cosine", seed=9)
    fresh.load(path)
    assert fresh.step == 2
    for k, v in saved.items():
        np.testing.assert_array_equal(fresh.params[k], v)
    tr.save(path)   # and a save that works replaces it
    assert os.listdir(tmp_path) == ["ckpt.safetensors"]
    fresh.load(path)
    assert fresh.step == 4


def test_parameter_names_starting_with_at_are_kept_for_the_checkpoint(tmp_path):
    with at.Graph():
        w = at.parameter("@w", (2,), init="ones")
        loss = at.sum(w * w)
    tr = at.Trainer(loss, optimizer=at.optim.SGD(lr=0.1))
    with pytest.raises(at.WeightsFileError, match="'@w'.*rename it"):
        tr.save(tmp_path / "w.safetensors")
    assert not os.listdir(tmp_path)
