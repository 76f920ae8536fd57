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

Training or evaluation is decided when a graph RUNS, not when it is built (``nn.Module``):
some inputs take a value that the mode decides, not the caller's data. Such an input declares what
it is where it is made (``node.supplied``, an :class:`asgteach.graph.Supplied`), and :func:`mode_feeds`
says which value: a dropout mask (kind ``"dropout_mask"``: a fresh draw in training, ones in
evaluation) and a BatchNorm's flag (``"training_flag"``: 1.0 or 0.0). A BatchNorm's running
statistics (``"running_stat"``) are state, not mode: a Trainer feeds its own; ``run`` feeds what
the caller gives, else their first values (``supplied.fill``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..graph import Graph, Node, ReleasedError
from ..ops.registry import generation as ops_generation
from ..shapes import ShapeError
from ..tensor import Tensor
from .common import FeedError, KernelError, NumericsError, resolve_feeds  # noqa: F401

__all__ = ["get_backend", "available", "describe", "run", "compile", "resident_training", "mode_inputs", "mode_feeds",
           "BackendUnavailable", "FeedError", "KernelError", "NumericsError"]

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
    #: output ids -> the inputs among their ancestors that ``run`` may feed itself (:func:`mode_inputs`)
    modal: dict[tuple[int, ...], tuple[Node, ...]] = field(default_factory=dict)


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
        for ids in [k for k in cache.modal if any(i in released for i in k)]:
            del cache.modal[ids]
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


def resident_training(plan: Any) -> Any:
    """The layer that keeps ``plan``'s parameters and optimizer state on its device between runs
    (:class:`common.ResidentTraining`), asked of the plan's backend; None where it has none (numpy).
    A Trainer asks this once, and then runs its steps through the layer."""
    return get_backend(plan.backend).resident_training(plan)


def mode_inputs(graph: Graph, ids: Sequence[int]) -> list[Node]:
    """The inputs ``ids`` depend on whose value a runner supplies (``node.supplied``): dropout masks and
    BatchNorm's training flags (:func:`mode_feeds`) and running statistics, in graph order."""
    return [n for n in (graph.nodes[i] for i in graph.ancestors(list(ids))) if n.supplied is not None]


def mode_feeds(nodes: Sequence[Node], training: bool, rng: np.random.Generator | None = None,
               dtype: Any = np.float32) -> dict[int, np.ndarray]:
    """What the mode feeds ``nodes`` (node id -> array; nodes that are not mode inputs are left out).

    - A dropout mask (``supplied.kind == "dropout_mask"``, ``nn.Dropout``): in training a fresh draw from
      ``rng``, each element kept with probability ``1 - p`` and scaled by ``1 / (1 - p)`` ("inverted
      dropout": the expected value of every activation is what it is without dropout); in evaluation
      ones, so dropout does nothing. A draw advances ``rng``; evaluation draws nothing.
    - A training flag (``"training_flag"``, ``nn.BatchNorm1d``/``2d``): 1.0 in training (the
      batch's statistics), 0.0 in evaluation (the running ones). A flag that refuses training (its
      ``supplied.refuse``: a BatchNorm given one value per channel) raises a ShapeError in training.
    """
    out = {}
    for n in nodes:
        kind = n.supplied.kind if n.supplied is not None else None
        if kind == "dropout_mask":
            p = n.supplied.p
            if training:
                if rng is None:
                    raise ValueError(f"mode_feeds: input '{n.name}' is a dropout mask; training draws it from a "
                                     f"random generator: pass rng=")
                keep = rng.random(n.shape) >= p
                out[n.id] = (keep / (1.0 - p)).astype(dtype)
            else:
                out[n.id] = np.ones(n.shape, dtype)
        elif kind == "training_flag":
            if training and n.supplied.refuse:
                raise ShapeError(n.meta.get("layer_kind", "input"), n.supplied.refuse, (), n.source,
                                 hint="train on batches of 2 or more examples; a batch of one can only be evaluated "
                                      "(at.run(..., training=False), Trainer.run)")
            out[n.id] = np.asarray(1.0 if training else 0.0, dtype)
    return out


def _feeds_for_mode(graph: Graph, ids: tuple[int, ...], feeds: Mapping[Any, Any], training: bool, rng: Any,
                    dtype: Any) -> Mapping[Any, Any]:
    """``feeds`` plus what ``run`` supplies itself: the mode's values and the running statistics not given."""
    cached_plans(graph)   # (prunes the cache of released nodes)
    cache = graph.plan_cache
    nodes = cache.modal.get(ids)
    if nodes is None:
        nodes = cache.modal[ids] = tuple(mode_inputs(graph, ids))
    if not nodes:
        return feeds
    given = resolve_feeds(graph, feeds)
    todo = [n for n in nodes if n.id not in given]
    if not todo:
        return feeds
    if dtype is None:   # the precision the feeds ask for, as the plan picks it (float64 when none is float)
        floats = [a.dtype for a in map(np.asarray, given.values()) if a.dtype.kind == "f"]
        dtype = np.result_type(*floats) if floats else np.float64
    if training and any(n.supplied.kind == "dropout_mask" for n in todo) and not isinstance(rng, np.random.Generator):
        rng = np.random.default_rng(rng)
    extra: dict[Any, Any] = mode_feeds(todo, training, rng, dtype)
    for n in todo:
        if n.supplied.kind == "running_stat":
            extra[n.id] = np.full(n.shape, n.supplied.fill, dtype)
    return {**feeds, **extra}


def run(
    outputs: Tensor | Sequence[Tensor],
    feeds: Mapping[Any, Any] | None = None,
    backend: str = "numpy",
    training: bool = False,
    rng: int | np.random.Generator | None = None,
    **options: Any,
) -> Any:
    """Run the graph: the values of ``outputs`` given ``feeds`` ({Tensor or name: array}).

    Returns a list of numpy arrays (one array if ``outputs`` is a single Tensor).
    Options go to ``Plan.run`` (``dtype=``, ``on_nan=``).

    ``training``: the mode, for the inputs a runner feeds (:func:`mode_feeds`) that ``feeds`` leaves out.
    False (evaluation, the default): dropout masks of ones, BatchNorm normalises with its running
    statistics. True: fresh dropout masks drawn from ``rng`` (a ``np.random.Generator``, which the draw
    advances, or a seed; None: fresh entropy, as PyTorch without ``manual_seed``), BatchNorm with the
    batch's statistics. BatchNorm's running statistics are the ones fed by name
    (``{"bn.running_mean": ..., **trainer.buffers}``), else a fresh layer's (mean 0, variance 1); ``run``
    updates nothing, in either mode: a Trainer keeps the running statistics (``trainer.buffers``).
    """
    single = isinstance(outputs, Tensor)
    outs = [outputs] if single else list(outputs)
    plan = compile(outs, backend)
    feeds = _feeds_for_mode(plan.graph, tuple(t.node_id for t in outs), feeds or {}, training, rng,
                            options.get("dtype"))
    values = plan.run(feeds, **options)
    return values[0] if single else values
