"""Shared pieces of the wgpu tests: the loud module-level skip and the parity comparison."""

from __future__ import annotations

import sys
from typing import Any, Sequence

import numpy as np
import pytest

import asgteach as at
from asgteach.backends import BackendUnavailable


def require_adapter() -> None:
    """Skip the calling test module — loudly — only when no Vulkan adapter exists at all."""
    try:
        at.backends.get_backend("wgpu")
    except BackendUnavailable as e:
        msg = f"\n*** wgpu tests SKIPPED: no Vulkan adapter on this machine ***\n*** {e} ***\n"
        print(msg, file=sys.stderr)
        pytest.skip(msg, allow_module_level=True)


def f32_feeds(feeds: dict) -> dict:
    """The feeds as the GPU sees them: floats rounded to float32 (ids unchanged)."""
    return {k: (np.asarray(v, np.float32) if np.asarray(v).dtype.kind == "f" else v) for k, v in feeds.items()}


def reference(outputs: Sequence[at.Tensor], feeds: dict) -> list[np.ndarray]:
    """numpy in float64 on the float32-rounded feeds: what exact arithmetic would give the GPU."""
    f64 = {k: (np.asarray(v, np.float64) if np.asarray(v).dtype.kind == "f" else v)
           for k, v in f32_feeds(feeds).items()}
    return at.run(list(outputs), f64, backend="numpy", on_nan="ignore")


# f32 tolerance: a few units of float32 rounding (eps = 1.2e-7) times the number of
# operations a value went through; atol is relative to the largest |value| of the output,
# because an output's small entries inherit the absolute error of its large ones
# (a sum of 1000 terms of size 1 carries ~1e-5 absolute error even when it is ~0).
RTOL = 2e-5
ATOL = 2e-5


def assert_close(got: np.ndarray, want: np.ndarray, what: str, rtol: float = RTOL, atol: float = ATOL) -> None:
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if want.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    scale = max(1.0, float(np.nanmax(np.abs(want)))) if want.size and np.isfinite(want).any() else 1.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * scale, err_msg=what, equal_nan=True)


def run_both(outputs: Sequence[at.Tensor], feeds: dict, what: str, plans: Sequence[bool] = (True,), **tol: Any) -> None:
    """The GPU's outputs against numpy's, for each plan in ``plans`` (True: optimised, False: plain)."""
    want = reference(outputs, feeds)
    for optimize in plans:
        plan = at.compile(list(outputs), backend="wgpu", optimize=optimize)
        got = plan.run(f32_feeds(feeds), on_nan="ignore")
        name = "optimised" if optimize else "plain"
        for k, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w, f"{what} ({name} plan): output {k} ({outputs[k].op} {outputs[k].shape})", **tol)


#: both GPU plans: the plain one (one kernel per node) and the optimised one (the passes of wgpu_passes)
BOTH_PLANS = (False, True)
