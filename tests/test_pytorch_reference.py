"""Issue 35's items against PyTorch's own numbers, read from files: no PyTorch here.

``bench/pytorch_reference.py`` runs PyTorch 2.13 in float64 from fixed seeds and writes
``tests/fixtures/pytorch/*.npz`` (bench/README.md, "PyTorch reference files", lists what each holds). This
module builds the same computations with asgteach and compares, on numpy in float64 (rtol 1e-10) and on wgpu
in float32 (the feeds rounded to float32; a float32 tolerance). The project's rule stands: no file under
tests/ imports torch (the last test checks), so the suite runs without it; PyTorch is only the ``bench`` extra.

- BatchNorm1d on (N, C) and (N, C, L), BatchNorm2d on (N, C, H, W): 4 training steps through
  ``at.run(..., training=True)``, the running statistics fed by name and read back from the nodes the layer
  names (``node.supplied.next``), each step's output and the gradients of ``sum(out * R)``; then eval mode with the
  statistics of step 4. The same buffers through ``at.Trainer``.
- GRUCell and LSTMCell with PyTorch's parameters, transposed (our layout is ``x @ W``).
- ``at.vmap`` of ``at.grad``: per-example gradients (PyTorch: ``vmap(grad(loss))``), and a Jacobian from
  vmap of a VJP over the rows of the identity (PyTorch: ``vmap(vjp_fn)``).
- ``at.stop_gradient``: ``sum(x * stop_gradient(x))`` and truncated backpropagation through time.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import asgteach as at
from asgteach import nn

from wgpu_helpers import ATOL, RTOL, assert_close

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "pytorch"
BACKENDS = ["numpy", pytest.param("wgpu", marks=pytest.mark.gpu)]
#: numpy runs in float64, as PyTorch did: only rounding differs (seen: 6e-14 relative at most, where 1e-10 is
#: allowed). wgpu runs in float32 on float32-rounded feeds: the project's float32 tolerance (wgpu_helpers: rtol
#: 2e-5, atol 2e-5 times the output's largest |value|, at least 1); seen: under a tenth of it.
TOL = {"numpy": {"rtol": 1e-10, "atol": 1e-12}, "wgpu": {"rtol": RTOL, "atol": ATOL}}
DTYPE = {"numpy": np.float64, "wgpu": np.float32}


def load(name: str, keys: set[str]) -> dict[str, np.ndarray]:
    """The file's arrays (no pickle: plain numbers only), after checking it holds exactly ``keys``."""
    with np.load(FIXTURES / name, allow_pickle=False) as z:
        data = {k: z[k] for k in z.files}
    assert set(data) == keys, (f"{name} holds {sorted(set(data) ^ keys)} unexpectedly or misses them: re-run "
                               f"bench/pytorch_reference.py, or update this test with it")
    assert all(v.dtype == np.float64 for v in data.values()), name
    return data


def feed(backend: str, value: np.ndarray) -> np.ndarray:
    """A float64 fixture as this backend is fed: itself on numpy, rounded to float32 on wgpu."""
    return np.asarray(value, DTYPE[backend])


def check(got: np.ndarray, want: np.ndarray, backend: str, what: str) -> None:
    assert_close(np.asarray(got, np.float64), want, f"{what} [{backend}]", **TOL[backend])


# --- BatchNorm1d / BatchNorm2d ------------------------------------------------------------------------------------
BN_CASES = {"bn1d_nc": nn.BatchNorm1d, "bn1d_ncl": nn.BatchNorm1d, "bn2d": nn.BatchNorm2d}
BN_FIELDS = ("momentum", "eps", "weight", "bias", "x_train", "r", "out_train", "running_mean", "running_var",
             "grad_x", "grad_weight", "grad_bias", "x_eval", "out_eval")
BN_KEYS = {f"{p}_{f}" for p in BN_CASES for f in BN_FIELDS}


