"""Reductions: sum, mean, max, var (population, ddof=0), argmax.

Every reduction takes ``axis`` (None = all axes, an int, or a tuple) and ``keepdims``
like numpy. The backward rules all start the same way: put the reduced axes back as
size-1 axes (``reshape``) and broadcast the gradient over them — each input element
contributed to exactly one output element.

They share one batching rule too (``at.vmap``, :func:`_batch_reduce`): reduce the same
per-example axes, each counted past the batch axis, and keep the batch axis out of the
reduction. No transpose is needed: the batch axis stays where it is.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..graph import user_source
from ..shapes import normalize_axes, reduced_shape, single_axis
from ..tensor import Tensor
from . import elementwise as _ew
from . import shape as _shape
from .registry import GPU, BatchContext, OpSpec, Tools, VjpContext, apply, as_tensor, register

__all__ = ["sum", "mean", "max", "var", "argmax"]


def _infer(s: tuple, axis: tuple = (), keepdims: bool = False, **_: Any) -> tuple:
    # at.sum() passes normalised axes; a node built directly with apply() may use negative ones
    return reduced_shape(s, normalize_axes("reduce", tuple(axis), len(s), shape=s), keepdims)


def _count(c: VjpContext) -> int:
    """How many elements each output of the reduction summarises (at least 1).

    Over an empty axis it would be 0; then x has no elements and neither has its
    gradient, so any divisor gives the same (empty) answer: 1 keeps the rule finite.
    """
    x = c.inputs[0]
    return int(np.prod([x.shape[a] for a in c.attrs["axis"]], dtype=np.int64)) or 1  # (max is our op here)


def _expand(c: VjpContext, g: Tensor) -> Tensor:
    """Bring a reduced gradient back to the input's shape: reshape, then broadcast."""
    x = c.inputs[0]
    axes = normalize_axes("reduce", tuple(c.attrs["axis"]), x.ndim, shape=x.shape)
    # Broadcasting adds axes on the left, so when only leading axes were reduced the
    # gradient broadcasts as it is; otherwise first put the reduced axes back as size 1.
    if not c.attrs["keepdims"] and axes != tuple(range(len(axes))):
        g = _shape.reshape(g, reduced_shape(x.shape, axes, True))
    return _shape.broadcast_to(g, x.shape) if g.shape != x.shape else g


def _reduce(name: str, x: Any, axis: Any, keepdims: bool) -> Tensor:
    x = as_tensor(x, op=name)
    axes = normalize_axes(name, axis, x.ndim, user_source(), x.shape)
    return apply(name, x, axis=axes, keepdims=bool(keepdims))


def _kernel(fn):
    def kernel(x: np.ndarray, axis: tuple = (), keepdims: bool = False) -> np.ndarray:
        return np.asarray(fn(x, axis=tuple(axis), keepdims=keepdims), dtype=x.dtype)

    return kernel


def _reduced_axes(s: tuple, axis: tuple = (), **_: Any) -> tuple[int, ...]:
    """The axes a reduction removes, non-negative and sorted (a node built with apply() may say -1)."""
    return tuple(sorted(a % (len(s) or 1) for a in axis))   # (max and sum are this module's ops)


_ATTRS = {"axis": (), "keepdims": False}


def _batch_reduce(c: BatchContext, args: tuple, dims: tuple):
    """The batching rule of every reduction over ``axis`` (a tuple) and of argmax (one int).

    Per-example axis ``a`` is axis ``a`` of the batch when it comes before the batch axis ``d``,
    ``a + 1`` after it. The batch axis is never reduced; without keepdims it moves left by one for
    each reduced axis in front of it.
    """
    (x,), (d,) = args, dims
    n = len(c.in_shapes[0])
    many = isinstance(c.attrs["axis"], (tuple, list))
    axes = tuple(int(a) % n for a in (c.attrs["axis"] if many else (c.attrs["axis"],))) if n else ()
    moved = tuple(a + (a >= d) for a in axes)
    keep = bool(c.attrs["keepdims"])
    out = apply(c.op, x, **{**c.attrs, "axis": moved if many else moved[0]})
    return out, d if keep else d - len([a for a in axes if a < d])   # (sum is this module's op)


# --- sum ------------------------------------------------------------------------------------------
def _sum_vjp(c: VjpContext, g: Tensor):
    return (_expand(c, g),)


def _sum_jvp(c: VjpContext, t):
    return None if t[0] is None else sum(t[0], axis=c.attrs["axis"], keepdims=c.attrs["keepdims"])


# np.add.reduce and np.maximum.reduce are what np.sum and np.max call, minus the wrapper.
register(OpSpec(
    name="sum", category="reduction", arity=1, infer=_infer, numpy=_kernel(np.add.reduce), vjp=_sum_vjp,
    jvp=_sum_jvp, batch=_batch_reduce, attrs=_ATTRS,
    doc="sum over axes",
    gpu=GPU(kernel="reduce", reduced_axes=_reduced_axes), tools=Tools(sample=lambda b: sum(b.x((2, 3, 4)), axis=1)),
))


