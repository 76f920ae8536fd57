"""Shared pieces of the wgpu tests (the parity comparison), and the one way a test needs what a machine may lack.

:func:`missing` is how every test says "this machine lacks X": under ``CI=true`` (as ``.ci/run``'s machine,
which ``./scripts/setup`` provisions) it FAILS, saying what to install; elsewhere it skips, loudly (on stderr, and
in the banner ``tests/conftest.py`` prints at the end of the run). :func:`need_gpu` is the GPU's case: tests reach
it through the ``gpu`` marker (``pytestmark = pytest.mark.gpu``, ``@pytest.mark.gpu``,
``pytest.param("wgpu", marks=pytest.mark.gpu)``) or the ``gpu`` fixture, both in ``tests/conftest.py``, so that
only the GPU tests of a module wait on an adapter and its numpy tests always run.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
from types import ModuleType
from typing import Any, NoReturn, Sequence

import numpy as np
import pytest

import asgteach as at
from asgteach.backends import BackendUnavailable

#: how every such skip's reason begins (conftest.py's end-of-run banner collects them)
MISSING = "MISSING ON THIS MACHINE:"
GPU_INSTALL = ("apt-get install mesa-vulkan-drivers libvulkan1 (Mesa's lavapipe, a CPU Vulkan driver), "
               "or ./scripts/setup")


def missing(what: str, install: str, detail: str = "", *, module_level: bool = False) -> NoReturn:
    """This test (or module) cannot run here: ``what`` is absent. Fails under ``CI=true``, else skips loudly."""
    msg = f"{MISSING} {what}. Install: {install}" + (f". ({detail})" if detail else "")
    if os.environ.get("CI") == "true":
        pytest.fail(f"{msg}\nCI=true: the CI machine must have it, so this is a failure, not a skip.", pytrace=False)
    print(f"\n!!!!!!!! SKIPPED: {msg}\n", file=sys.stderr)
    pytest.skip(msg, allow_module_level=module_level)


def need_module(name: str, install: str, *, module_level: bool = False) -> ModuleType:
    """``import name``, or :func:`missing` saying to run ``install``."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        missing(f"the Python module {name}", install, str(e), module_level=module_level)


def need_tool(name: str, install: str) -> str:
    """The path of the program ``name`` on PATH, or :func:`missing` saying to run ``install``."""
    path = shutil.which(name)
    if path is None:
        missing(f"the program {name} (not on PATH)", install)
    return path


_no_gpu: list[str] = []   # why the probe failed, once per process (a failed probe is not cached by asgteach)


def need_gpu() -> ModuleType:
    """The wgpu backend (which has a working Vulkan adapter), or :func:`missing` saying how to get one."""
    if not _no_gpu:
        try:
            return at.backends.get_backend("wgpu")
        except BackendUnavailable as e:
            _no_gpu.append(str(e))
    missing("a Vulkan adapter for the wgpu backend (its tests need one)", GPU_INSTALL, _no_gpu[0])


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