def _bn(prefix: str, f: dict[str, np.ndarray]):
    """The layer as PyTorch's was made (same C, eps, momentum), on x and r of the fixture's shape."""
    shape = f[f"{prefix}_x_eval"].shape
    with at.Graph() as g:
        x, r = at.input("x", shape), at.input("r", shape)
        bn = BN_CASES[prefix](shape[1], eps=float(f[f"{prefix}_eps"]), momentum=float(f[f"{prefix}_momentum"]),
                              name="bn")
        y = bn(x)
        loss = at.sum(y * r)
    next_stats = [at.Tensor(g, g.find(f"bn.{s}").supplied.next) for s in ("running_mean", "running_var")]
    return x, r, bn, y, loss, next_stats


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("prefix", BN_CASES)
def test_batchnorm_training_steps_running_statistics_and_eval_are_pytorchs(prefix: str, backend: str) -> None:
    f = load("batchnorm.npz", BN_KEYS)
    x, r, bn, y, loss, next_stats = _bn(prefix, f)
    with x.graph:
        grads = at.grad(loss, [x, bn.weight, bn.bias])
    c = bn.num_features
    params = {"bn.weight": feed(backend, f[f"{prefix}_weight"]), "bn.bias": feed(backend, f[f"{prefix}_bias"])}
    # a fresh layer's statistics, as torch.nn.BatchNorm's; then ours, carried from step to step
    stats = {"bn.running_mean": np.zeros(c, DTYPE[backend]), "bn.running_var": np.ones(c, DTYPE[backend])}
    for step in range(f[f"{prefix}_x_train"].shape[0]):
        feeds = {x: feed(backend, f[f"{prefix}_x_train"][step]), r: feed(backend, f[f"{prefix}_r"][step]),
                 **params, **stats}
        out, mean, var, dx, dw, db = at.run([y, *next_stats, *grads], feeds, backend=backend, training=True)
        what = f"{prefix} training step {step + 1}"
        check(out, f[f"{prefix}_out_train"][step], backend, f"{what}: output")
        check(mean, f[f"{prefix}_running_mean"][step], backend, f"{what}: running_mean")
        check(var, f[f"{prefix}_running_var"][step], backend, f"{what}: running_var")
        for name, g in (("x", dx), ("weight", dw), ("bias", db)):
            check(g, f[f"{prefix}_grad_{name}"][step], backend, f"{what}: d sum(out * R) / d {name}")
        stats = {"bn.running_mean": mean, "bn.running_var": var}
    # evaluation (at.run's default): the running statistics after the last step normalise
    got = at.run(y, {x: feed(backend, f[f"{prefix}_x_eval"]), **params, **stats}, backend=backend)
    check(got, f[f"{prefix}_out_eval"], backend, f"{prefix} eval output")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("prefix", BN_CASES)
def test_batchnorm_buffers_of_a_trainer_are_pytorchs(prefix: str, backend: str) -> None:
    """The Trainer feeds and keeps the running statistics itself (``trainer.buffers``). BatchNorm sits on the
    data, so its statistics do not depend on the weights SGD moves: they follow PyTorch's at every step. The
    first step's loss and update use PyTorch's weights, so they check the gradients too."""
    f = load("batchnorm.npz", BN_KEYS)
    x, r, bn, y, loss, _ = _bn(prefix, f)
    lr = 0.5
    tr = at.Trainer(loss, at.optim.SGD(lr=lr), backend=backend, dtype=DTYPE[backend],
                    initial={"bn.weight": f[f"{prefix}_weight"], "bn.bias": f[f"{prefix}_bias"]})
    assert set(tr.buffers) == {"bn.running_mean", "bn.running_var"}
    for step in range(f[f"{prefix}_x_train"].shape[0]):
        X, R = f[f"{prefix}_x_train"][step], f[f"{prefix}_r"][step]
        got_loss = tr.train_step({x: feed(backend, X), r: feed(backend, R)})
        what = f"{prefix} Trainer step {step + 1}"
        if step == 0:
            check(np.array(got_loss), np.array(np.sum(f[f"{prefix}_out_train"][0] * R)), backend, f"{what}: loss")
            p = tr.params
            for name in ("weight", "bias"):
                want = f[f"{prefix}_{name}"] - lr * f[f"{prefix}_grad_{name}"][0]
                check(p[f"bn.{name}"], want, backend, f"{what}: {name} after SGD")
        b = tr.buffers
        check(b["bn.running_mean"], f[f"{prefix}_running_mean"][step], backend, f"{what}: running_mean")
        check(b["bn.running_var"], f[f"{prefix}_running_var"][step], backend, f"{what}: running_var")


