"""The leaves of a graph: inputs (fed at run time), parameters (learned) and constants.

Leaves have no kernel: their values come from outside — ``feeds`` for inputs and
parameters, the graph itself for constants.
"""

from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np

from ..graph import Graph, Supplied, default_graph, source_line_text, user_source
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
    register(OpSpec(name=_name, category=_name, arity=0, infer=_no_infer, numpy=None, leaf=True, input_kinds="any",
                    doc=_doc))


def _kind(dtype: Any, what: str = "", source: str = "") -> str:
    # isinstance first: np.dtype("float64") == "float" is True in numpy, which would
    # leave a numpy dtype object (not the kind string) on the node
    if isinstance(dtype, str) and dtype in ("float", "int"):
        return dtype
    prefix = f"{what}: " if what else ""
    try:
        k = np.dtype(dtype).kind
    except TypeError:
        raise TypeError(_located(f"{prefix}dtype must be 'float', 'int' or a numpy dtype, got {dtype!r}",
                                 source)) from None
    if k == "f":
        return "float"
    if k in "iu":
        return "int"
    raise TypeError(_located(f"{prefix}asgteach holds float or int values; dtype {dtype!r} is neither", source))


def _located(message: str, source: str, hint: str = "") -> str:
    """``message`` followed by the user's ``file:line`` and its text, like a ShapeError's."""
    if source:
        message += f"\n  at {source}"
        line = source_line_text(source)
        if line:
            message += f"\n      {line}"
    return message + (f"\n  what to do: {hint}" if hint else "")


def _is_int(d: Any) -> bool:
    """Python and numpy integers (anything with a lossless ``__index__``), but not bools."""
    if isinstance(d, (bool, np.bool_)):
        return False
    try:
        operator.index(d)
    except TypeError:
        return False
    return True


def _check_shape(op: str, shape: Sequence[int], source: str) -> tuple[int, ...]:
    """``shape`` as a tuple of non-negative ints; ``op`` names the leaf (e.g. "input 'x'").

    Sizes must BE ints (Python or numpy integers): ``int(2.5)`` would quietly make a
    2-element input out of a typo, and ``True`` is a bool that only happens to be 1.
    """
    if _is_int(shape):  # at.input("x", 3): a 1-d shape
        shape = (shape,)
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        raise ShapeError(op, f"shape must be a tuple of ints, got {shape!r} (a {type(shape).__name__})",
                         (), source, hint="write the sizes as a tuple, e.g. (4, 3)")
    shape = tuple(shape)
    for i, d in enumerate(shape):
        if not _is_int(d):
            raise ShapeError(
                op, f"shape must be a tuple of ints: size {i} of {shape!r} is {d!r}, a {type(d).__name__} "
                    "(sizes must be ints)", (), source,
                hint=f"write {int(d)}, not {d!r} (n // 2 keeps an int where n / 2 makes a float)"
                if isinstance(d, float) and d.is_integer() else "sizes count elements: whole numbers, e.g. (4, 3)",
            )
    out = tuple(operator.index(d) for d in shape)
    if any(d < 0 for d in out):
        raise ShapeError(op, f"shape {out} has a negative size (sizes count elements: 0 or more)", (), source)
    return out


def input(name: str, shape: Sequence[int], dtype: Any = "float", graph: Graph | None = None,
          supplied: Supplied | None = None, meta: dict[str, Any] | None = None) -> Tensor:
    """A placeholder fed at run time: ``x = at.input("x", (4, 3))``.

    ``dtype`` is "float" (float32 or float64, chosen by what you feed) or "int"
    (e.g. token ids for ``embedding``). ``supplied`` declares an input whose value the runner
    supplies itself (a dropout mask, a BatchNorm's training flag or running statistic: see
    :class:`asgteach.graph.Supplied`); ``meta`` describes it for views (``asgteach.graph.META_KEYS``).
    """
    source = user_source()
    g = graph or default_graph()
    what = f"input {name!r}"
    node = g.add_node("input", (), {}, _check_shape(what, shape, source), _kind(dtype, what, source), name=name,
                      source=source, supplied=supplied, meta=meta)
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
        "parameter", (), {}, _check_shape(f"parameter {name!r}", shape, source), "float", name=name, source=source,
        meta=meta,
    )
    return Tensor(g, node.id)


def constant(value: Any, name: str | None = None, graph: Graph | None = None, source: str | None = None) -> Tensor:
    """A fixed value stored in the graph: ``at.constant(np.ones(3))``, or a scalar.

    Float constants follow the run's precision (a float64 constant in a float32 run is
    used as float32), so mixing in ``np.ones(3)`` never silently upgrades a float32 run.
    """
    source = source or user_source()
    try:
        arr = to_array(value, "constant", "the value", source)
    except (TypeError, ValueError) as e:
        raise e.with_traceback(None) from None  # the user's line and this function: no inner frames
    kind = _kind(arr.dtype) if arr.dtype.kind != "b" else "float"
    arr = arr.astype(np.float64 if kind == "float" else np.int64, copy=True)
    arr.setflags(write=False)
    if name is None:
        name = _short(arr)
    g = graph or default_graph()
    node = g.add_node("constant", (), {}, arr.shape, kind, name=name, source=source, value=arr)
    return Tensor(g, node.id)


