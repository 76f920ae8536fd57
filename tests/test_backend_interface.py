"""Every backend implements one small interface, and shares its feed checks and errors (issue 12, section 2).

``asgteach.backends.common`` holds the Protocols (``Backend``: a module with ``NAME`` and
``compile(graph, outputs) -> Plan``; ``Plan``: ``graph``, ``outputs``, ``run(feeds, ...)``),
the errors and the feed helpers. The backends, gradcheck, the Trainer, the widgets and the
lessons take the helpers from there, never from the numpy backend.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pathlib

import numpy as np
import pytest

import asgteach as at
from asgteach.backends import BackendUnavailable, common, numpy_backend, reference

from wgpu_helpers import need_gpu

PACKAGE = pathlib.Path(at.__file__).parent
SHARED = {"FeedError", "KernelError", "NumericsError", "resolve_feeds", "feed_array", "missing_feed_error"}


def _backend_modules() -> list:
    modules = [numpy_backend, reference]
    try:
        modules.append(at.backends.get_backend("wgpu"))
    except BackendUnavailable:
        modules.append(importlib.import_module("asgteach.backends.wgpu_backend"))   # conforms even with no adapter
    return modules


@pytest.mark.parametrize("module", _backend_modules(), ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_backend_modules_conform(module) -> None:
    assert isinstance(module, common.Backend), f"{module.__name__} lacks NAME or compile"
    assert isinstance(module.NAME, str)
    inspect.signature(module.compile).bind("graph", [0])        # compile(graph, outputs)
    run = inspect.signature(module.Plan.run)
    run.bind("plan", {"x": 1}, params=None, dtype=None, on_nan="raise")   # run(feeds, params=, dtype=, on_nan=)


@pytest.mark.parametrize("name", ["numpy", "wgpu"])
def test_compiled_plans_conform_and_agree_with_the_reference(name: str) -> None:
    module = need_gpu() if name == "wgpu" else at.backends.get_backend(name)
    with at.Graph() as g:
        x = at.input("x", (2, 3))
        w = at.parameter("w", (3, 2))
        y = at.sum(at.tanh(x @ w) ** 2)
        dw = at.grad(y, w)
    feeds = {x: np.linspace(-1, 1, 6).reshape(2, 3).astype(np.float32), w: np.ones((3, 2), np.float32)}
    plan = module.compile(g, [y.node_id, dw.node_id])
    assert isinstance(plan, common.Plan)
    assert plan.graph is g and list(plan.outputs) == [y.node_id, dw.node_id]
    want = reference.compile(g, [y.node_id, dw.node_id]).run(feeds)
    for got, ref in zip(plan.run(feeds), want):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    with pytest.raises(common.FeedError, match="missing feed for input 'x'"):   # a fresh plan: nothing held
        module.compile(g, [y.node_id]).run({w: feeds[w]})


def test_public_error_names_are_the_common_classes() -> None:
    for name in ("FeedError", "KernelError", "NumericsError"):
        cls = getattr(common, name)
        assert getattr(at, name) is cls and getattr(at.backends, name) is cls
        assert getattr(numpy_backend, name) is cls   # the old import path still works


def _imports_of_shared_helpers_from_numpy_backend(path: pathlib.Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("numpy_backend"):
            found += [f"{path.name}:{node.lineno} imports {a.name}" for a in node.names if a.name in SHARED]
        elif (isinstance(node, ast.Attribute) and node.attr in SHARED and isinstance(node.value, ast.Name)
              and node.value.id == "numpy_backend"):
            found.append(f"{path.name}:{node.lineno} uses numpy_backend.{node.attr}")
    return found


def test_feed_helpers_and_errors_come_from_common() -> None:
    users = [PACKAGE / "backends" / "wgpu_backend.py", PACKAGE / "backends" / "__init__.py", PACKAGE / "gradcheck.py",
             PACKAGE / "nn" / "trainer.py", *sorted((PACKAGE / "widgets").glob("*.py")),
             *sorted((PACKAGE / "lessons").glob("*.py"))]
    found = [f for path in users for f in _imports_of_shared_helpers_from_numpy_backend(path)]
    assert not found, "take these from asgteach.backends.common:\n" + "\n".join(found)