# --- GRUCell / LSTMCell -------------------------------------------------------------------------------------------
PARAMS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
RNN_KEYS = ({f"gru_{k}" for k in (*PARAMS, "x", "h", "r", "h_next", "grad_x", "grad_h")}
            | {f"gru_grad_{k}" for k in PARAMS}
            | {f"lstm_{k}" for k in (*PARAMS, "x", "h", "c", "r_h", "r_c", "h_next", "c_next")}
            | {f"lstm_d{w}_grad_{k}" for w in "hc" for k in ("x", "h", "c", *PARAMS)})


def _ours(torch_value: np.ndarray) -> np.ndarray:
    """A PyTorch cell parameter in our layout: weights (G*H, n) -> (n, G*H) (we compute x @ W); biases as they are."""
    return torch_value.T if torch_value.ndim == 2 else torch_value


def _cell_feeds(f: dict[str, np.ndarray], cell: str, backend: str) -> dict[str, np.ndarray]:
    return {f"{cell}.{k}": feed(backend, _ours(f[f"{cell}_{k}"])) for k in PARAMS}


@pytest.mark.parametrize("backend", BACKENDS)
def test_gru_cell_output_and_gradients_are_pytorchs(backend: str) -> None:
    f = load("recurrent.npz", RNN_KEYS)
    (b, n_in), hidden = f["gru_x"].shape, f["gru_h"].shape[1]
    with at.Graph():
        x, h, r = at.input("x", (b, n_in)), at.input("h", (b, hidden)), at.input("r", (b, hidden))
        cell = nn.GRUCell(n_in, hidden, name="gru")
        h_next = cell(x, h)
        grads = at.grad(at.sum(h_next * r), [x, h, *(getattr(cell, k) for k in PARAMS)])
    feeds = {x: feed(backend, f["gru_x"]), h: feed(backend, f["gru_h"]), r: feed(backend, f["gru_r"]),
             **_cell_feeds(f, "gru", backend)}
    got = at.run([h_next, *grads], feeds, backend=backend)
    check(got[0], f["gru_h_next"], backend, "GRUCell h'")
    for name, g in zip(("x", "h", *PARAMS), got[1:]):
        want = f[f"gru_grad_{name}"]
        check(g, _ours(want) if name in PARAMS else want, backend, f"GRUCell d sum(h' * R) / d {name}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_lstm_cell_outputs_and_gradients_are_pytorchs(backend: str) -> None:
    f = load("recurrent.npz", RNN_KEYS)
    (b, n_in), hidden = f["lstm_x"].shape, f["lstm_h"].shape[1]
    with at.Graph():
        x = at.input("x", (b, n_in))
        h, c, r_h, r_c = (at.input(name, (b, hidden)) for name in ("h", "c", "r_h", "r_c"))
        cell = nn.LSTMCell(n_in, hidden, name="lstm")
        h_next, c_next = cell(x, (h, c))
        wrt = [x, h, c, *(getattr(cell, k) for k in PARAMS)]
        d_h = at.grad(at.sum(h_next * r_h), wrt)       # each loss alone, as the fixture has them
        d_c = at.grad(at.sum(c_next * r_c), wrt)
    feeds = {x: feed(backend, f["lstm_x"]), h: feed(backend, f["lstm_h"]), c: feed(backend, f["lstm_c"]),
             r_h: feed(backend, f["lstm_r_h"]), r_c: feed(backend, f["lstm_r_c"]), **_cell_feeds(f, "lstm", backend)}
    got = at.run([h_next, c_next, *d_h, *d_c], feeds, backend=backend)
    check(got[0], f["lstm_h_next"], backend, "LSTMCell h'")
    check(got[1], f["lstm_c_next"], backend, "LSTMCell c'")
    names = ("x", "h", "c", *PARAMS)
    for which, grads in (("h", got[2:2 + len(names)]), ("c", got[2 + len(names):])):
        for name, g in zip(names, grads):
            want = f[f"lstm_d{which}_grad_{name}"]
            check(g, _ours(want) if name in PARAMS else want, backend, f"LSTMCell d sum({which}' * R) / d {name}")


# --- at.vmap ------------------------------------------------------------------------------------------------------
MLP = ("w1", "b1", "w2", "b2")
VMAP_KEYS = ({f"mlp_{k}" for k in (*MLP, "x", "y", "loss")} | {f"mlp_grad_{k}" for k in MLP}
             | {"jac_x", "jac_w", "jac_y", "jac_J"})


@pytest.mark.parametrize("backend", BACKENDS)
def test_per_example_gradients_are_torch_func_vmap_of_grad(backend: str) -> None:
    f = load("vmap.npz", VMAP_KEYS)
    with at.Graph():
        x, y = at.input("x", f["mlp_x"].shape), at.input("y", f["mlp_y"].shape)
        p = {k: at.parameter(k, f[f"mlp_{k}"].shape) for k in MLP}

        def loss(xi: at.Tensor, yi: at.Tensor) -> at.Tensor:   # ONE example: xi (d,), yi (k,)
            return at.mean((at.tanh(xi @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"] - yi) ** 2)

        per_loss = at.vmap(loss)(x, y)
        per_grad = at.vmap(lambda xi, yi: at.grad(loss(xi, yi), [p[k] for k in MLP]))(x, y)
    feeds = {x: feed(backend, f["mlp_x"]), y: feed(backend, f["mlp_y"]),
             **{p[k]: feed(backend, f[f"mlp_{k}"]) for k in MLP}}
    got = at.run([per_loss, *per_grad], feeds, backend=backend)
    check(got[0], f["mlp_loss"], backend, "per-example losses")
    for k, g in zip(MLP, got[1:]):
        check(g, f[f"mlp_grad_{k}"], backend, f"per-example gradients of {k}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_jacobian_from_vmap_of_a_vjp_is_torch_func_vmap_of_vjp_fn(backend: str) -> None:
    f = load("vmap.npz", VMAP_KEYS)
    with at.Graph():
        x, w = at.input("x", f["jac_x"].shape), at.input("w", f["jac_w"].shape)
        y = at.softmax(at.tanh(x) @ w) * at.sum(x * x)                                   # R^4 -> R^3
        J = at.vmap(lambda seed: at.grad(y, x, seed=seed))(at.constant(np.eye(y.shape[0])))
    got_y, got_J = at.run([y, J], {x: feed(backend, f["jac_x"]), w: feed(backend, f["jac_w"])}, backend=backend)
    check(got_y, f["jac_y"], backend, "f(x)")
    check(got_J, f["jac_J"], backend, "Jacobian (rows: vjp of e_i)")


# --- at.stop_gradient ---------------------------------------------------------------------------------------------
SG_KEYS = ({"detach_x", "detach_y", "detach_grad_x", "tbptt_w", "tbptt_xs", "tbptt_h0", "tbptt_r"}
           | {f"{n}_{k}" for n in ("tbptt", "full") for k in ("hs", "loss", "grad_w", "grad_xs")})


@pytest.mark.parametrize("backend", BACKENDS)
def test_stop_gradient_is_detach(backend: str) -> None:
    f = load("stop_gradient.npz", SG_KEYS)
    with at.Graph():
        x = at.input("x", f["detach_x"].shape)
        y = at.sum(x * at.stop_gradient(x))
        (dx,) = at.grad(y, [x])
    got_y, got_dx = at.run([y, dx], {x: feed(backend, f["detach_x"])}, backend=backend)
    check(got_y, f["detach_y"], backend, "sum(x * detach(x))")
    check(got_dx, f["detach_grad_x"], backend, "d sum(x * detach(x)) / dx (x, not 2x)")


@pytest.mark.parametrize("backend", BACKENDS)
def test_truncated_backpropagation_through_time_is_pytorchs(backend: str) -> None:
    """h_{t+1} = tanh(W stop_gradient(h_t) + x_t): each step's gradient stops at its own input state. The
    same loop without the cut (full BPTT) is in the file too, and its gradients differ: the cut is seen."""
    f = load("stop_gradient.npz", SG_KEYS)
    steps = f["tbptt_xs"].shape[0]
    outs: dict[str, list[at.Tensor]] = {}
    with at.Graph():
        w, xs = at.input("w", f["tbptt_w"].shape), at.input("xs", f["tbptt_xs"].shape)
        h0, r = at.input("h0", f["tbptt_h0"].shape), at.input("r", f["tbptt_r"].shape)
        for name, cut in (("tbptt", True), ("full", False)):
            h, hs, loss = h0, [], None
            for t in range(steps):
                h = at.tanh(w @ (at.stop_gradient(h) if cut else h) + xs[t])
                hs.append(h)
                term = at.sum(h * r[t])
                loss = term if loss is None else loss + term
            outs[name] = [loss, *at.grad(loss, [w, xs]), *hs]
    feeds = {w: feed(backend, f["tbptt_w"]), xs: feed(backend, f["tbptt_xs"]), h0: feed(backend, f["tbptt_h0"]),
             r: feed(backend, f["tbptt_r"])}
    got = at.run([*outs["tbptt"], *outs["full"]], feeds, backend=backend)
    k = len(outs["tbptt"])
    for name, vals in (("tbptt", got[:k]), ("full", got[k:])):
        check(vals[0], f[f"{name}_loss"], backend, f"{name}: loss")
        check(vals[1], f[f"{name}_grad_w"], backend, f"{name}: d loss / d W")
        check(vals[2], f[f"{name}_grad_xs"], backend, f"{name}: d loss / d x_t")
        check(np.stack(vals[3:]), f[f"{name}_hs"], backend, f"{name}: h_1..h_T")
    assert np.abs(f["tbptt_grad_w"] - f["full_grad_w"]).max() > 1e-2, "the fixture must tell the cut from no cut"


# --- the rule: the tests never import torch -----------------------------------------------------------------------
def _torch_imports(tree: ast.AST) -> list[int]:
    """Lines that import torch: ``import torch[.x]``, ``from torch[.x] import ...``, or ``__import__`` /
    ``importlib.import_module`` of a string naming it."""

    def is_torch(name: Any) -> bool:
        return isinstance(name, str) and (name == "torch" or name.startswith("torch."))

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(is_torch(a.name) for a in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and is_torch(node.module):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            fn = node.func
            called = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if called in ("__import__", "import_module") and is_torch(node.args[0].value):
                lines.append(node.lineno)
    return sorted(lines)


def test_no_test_imports_torch() -> None:
    """The project's rule: PyTorch appears only in benchmarks; its numbers reach the tests as the files above."""
    tests = Path(__file__).resolve().parent
    files = sorted(tests.rglob("*.py"))
    assert Path(__file__).resolve() in files
    found = [f"{p.relative_to(tests.parent)}:{line}" for p in files
             for line in _torch_imports(ast.parse(p.read_text(encoding="utf-8"), filename=str(p)))]
    assert not found, f"tests import torch (forbidden; put PyTorch in bench/pytorch_reference.py): {found}"
    # the check itself finds each form
    sample = ("import torch\nimport torch.nn as nn\nfrom torch.func import vmap\nimport importlib\n"
              "importlib.import_module('torch')\n__import__('torch.nn')\nimport torchvision_like\n")
    assert _torch_imports(ast.parse(sample)) == [1, 2, 3, 5, 6]