# --- turning a Python value into a constant's array ---------------------------------------------
_NUMBER = (bool, int, float, np.bool_, np.integer, np.floating)


def to_array(value: Any, op: str, what: str, source: str | None = None) -> np.ndarray:
    """``value`` as a numpy array of bools, ints or floats, or an error naming ``op`` and ``what``.

    Numbers, numpy scalars and arrays, and (nested) lists of them are values; ``None``,
    text, dicts, lists holding Tensors are not. numpy would happily turn ``None`` into a NaN
    (``np.asarray(None, dtype=float)``) and ``[[1, 2], [3]]`` into a confusing error, so
    we check first and say which operand of which op, and on which line.
    """
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return value
    arr = None
    if not isinstance(value, (str, bytes)) and value is not None:
        try:
            arr = np.asarray(value)
        except ValueError:  # numpy's "inhomogeneous shape": a ragged nested list
            where = _ragged(value)
            if where:
                raise ShapeError(
                    op, f"{what} {_brief(value)} is a ragged nested list: {where}", (), source or user_source(),
                    hint="every row of a nested list needs the same length (a table, not a jagged list)",
                ) from None
            raise
        except TypeError:  # e.g. a list holding a Tensor
            arr = None
    if arr is not None and arr.dtype.kind in "biuf":
        return arr
    raise TypeError(_located(f"{op}: {what} is {_what_is(value, arr)}, not a number or an array of numbers",
                             source or user_source(), _fix_for(value)))


def _is_row(v: Any) -> bool:
    return isinstance(v, (list, tuple)) or (isinstance(v, np.ndarray) and v.ndim > 0)


def _ragged(value: Any) -> str:
    """Where a nested list stops being a table: "row [0] has 2 items but row [1] has 1"."""
    level = [("", value)]
    while level:
        rows = [(path, v) for path, v in level if _is_row(v)]
        if not rows:
            return ""
        if len(rows) != len(level):
            number = next(path for path, v in level if not _is_row(v))
            return f"item {number} is a number but item {rows[0][0]} is a list"
        first, n = rows[0][0], len(rows[0][1])
        for path, v in rows[1:]:
            if len(v) != n:
                return f"row {first} has {n} items but row {path} has {len(v)}"
        level = [(f"{path}[{i}]", item) for path, v in rows for i, item in enumerate(v)]
    return ""


_ALL_NUMBERS = object()


def _first_bad(value: Any) -> Any:
    """The first item of a (nested) list that is not a number (``_ALL_NUMBERS`` if none)."""
    if isinstance(value, (list, tuple)):
        for item in value:
            bad = _first_bad(item)
            if bad is not _ALL_NUMBERS:
                return bad
        return _ALL_NUMBERS
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "biuf":
            return _ALL_NUMBERS
        return next((v for v in value.flat if not isinstance(v, _NUMBER)), _ALL_NUMBERS)
    return _ALL_NUMBERS if isinstance(value, _NUMBER) else value


def _brief(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _what_is(value: Any, arr: np.ndarray | None) -> str:
    """"None", "a str ('a')", "a list holding a Tensor (...)": the operand, described."""
    if value is None:
        return "None (NoneType)"
    if arr is not None and arr.dtype.kind == "c":
        return f"complex ({_brief(value)}), and asgteach holds real numbers"
    if isinstance(value, (list, tuple, np.ndarray)):
        bad = _first_bad(value)
        if bad is not _ALL_NUMBERS:
            inner = "None" if bad is None else f"a {type(bad).__name__} ({_brief(bad)})"
            return f"a {type(value).__name__} holding {inner}"
    if isinstance(value, int):  # a Python int too large for int64
        return f"the int {_brief(value)}, too large for a 64-bit integer"
    return f"a {type(value).__name__} ({_brief(value)})"


def _fix_for(value: Any) -> str:
    if value is None:
        return "a variable that was never given a value, or a function that returned nothing (no return)?"
    if isinstance(value, (str, bytes)):
        return "text is not a number: convert it first, e.g. float(s)"
    if isinstance(value, (list, tuple)) and isinstance(_first_bad(value), Tensor):
        return "a list of Tensors is not a Tensor: join them with at.concat([...], axis)"
    return "pass a number, a numpy array or a (nested) list of numbers"


def _short(arr: np.ndarray) -> str:
    """A label for a constant: its value when tiny, else 'const'."""
    if arr.size == 1:
        v = arr.reshape(()).item()
        return f"{v:g}" if isinstance(v, float) else str(v)
    if arr.size <= 4:
        return np.array2string(arr, precision=3, separator=",")
    return "const"
