"""Check every op of the registry on every backend: the sweep behind ``asgteach check``.

For each op, :mod:`asgteach.opsamples` builds a small graph whose output is that op. Then

* **numpy** — ``at.gradcheck`` in float64: autograd's backward graph against central
  differences of the forward kernel. Ops marked ``not_differentiable`` (``argmax``) only run
  forward; ops marked ``zero_gradient`` (``greater``, ``sign``) are checked to give zeros.
* **wgpu** (when an adapter exists) — *parity*: the forward value and the vector-Jacobian
  product ``r^T J`` (every input's gradient, with a fixed random ``r``) run in float32 on the
  GPU and are compared with numpy in float64 on the same float32-rounded inputs. The
  tolerance is float32's: a few units of its rounding (~1e-7) per operation, so
  ``|gpu - numpy| <= 2e-5 * |numpy| + 2e-5 * max|numpy|``.

A float64 gradient check on the GPU is not possible (WebGPU shaders have no float64), which
is why the GPU is checked against numpy rather than against finite differences.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .autograd import grad
from .backends import run
from .gradcheck import gradcheck
from .ops import leaves
from .ops.registry import REGISTRY
from .opsamples import Sample, sample
from .progress import Progress
from .tensor import Tensor

__all__ = ["OpResult", "check_op", "sweep", "format_table", "RTOL", "ATOL"]

RTOL = 2e-5
ATOL = 2e-5


@dataclass
class OpResult:
    """The verdict for one op: per backend, ``ok`` and a short ``detail`` (error size or what failed)."""

    op: str
    category: str
    results: dict[str, tuple[bool, str]]

    @property
    def ok(self) -> bool:
        return all(ok for ok, _ in self.results.values())


def _numpy_check(s: Sample) -> tuple[bool, str]:
    spec = REGISTRY[s.op]
    if spec.not_differentiable:
        value = run(s.y, s.feeds, backend="numpy")
        return bool(np.all(np.isfinite(np.asarray(value, dtype=np.float64)))), "forward only (not differentiable)"
    rep = gradcheck(s.y, s.xs, s.feeds, progress=False)
    worst = rep.worst
    detail = f"max err {worst.max_abs_err:.1e}"
    if spec.zero_gradient:
        detail += " (zero gradient by design)"
    if not rep.ok:
        bad = [c for c in rep.inputs if not c.ok]
        detail = "; ".join(f"d/d{c.name} off by up to {c.max_abs_err:.2g} (numerical {c.numerical:.4g} vs "
                           f"analytical {c.analytical:.4g})" for c in bad)
        if rep.culprits:
            detail += f"; wrong rule: {rep.culprits[0].op}, input {rep.culprits[0].input_index}"
    return rep.ok, detail


def _vjp_outputs(s: Sample) -> list[Tensor]:
    """``r^T J`` for each differentiable input (r fixed): every backward rule of the op, once."""
    spec = REGISTRY[s.op]
    if spec.not_differentiable or spec.zero_gradient or not s.xs:
        return []
    with s.graph:
        seed = leaves.input("r", s.y.shape)
        grads = grad(s.y, s.xs, seed=seed)
    s.feeds[seed] = np.random.default_rng(7).uniform(-1, 1, s.y.shape)
    return list(grads)


def _close(got: np.ndarray, want: np.ndarray) -> tuple[bool, float]:
    """(within float32 tolerance?, max |got - want| relative to max |want|)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return False, float("inf")
    if want.dtype.kind in "iu":
        return bool(np.array_equal(got, want)), float(np.any(got != want))
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    scale = max(1.0, float(np.max(np.abs(want64)))) if want64.size else 1.0
    diff = np.abs(got64 - want64)
    ok = bool(np.all(diff <= RTOL * np.abs(want64) + ATOL * scale))
    return ok, float(diff.max() / scale) if diff.size else 0.0


def _parity_check(s: Sample, backend: str) -> tuple[bool, str]:
    outs = [s.y, *_vjp_outputs(s)]
    f32 = {k: (v.astype(np.float32) if v.dtype.kind == "f" else v) for k, v in s.feeds.items()}
    f64 = {k: (v.astype(np.float64) if v.dtype.kind == "f" else v) for k, v in f32.items()}
    want = run(outs, f64, backend="numpy", on_nan="ignore")
    got = run(outs, f32, backend=backend, on_nan="ignore")
    worst, ok = 0.0, True
    for g, w in zip(got, want):
        k_ok, err = _close(g, w)
        ok, worst = ok and k_ok, max(worst, err)
    what = "value" if len(outs) == 1 else f"value + {len(outs) - 1} gradient{'s' if len(outs) > 2 else ''}"
    return ok, f"{what}, rel err {worst:.1e}"


def check_op(op: str, backends: Sequence[str] = ("numpy",)) -> OpResult:
    """Check one op on each of ``backends`` ("numpy" = float64 gradcheck, others = parity with numpy)."""
    results: dict[str, tuple[bool, str]] = {}
    for backend in backends:
        try:
            s = sample(op)  # a fresh graph per backend: the parity check appends its VJP nodes
            results[backend] = _numpy_check(s) if backend == "numpy" else _parity_check(s, backend)
        except Exception as e:  # noqa: BLE001 - a crash in one op is that op's failure, not the sweep's
            results[backend] = (False, f"{type(e).__name__}: {str(e).splitlines()[0][:150]}")
    return OpResult(op, REGISTRY[op].category, results)


def sweep(backends: Sequence[str], ops: Sequence[str] | None = None, progress: bool | None = None) -> list[OpResult]:
    """Check ``ops`` (default: every non-leaf op of the registry) on ``backends``, showing progress.

    A bar in a terminal or notebook, plain lines in a log (``asgteach.progress``);
    ``progress=None`` shows it unless ``ASGTEACH_NO_PROGRESS=1``.
    """
    names = list(ops) if ops is not None else [n for n, s in REGISTRY.items() if not s.leaf]
    out: list[OpResult] = []
    with Progress(len(names), "checking ops", "op", show=progress, leave=False) as bar:
        for name in names:
            bar.note(name)
            out.append(check_op(name, backends))
            bar.update(1)
    return out


def format_table(results: Sequence[OpResult], backends: Sequence[str]) -> str:
    """A plain-text table: one row per op, one column per backend ('ok' / 'FAIL' and the detail)."""
    headers = ["op", "category", *(("numpy (float64 gradcheck)" if b == "numpy" else f"{b} (float32 vs numpy)")
                                   for b in backends)]
    rows = [[r.op, r.category, *(f"{'ok  ' if r.results[b][0] else 'FAIL'} {r.results[b][1]}" for b in backends)]
            for r in results]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    lines = [line.rstrip(), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)
