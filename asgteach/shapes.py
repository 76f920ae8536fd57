"""Shape rules: numpy broadcasting, axis normalisation, and the ShapeError they raise.

Shapes are checked when a node is *created*, not when it runs. That is the first payoff
of define-then-run: ``x @ w`` with mismatched inner dimensions fails on the line that
wrote it, before a single number is computed.

Broadcasting (numpy's rule): align shapes on the right; two sizes are compatible when
they are equal or one of them is 1; a missing leading axis counts as 1. So (4, 3) and
(3,) broadcast to (4, 3), while (4, 3) and (4,) do not.
"""

from __future__ import annotations

import operator
from typing import Any, Iterable, Sequence

from .source import source_line_text

__all__ = [
    "ShapeError", "broadcast_shapes", "normalize_axes", "single_axis", "reduced_shape", "Shape",
]

Shape = tuple[int, ...]


class ShapeError(ValueError):
    """A shape rule was broken. The message names the op, the shapes and the user's line."""

    def __init__(self, op: str, message: str, shapes: Sequence[Shape] = (), source: str = "", hint: str = ""):
        self.op, self.shapes, self.source, self.hint = op, tuple(shapes), source, hint
        self.detail = message
        text = f"{op}: {message}"
        if shapes:
            text += "\n  input shapes: " + ", ".join(str(tuple(s)) for s in shapes)
        if source:
            text += f"\n  at {source}"
            line = source_line_text(source)
            if line:
                text += f"\n      {line}"
        if hint:
            text += f"\n  what to do: {hint}"
        super().__init__(text)


def broadcast_shapes(op: str, *shapes: Shape, source: str = "") -> Shape:
    """The numpy-broadcast result of ``shapes``, or a ShapeError naming the clash."""
    ndim = max((len(s) for s in shapes), default=0)
    out: list[int] = []
    for k in range(-ndim, 0):
        sizes = {s[k] for s in shapes if len(s) >= -k}
        sizes.discard(1)
        if len(sizes) > 1:
            raise ShapeError(
                op,
                f"shapes {' and '.join(str(tuple(s)) for s in shapes)} do not broadcast: "
                f"axis {k} has sizes {sorted(sizes)} (sizes must match or be 1, aligned from the right)",
                shapes, source,
                hint="reshape one operand so the axes line up, e.g. x.reshape(-1, 1) to make a column",
            )
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def normalize_axes(
    op: str, axis: int | Iterable[int] | None, ndim: int, source: str = "", shape: Shape = ()
) -> tuple[int, ...]:
    """Turn ``axis`` (None, an int or a sequence, negatives allowed) into sorted non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    try:
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
    except TypeError:  # e.g. axis=1.5
        raise ShapeError(op, f"axis must be None, an int or a tuple of ints, got {axis!r}", (shape,), source) from None
    out = []
    for a in axes:
        if not isinstance(a, int) or isinstance(a, bool):
            raise ShapeError(op, f"axis must be an int or a tuple of ints, got {a!r}", (shape,), source)
        if not -ndim <= a < ndim:
            raise ShapeError(
                op, f"axis {a} is out of range for a {ndim}-d tensor (valid: {-ndim}..{ndim - 1})",
                (shape,), source,
            )
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ShapeError(op, f"axis {axis} repeats an axis", (shape,), source)
    return tuple(sorted(out))


def single_axis(op: str, axis: Any, ndim: int, source: str = "", shape: Shape = ()) -> int:
    """``axis`` as one non-negative int, for ops that work along ONE axis (softmax, argmax, concat).

    ``sum`` can reduce several axes at once; softmax cannot: it normalises along one line
    of numbers. A tuple or None is a ShapeError that says so, not an unpacking error.
    """
    try:  # Python and numpy ints have a lossless __index__; floats, tuples and None do not
        index = None if isinstance(axis, bool) else operator.index(axis)
    except TypeError:
        index = None
    if index is None:
        got = "None" if axis is None else f"{axis!r} (a {type(axis).__name__})"
        hint = "pass one int, e.g. axis=-1 (the last axis)"
        if isinstance(axis, (tuple, list)) and len(axis) > 1 and len(shape) > 1:
            hint = (f"to work over several axes at once, reshape them into one first: "
                    f"x.reshape({shape[0]}, -1) joins every axis after the first")
        raise ShapeError(op, f"takes one axis (an int), got axis={got}", (shape,), source, hint)
    (a,) = normalize_axes(op, index, ndim, source, shape)
    return a


def reduced_shape(shape: Shape, axes: tuple[int, ...], keepdims: bool) -> Shape:
    """The shape after reducing over ``axes`` (kept as size 1 when ``keepdims``)."""
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)
