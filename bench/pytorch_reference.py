"""Write PyTorch's answers for issue 35's items into tests/fixtures/pytorch/*.npz (float64, fixed seeds).

Why files: the project's rule is "no PyTorch at runtime or in the tests" (our own gradcheck and finite
differences are the oracle; PyTorch is only the ``bench`` extra), while issue 35 asks that each item be
compared with PyTorch itself. So PyTorch runs only here, by hand, and writes small reference files;
``tests/test_pytorch_reference.py`` reads them with numpy and never imports torch (a test there checks
that no file under tests/ does). Re-run this script after changing what it computes, and commit the files.

What it writes (bench/README.md, "PyTorch reference files", lists every key):

- ``batchnorm.npz``: ``torch.nn.BatchNorm1d`` on (N, C) and (N, C, L), ``torch.nn.BatchNorm2d`` on
  (N, C, H, W): 4 training steps (the outputs, running_mean / running_var after each step, and the gradients
  of ``sum(out * R)`` with respect to x, weight and bias), then one batch in eval mode.
- ``recurrent.npz``: ``torch.nn.GRUCell`` and ``torch.nn.LSTMCell`` (input 3, hidden 4, batch 2): PyTorch's
  parameters in PyTorch's layout ((G*H, in), (G*H, H), (G*H,)), the inputs, the outputs and the gradients
  with respect to the inputs and every parameter.
- ``vmap.npz``: per-example gradients of a small tanh MLP from ``torch.func.vmap(torch.func.grad(loss))``,
  and a whole Jacobian from ``torch.func.vmap(vjp_fn)`` over the rows of the identity.
- ``stop_gradient.npz``: ``sum(x * x.detach())`` and a truncated-BPTT recurrence
  ``h_{t+1} = tanh(W h_t.detach() + x_t)``, with and without the detach.

Every array is a plain numeric array (scalars such as momentum are 0-d arrays): the tests load them with
``np.load(..., allow_pickle=False)``. The files are ``.npz`` files as ``np.savez`` writes them, except that
each member's zip timestamp is fixed (``np.savez`` stamps the current time, so its bytes change from one run
to the next): running the script again on the same machine and versions gives byte-identical files
(``--check`` verifies that without writing). Other CPUs or PyTorch versions may differ in the last bits of a
few values, far below the tests' tolerances.

Run with any Python that has torch and numpy (not the project's .venv, which has no torch)::

    python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch==2.13.0 numpy
    /tmp/torchvenv/bin/python bench/pytorch_reference.py            # writes tests/fixtures/pytorch/
    /tmp/torchvenv/bin/python bench/pytorch_reference.py --check    # recomputes, compares bytes, writes nothing
"""

from __future__ import annotations

import argparse
import io
import sys
import zipfile
from pathlib import Path
from typing import Callable

import numpy as np
import torch

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "pytorch"
BN_STEPS = 4
#: (key prefix, torch class, x shape, momentum, eps); the third uses other values than the defaults
BN_CASES = [
    ("bn1d_nc", torch.nn.BatchNorm1d, (6, 3), 0.1, 1e-5),
    ("bn1d_ncl", torch.nn.BatchNorm1d, (3, 2, 4), 0.1, 1e-5),
    ("bn2d", torch.nn.BatchNorm2d, (2, 2, 3, 3), 0.3, 1e-3),
]
RNN_IN, RNN_HIDDEN, RNN_BATCH = 3, 4, 2


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy().astype(np.float64, copy=True)


def _t(a: np.ndarray, grad: bool = False) -> torch.Tensor:
    return torch.tensor(a, dtype=torch.float64, requires_grad=grad)


