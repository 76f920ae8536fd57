"""Backends turn a graph into numbers. ``numpy`` always works; ``wgpu`` runs WGSL
shaders on a GPU (or on Mesa's lavapipe CPU Vulkan driver) when an adapter exists.

What running a graph means is ``reference.py``: a dozen lines to read (and step through)
first. Every backend implements the small interface in ``common.py`` (a module with
``NAME`` and ``compile(graph, outputs) -> Plan``; ``plan.run(feeds)``), and takes its feed
checks and errors (``FeedError``, ``KernelError``, ``NumericsError``) from there.

``at.run(outputs, feeds, backend=...)`` compiles a Plan once per (backend, outputs) and
caches it, so calling it in a loop does not recompile. The cache (:class:`PlanCache`) is
this module's business but rides on the graph, in the field it declares for it
(``graph.plan_cache``, which graph.py never reads): a plan refers to its graph, so a cache keyed
weakly by graph here would keep every graph alive through its own plans, while a field dies
with the graph. It forgets the plans of nodes the graph has released (``Graph.collect``), so
re-running a notebook cell does not pile up plans and their buffers.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..graph import Graph, ReleasedError
from ..ops.registry import generation as ops_generation
from ..tensor import Tensor
from .common import FeedError, KernelError, NumericsError  # noqa: F401

__all__ = ["get_backend", "available", "describe", "run", "compile", "BackendUnavailable",
           "FeedError", "KernelError", "NumericsError"]

_MODULES = {"numpy": "asgteach.backends.numpy_backend", "wgpu": "asgteach.backends.wgpu_backend",
            # the reference interpreter itself, as a backend: slow, and every line of it readable
            "reference": "asgteach.backends.reference"}


class BackendUnavailable(RuntimeError):
    """The requested backend cannot run here; the message says how to get it."""


def get_backend(name: str) -> Any:
    """The backend module called ``name`` ("numpy", "wgpu", "reference", or "auto": wgpu if usable, else numpy).

    "reference" runs the reference interpreter (``backends/reference.py``): the dozen lines that say what
    running a graph means, node after node, with the same feed checks and the same NaN report as numpy.
    """
    if name == "auto":
        return get_backend("wgpu") if "wgpu" in available() else get_backend("numpy")
    if name not in _MODULES:
        raise ValueError(f"unknown backend {name!r}; known: {', '.join(_MODULES)} or 'auto'")
    try:
        module = importlib.import_module(_MODULES[name])
    except ImportError as e:
        raise BackendUnavailable(
            f"the {name} backend cannot be loaded ({e}). Install the extra: pip install 'asgteach[gpu]'"
        ) from e
    check = getattr(module, "check_available", None)
    if check is not None:
        check()  # raises BackendUnavailable with instructions
    return module


def available() -> list[str]:
    """Names of the backends that can run on this machine ("reference", the interpreter, always can too)."""
    names = ["numpy"]
    try:
        get_backend("wgpu")
        names.append("wgpu")
    except Exception:  # noqa: BLE001 - any failure means "not available here"
        pass
    return names


def describe() -> dict[str, Any]:
    """What each backend would run on (the wgpu adapter, or why there is none)."""
    info: dict[str, Any] = {"numpy": {"available": True, "numpy": np.__version__}}
    try:
        module = get_backend("wgpu")
        info["wgpu"] = {"available": True, **module.describe()}
    except Exception as e:  # noqa: BLE001
        info["wgpu"] = {"available": False, "reason": str(e)}
    return info


@dataclass
class PlanCache:
    """The plans compiled for one graph, kept in ``graph.plan_cache``, and what they were compiled against."""

    #: (backend name, output ids) -> Plan
    plans: dict[tuple[str, tuple[int, ...]], Any] = field(default_factory=dict)
    #: ``graph.collections`` when the plans were last pruned of released nodes
    collections: int = 0
    #: the op registry's generation the plans were compiled under (``ops.registry.generation``)
    generation: int = 0


def cached_plans(graph: Graph) -> dict[Any, Any]:
    """The plans compiled for ``graph`` that can still be asked for (released ones pruned, and all of them
    dropped when an op was registered or unregistered since: a plan holds the kernels it was compiled with)."""
    cache = graph.plan_cache
    if cache is None:
        cache = graph.plan_cache = PlanCache(collections=graph.collections, generation=ops_generation())
    if cache.generation != ops_generation():  # an op was replaced (a notebook cell re-registered it): compile afresh
        cache.plans.clear()
        cache.generation = ops_generation()
    if cache.collections != graph.collections:  # the graph released nodes since: drop their plans
        released = graph.released
        for key in [k for k in cache.plans if any(i in released for i in k[1])]:
            del cache.plans[key]
        cache.collections = graph.collections
    return cache.plans


def compile(outputs: Sequence[Tensor], backend: str = "numpy", optimize: bool = True) -> Any:  # noqa: A001
    """Compile ``outputs`` into a Plan for ``backend`` (cached per graph, outputs and ``optimize``).

    ``optimize=False`` (wgpu only): the plain plan, one kernel per compute node, before any of the
    optimisation passes (``plan.passes`` lists what they did to the optimised one)."""
    outputs = list(outputs)
    if not outputs:
        raise ValueError("nothing to run: pass at least one output Tensor")
    graph = outputs[0].graph
    for t in outputs:
        if not isinstance(t, Tensor):
            raise TypeError(f"outputs must be Tensors, got {type(t).__name__}")
        if t.graph is not graph:
            raise ValueError("all outputs must belong to one graph")
        if t.node_id in graph.released:  # only a Tensor re-made from a bare id can get here
            raise ReleasedError(f"{t!r} was released by graph.collect(): no live Tensor reached it")
    module = get_backend(backend)
    if not optimize and module.NAME != "wgpu":
        raise ValueError(f"optimize=False asks for the wgpu backend's plain plan; backend {backend!r} has one plan")
    plans = cached_plans(graph)
    key = (module.NAME if optimize else f"{module.NAME} plain", tuple(t.node_id for t in outputs))
    plan = plans.get(key)
    if plan is None:
        ids = [t.node_id for t in outputs]
        plan = module.compile(graph, ids) if optimize else module.compile(graph, ids, optimize=False)
        plans[key] = plan
    return plan


def run(
    outputs: Tensor | Sequence[Tensor],
    feeds: Mapping[Any, Any] | None = None,
    backend: str = "numpy",
    **options: Any,
) -> Any:
    """Run the graph: the values of ``outputs`` given ``feeds`` ({Tensor or name: array}).

    Returns a list of numpy arrays (one array if ``outputs`` is a single Tensor).
    Options go to ``Plan.run`` (``dtype=``, ``on_nan=``).
    """
    single = isinstance(outputs, Tensor)
    outs = [outputs] if single else list(outputs)
    values = compile(outs, backend).run(feeds or {}, **options)
    return values[0] if single else values