def sum(x: Any, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Sum over ``axis`` (all axes by default), like ``np.sum``."""
    return _reduce("sum", x, axis, keepdims)


# --- mean -----------------------------------------------------------------------------------------
def _mean_vjp(c: VjpContext, g: Tensor):
    return (_expand(c, g) / float(_count(c)),)


def _mean_jvp(c: VjpContext, t):
    return None if t[0] is None else mean(t[0], axis=c.attrs["axis"], keepdims=c.attrs["keepdims"])


def _mean_kernel(x: np.ndarray, axis: tuple = (), keepdims: bool = False) -> np.ndarray:
    """``np.mean``, step for step, without its Python wrapper (microseconds count in a loop).

    np.mean of float32/float64 sums in the input's precision, then divides by the count
    (an ``intp``) — the same two operations as here, so the result is bit-identical.
    """
    axis = tuple(axis)
    n = 1
    for a in axis:
        n *= x.shape[a]
    if x.dtype.kind != "f" or x.dtype.itemsize < 4 or n == 0:
        return np.asarray(np.mean(x, axis=axis, keepdims=keepdims), dtype=x.dtype)
    total = np.add.reduce(x, axis=axis, keepdims=keepdims)
    if isinstance(total, np.ndarray):
        return np.true_divide(total, np.intp(n), out=total, casting="unsafe")
    # a scalar: np.mean divides in float64 (float32 / intp promotes), as Python's float does
    return np.asarray(float(total) / n, dtype=x.dtype)


register(OpSpec(
    name="mean", category="reduction", arity=1, infer=_infer, numpy=_mean_kernel, vjp=_mean_vjp, jvp=_mean_jvp,
    batch=_batch_reduce, attrs=_ATTRS,
    doc="mean over axes",
    gpu=GPU(kernel="reduce", reduced_axes=_reduced_axes),
    tools=Tools(sample=lambda b: mean(b.x((2, 3, 4)), axis=(0, 2), keepdims=True)),
))


def mean(x: Any, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Tensor:
    """Mean over ``axis``, like ``np.mean``."""
    return _reduce("mean", x, axis, keepdims)


# --- max ------------------------------------------------------------------------------------------
def _max_vjp(c: VjpContext, g: Tensor):
    # The gradient goes to the element(s) that won; ties share it equally.
    x = c.inputs[0]
    winners = _ew.equal(x, _expand(c, c.out))
    count = sum(winners, axis=c.attrs["axis"], keepdims=True)
    return (_expand(c, g) * winners / count,)


register(OpSpec(
    name="max", category="reduction", arity=1, infer=_infer, numpy=_kernel(np.maximum.reduce), vjp=_max_vjp,
    batch=_batch_reduce, attrs=_ATTRS,
    doc="max over axes; the gradient flows to the maximum (split at ties)",
    gpu=GPU(kernel="reduce", reduced_axes=_reduced_axes),
    tools=Tools(sample=lambda b: max(b.distinct((2, 3, 4)), axis=1)),   # no ties: one winner per row
))


def max(x: Any, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Maximum over ``axis``, like ``np.max``."""
    return _reduce("max", x, axis, keepdims)


# --- var ------------------------------------------------------------------------------------------
def _var_vjp(c: VjpContext, g: Tensor):
    # var = mean((x - mu)^2)  ->  d var / dx = 2 (x - mu) / N  (the mu terms cancel)
    x = c.inputs[0]
    centred = x - mean(x, axis=c.attrs["axis"], keepdims=True)
    return (_expand(c, g) * centred * (2.0 / _count(c)),)


register(OpSpec(
    name="var", category="reduction", arity=1, infer=_infer, numpy=_kernel(np.var), vjp=_var_vjp, attrs=_ATTRS,
    batch=_batch_reduce,
    doc="population variance (ddof=0) over axes",
    gpu=GPU(kernel="reduce", reduced_axes=_reduced_axes), tools=Tools(sample=lambda b: var(b.x((2, 3, 4)), axis=-1)),
))


def var(x: Any, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Tensor:
    """Population variance (ddof=0, numpy's default) over ``axis``."""
    return _reduce("var", x, axis, keepdims)


# --- argmax ---------------------------------------------------------------------------------------
def _argmax_infer(s: tuple, axis: int = -1, keepdims: bool = False, **_: Any) -> tuple:
    return reduced_shape(s, (single_axis("argmax", axis, len(s), shape=s),), keepdims)


def _argmax_kernel(x: np.ndarray, axis: int = -1, keepdims: bool = False) -> np.ndarray:
    return np.argmax(x, axis=axis, keepdims=keepdims).astype(np.int64)


register(OpSpec(
    name="argmax", category="reduction", arity=1, infer=_argmax_infer, numpy=_argmax_kernel, out_kind="int",
    not_differentiable="it returns integer positions, which do not change smoothly with x",
    batch=_batch_reduce, attrs={"axis": -1, "keepdims": False},
    doc="index of the maximum along one axis",
    gpu=GPU(kernel="reduce", reduced_axes=lambda s, axis=-1, **_: (axis % (len(s) or 1),)),
    tools=Tools(sample=lambda b: argmax(b.distinct((3, 4)), axis=-1)),
))


def argmax(x: Any, axis: int = -1, keepdims: bool = False) -> Tensor:
    """Index of the maximum along ``axis`` (integer result, not differentiable)."""
    x = as_tensor(x, op="argmax")
    return apply("argmax", x, axis=single_axis("argmax", axis, x.ndim, user_source(), x.shape), keepdims=bool(keepdims))
