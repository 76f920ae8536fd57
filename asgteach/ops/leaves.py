"""The leaves of a graph: inputs (fed at run time), parameters (learned) and constants.

Leaves have no kernel: their values come from outside — ``feeds`` for inputs and
parameters, the graph itself for constants.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..graph import Graph, default_graph, user_source
from ..shapes import ShapeError
from ..tensor import Tensor
from .registry import OpSpec, register

__all__ = ["input", "parameter", "constant", "KNOWN_INITS"]

#: Initialiser names a parameter may carry (the nn issue implements them in at.init).
KNOWN_INITS = (
    "zeros", "ones", "normal", "uniform", "xavier_uniform", "xavier_normal", "glorot_uniform",
    "glorot_normal", "kaiming_uniform", "kaiming_normal",
)


def _no_infer(*shapes: Any, **attrs: Any) -> tuple[int, ...]:
    raise TypeError("leaves are created by at.input / at.parameter / at.constant")


for _name, _doc in (
    ("input", "A value fed at run time (data, targets)."),
    ("parameter", "A learned value: fed at run time or held by a Trainer; carries layer/role/init."),
    ("constant", "A fixed value stored in the graph."),
):
    register(OpSpec(_name, _name, 0, _no_infer, None, leaf=True, input_kinds="any", doc=_doc))


def _kind(dtype: Any) -> str:
    # isinstance first: np.dtype("float64") == "float" is True in numpy, which would
    # leave a numpy dtype object (not the kind string) on the node
    if isinstance(dtype, str) and dtype in ("float", "int"):
        return dtype
    try:
        k = np.dtype(dtype).kind
    except TypeError:
        raise TypeError(f"dtype must be 'float', 'int' or a numpy dtype, got {dtype!r}") from None
    if k == "f":
        return "float"
    if k in "iu":
        return "int"
    raise TypeError(f"asgteach holds float or int values; dtype {dtype!r} is neither")


def _check_shape(op: str, shape: Sequence[int], source: str) -> tuple[int, ...]:
    if isinstance(shape, int):
        shape = (shape,)
    try:
        out = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise ShapeError(op, f"shape must be a tuple of ints, got {shape!r}", (), source) from None
    if any(d < 0 for d in out):
        raise ShapeError(op, f"shape {out} has a negative size", (), source)
    return out


def input(name: str, shape: Sequence[int], dtype: Any = "float", graph: Graph | None = None) -> Tensor:
    """A placeholder fed at run time: ``x = at.input("x", (4, 3))``.

    ``dtype`` is "float" (float32 or float64, chosen by what you feed) or "int"
    (e.g. token ids for ``embedding``).
    """
    source = user_source()
    g = graph or default_graph()
    node = g.add_node("input", (), {}, _check_shape("input", shape, source), _kind(dtype), name=name, source=source)
    return Tensor(g, node.id)


def parameter(
    name: str,
    shape: Sequence[int],
    init: str = "xavier_uniform",
    layer: str | None = None,
    role: str | None = None,
    graph: Graph | None = None,
    layer_kind: str | None = None,
    **init_args: Any,
) -> Tensor:
    """A learned tensor: ``w = at.parameter("w", (3, 2), init="xavier_uniform")``.

    ``layer`` (e.g. "mlp.0"), ``layer_kind`` (e.g. "Linear"), ``role`` (e.g. "weight")
    and ``init`` are kept as metadata so the inspector can say what this parameter is
    for without parsing its name. ``init_args`` (e.g. ``std=0.02``) go to the initialiser.
    """
    source = user_source()
    if init not in KNOWN_INITS:
        raise ValueError(f"parameter {name!r}: unknown init {init!r}; known: {', '.join(KNOWN_INITS)}\n  at {source}")
    g = graph or default_graph()
    meta = {"init": init, "layer": layer, "layer_kind": layer_kind, "role": role, "init_args": dict(init_args)}
    node = g.add_node(
        "parameter", (), {}, _check_shape("parameter", shape, source), "float", name=name, source=source, meta=meta,
    )
    return Tensor(g, node.id)


def constant(value: Any, name: str | None = None, graph: Graph | None = None, source: str | None = None) -> Tensor:
    """A fixed value stored in the graph: ``at.constant(np.ones(3))``, or a scalar.

    Float constants follow the run's precision (a float64 constant in a float32 run is
    used as float32), so mixing in ``np.ones(3)`` never silently upgrades a float32 run.
    """
    source = source or user_source()
    arr = np.asarray(value)
    kind = _kind(arr.dtype) if arr.dtype.kind != "b" else "float"
    arr = arr.astype(np.float64 if kind == "float" else np.int64, copy=True)
    arr.setflags(write=False)
    if name is None:
        name = _short(arr)
    g = graph or default_graph()
    node = g.add_node("constant", (), {}, arr.shape, kind, name=name, source=source)
    g.constants[node.id] = arr
    return Tensor(g, node.id)


def _short(arr: np.ndarray) -> str:
    """A label for a constant: its value when tiny, else 'const'."""
    if arr.size == 1:
        v = arr.reshape(()).item()
        return f"{v:g}" if isinstance(v, float) else str(v)
    if arr.size <= 4:
        return np.array2string(arr, precision=3, separator=",")
    return "const"