def _x(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Data with a different scale and offset per channel (axis 1), so the statistics are far from 0 and 1."""
    scale = rng.uniform(0.5, 3.0, (1, shape[1]) + (1,) * (len(shape) - 2))
    offset = rng.uniform(-2.0, 2.0, (1, shape[1]) + (1,) * (len(shape) - 2))
    return rng.standard_normal(shape) * scale + offset


# --- batchnorm.npz ---------------------------------------------------------------------------------------------
def batchnorm() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3501)
    out: dict[str, np.ndarray] = {}
    for prefix, cls, shape, momentum, eps in BN_CASES:
        c = shape[1]
        bn = cls(c, eps=eps, momentum=momentum).double()
        weight, bias = rng.uniform(0.5, 2.0, c), rng.standard_normal(c)
        with torch.no_grad():
            bn.weight.copy_(_t(weight))
            bn.bias.copy_(_t(bias))
        xs = np.stack([_x(rng, shape) for _ in range(BN_STEPS)])
        rs = rng.standard_normal((BN_STEPS, *shape))
        outs, means, vars_, gx, gw, gb = [], [], [], [], [], []
        bn.train()
        for step in range(BN_STEPS):
            x = _t(xs[step], grad=True)
            y = bn(x)
            (y * _t(rs[step])).sum().backward()
            outs.append(_np(y))
            means.append(_np(bn.running_mean))
            vars_.append(_np(bn.running_var))
            gx.append(_np(x.grad))
            gw.append(_np(bn.weight.grad))
            gb.append(_np(bn.bias.grad))
            bn.zero_grad(set_to_none=True)
        bn.eval()
        x_eval = _x(rng, shape)
        with torch.no_grad():
            y_eval = bn(_t(x_eval))
        out.update({
            f"{prefix}_momentum": np.array(momentum), f"{prefix}_eps": np.array(eps),
            f"{prefix}_weight": weight, f"{prefix}_bias": bias,
            f"{prefix}_x_train": xs, f"{prefix}_r": rs,
            f"{prefix}_out_train": np.stack(outs),
            f"{prefix}_running_mean": np.stack(means), f"{prefix}_running_var": np.stack(vars_),
            f"{prefix}_grad_x": np.stack(gx), f"{prefix}_grad_weight": np.stack(gw),
            f"{prefix}_grad_bias": np.stack(gb),
            f"{prefix}_x_eval": x_eval, f"{prefix}_out_eval": _np(y_eval),
        })
    return out


# --- recurrent.npz ---------------------------------------------------------------------------------------------
PARAMS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")


def _cell_params(cell: torch.nn.Module, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """PyTorch's own layout; values drawn from numpy (wider than the default init, so the gates saturate less
    uniformly and every term matters)."""
    values = {}
    for name in PARAMS:
        p = getattr(cell, name)
        values[name] = rng.uniform(-0.8, 0.8, tuple(p.shape))
        with torch.no_grad():
            p.copy_(_t(values[name]))
    return values


def recurrent() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3502)
    out: dict[str, np.ndarray] = {}
    # GRUCell: h' = cell(x, h); loss sum(h' * r)
    gru = torch.nn.GRUCell(RNN_IN, RNN_HIDDEN).double()
    params = _cell_params(gru, rng)
    x, h = rng.standard_normal((RNN_BATCH, RNN_IN)), rng.standard_normal((RNN_BATCH, RNN_HIDDEN))
    r = rng.standard_normal((RNN_BATCH, RNN_HIDDEN))
    tx, th = _t(x, grad=True), _t(h, grad=True)
    h_next = gru(tx, th)
    (h_next * _t(r)).sum().backward()
    out.update({f"gru_{k}": v for k, v in params.items()})
    out.update({"gru_x": x, "gru_h": h, "gru_r": r, "gru_h_next": _np(h_next),
                "gru_grad_x": _np(tx.grad), "gru_grad_h": _np(th.grad)})
    out.update({f"gru_grad_{k}": _np(getattr(gru, k).grad) for k in PARAMS})
    # LSTMCell: (h', c') = cell(x, (h, c)); two losses, sum(h' * r_h) and sum(c' * r_c), each differentiated alone
    lstm = torch.nn.LSTMCell(RNN_IN, RNN_HIDDEN).double()
    params = _cell_params(lstm, rng)
    x, h, c = (rng.standard_normal((RNN_BATCH, n)) for n in (RNN_IN, RNN_HIDDEN, RNN_HIDDEN))
    r_h, r_c = rng.standard_normal((RNN_BATCH, RNN_HIDDEN)), rng.standard_normal((RNN_BATCH, RNN_HIDDEN))
    out.update({f"lstm_{k}": v for k, v in params.items()})
    out.update({"lstm_x": x, "lstm_h": h, "lstm_c": c, "lstm_r_h": r_h, "lstm_r_c": r_c})
    for which in ("h", "c"):
        lstm.zero_grad(set_to_none=True)
        tx, th, tc = _t(x, grad=True), _t(h, grad=True), _t(c, grad=True)
        h_next, c_next = lstm(tx, (th, tc))
        loss = (h_next * _t(r_h)).sum() if which == "h" else (c_next * _t(r_c)).sum()
        loss.backward()
        out.update({"lstm_h_next": _np(h_next), "lstm_c_next": _np(c_next)})
        out.update({f"lstm_d{which}_grad_x": _np(tx.grad), f"lstm_d{which}_grad_h": _np(th.grad),
                    f"lstm_d{which}_grad_c": _np(tc.grad)})
        out.update({f"lstm_d{which}_grad_{k}": _np(getattr(lstm, k).grad) for k in PARAMS})
    return out


# --- vmap.npz --------------------------------------------------------------------------------------------------
MLP = ("w1", "b1", "w2", "b2")


def mlp_net(p: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """tanh(x @ w1 + b1) @ w2 + b2, x one example (d,): the same layout as asgteach's (x @ w)."""
    return torch.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


def jac_fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """R^4 -> R^3 with ops asgteach has: softmax(tanh(x) @ w) * sum(x * x)."""
    return torch.softmax(torch.tanh(x) @ w, dim=-1) * torch.sum(x * x)


def vmap_case() -> dict[str, np.ndarray]:
    from torch.func import grad, vjp, vmap

    rng = np.random.default_rng(3503)
    n, d, hidden, k = 5, 3, 4, 2
    values = {"w1": rng.standard_normal((d, hidden)), "b1": rng.standard_normal(hidden),
              "w2": rng.standard_normal((hidden, k)), "b2": rng.standard_normal(k)}
    X, Y = rng.standard_normal((n, d)), rng.standard_normal((n, k))
    params = {name: _t(v) for name, v in values.items()}

    def loss(p: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.mean((mlp_net(p, x) - y) ** 2)     # one example's loss

    per = vmap(grad(loss), in_dims=(None, 0, 0))(params, _t(X), _t(Y))
    per_loss = vmap(loss, in_dims=(None, 0, 0))(params, _t(X), _t(Y))
    out = {f"mlp_{name}": v for name, v in values.items()}
    out.update({"mlp_x": X, "mlp_y": Y, "mlp_loss": _np(per_loss)})
    out.update({f"mlp_grad_{name}": _np(per[name]) for name in MLP})
    # the Jacobian: one VJP per row of the identity, all at once
    x0, w = rng.standard_normal(4), rng.standard_normal((4, 3))
    y, vjp_fn = vjp(lambda v: jac_fn(v, _t(w)), _t(x0))
    (J,) = vmap(vjp_fn)(torch.eye(3, dtype=torch.float64))
    out.update({"jac_x": x0, "jac_w": w, "jac_y": _np(y), "jac_J": _np(J)})
    return out


# --- stop_gradient.npz -----------------------------------------------------------------------------------------
TBPTT_T, TBPTT_H = 4, 3


def stop_gradient_case() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3504)
    x = rng.standard_normal(5)
    tx = _t(x, grad=True)
    y = torch.sum(tx * tx.detach())
    y.backward()
    out = {"detach_x": x, "detach_y": _np(y), "detach_grad_x": _np(tx.grad)}
    W = rng.uniform(-0.9, 0.9, (TBPTT_H, TBPTT_H))
    xs, h0 = rng.standard_normal((TBPTT_T, TBPTT_H)), rng.standard_normal(TBPTT_H)
    rs = rng.standard_normal((TBPTT_T, TBPTT_H))
    out.update({"tbptt_w": W, "tbptt_xs": xs, "tbptt_h0": h0, "tbptt_r": rs})
    for name, cut in (("tbptt", True), ("full", False)):
        tW, txs = _t(W, grad=True), _t(xs, grad=True)
        h, hs, loss = _t(h0), [], 0.0
        for t in range(TBPTT_T):           # h_{t+1} = tanh(W h_t + x_t), h_t detached when cut
            h = torch.tanh(tW @ (h.detach() if cut else h) + txs[t])
            hs.append(h)
            loss = loss + torch.sum(h * _t(rs[t]))
        loss.backward()
        out.update({f"{name}_hs": _np(torch.stack(hs)), f"{name}_loss": _np(loss),
                    f"{name}_grad_w": _np(tW.grad), f"{name}_grad_xs": _np(txs.grad)})
    return out


# --- writing ---------------------------------------------------------------------------------------------------
FILES: dict[str, Callable[[], dict[str, np.ndarray]]] = {
    "batchnorm.npz": batchnorm, "recurrent.npz": recurrent, "vmap.npz": vmap_case,
    "stop_gradient.npz": stop_gradient_case,
}


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """The .npz that ``np.savez`` writes (one uncompressed ``<key>.npy`` member per array, no pickle), with a
    fixed timestamp per member and the keys in sorted order, so the same arrays give the same bytes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for key in sorted(arrays):
            a = np.array(arrays[key], order="C")     # (np.ascontiguousarray would make a 0-d array 1-d)
            if a.dtype != np.float64:
                raise TypeError(f"{key}: {a.dtype}; every array of these files is float64")
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            member = io.BytesIO()
            np.lib.format.write_array(member, a, allow_pickle=False)
            zf.writestr(info, member.getvalue())
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=OUT, help=f"folder to write into (default {OUT})")
    ap.add_argument("--check", action="store_true", help="recompute and compare with the files there; write nothing")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)                          # one thread: the same summation order on every run
    torch.use_deterministic_algorithms(True)
    if not args.check:
        args.out.mkdir(parents=True, exist_ok=True)
    differ = []
    for name, make in FILES.items():
        data = npz_bytes(make())
        path = args.out / name
        if args.check:
            same = path.exists() and path.read_bytes() == data
            print(f"{path}: {'identical' if same else 'DIFFERS'}")
            differ += [] if same else [name]
        else:
            path.write_bytes(data)
            print(f"{path}: {len(data):,} bytes")
    print(f"torch {torch.__version__}, numpy {np.__version__}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
