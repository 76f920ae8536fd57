"""Lesson 11's checks (backends): a kernel's arithmetic, against the backend's own.

The wgpu backend reads broadcast inputs by strides (0 along a broadcast axis) and launches its threads
in a grid of workgroups. Each exercise rewrites one of those functions, and each check compares it with
the backend's own on shapes and sizes the lesson never used, while the backend's function is switched off
and watched (:func:`asgteach.grading.calls.refusing_calls`): an answer that hands the work back to it, by
name, default argument or closure, fails with a message that says so.

* Exercise 1: :func:`broadcast_strides_check` (``my_broadcast_strides(shape, out_shape)``);
* Exercise 2: :func:`offset_check` (``my_offset_of(i, out_shape, strides)``), against numpy's own
  broadcasting, element by element;
* Exercise 3: :func:`groups_check` (``my_groups(numel)`` and ``idle_threads``), up to sizes past the
  65535 groups one axis may hold.

(:mod:`asgteach.lessons.kernels` shows the same backend's kernels in the lesson's text.)
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..grading.calls import refusing_calls
from ..grading.checks import check_equal, check_function, without
from ..grading.exercises import ExerciseError
from ..grading.rules import Rule
from .common import borrowed

__all__ = ["LESSON", "RULES", "broadcast_strides_check", "offset_check", "groups_check"]

LESSON = "11-backends"

#: exercise -> what its answer may not use: none beyond the checks' own watch on the backend's functions
RULES: dict[int, Rule] = {}


def _refuse_borrowed(fn: Any, name: str, *originals: Any) -> None:
    found = borrowed(fn, *originals)
    if found:
        raise ExerciseError(f"{name} hands the work to the backend's own function (as {found!r}): write it yourself")


def broadcast_strides_check(fn: Callable[..., Any]) -> None:
    """``fn(shape, out_shape)``: the element strides of ``shape`` read as ``out_shape`` (0 along broadcast axes)."""
    from ..backends import wgpu_kernels as wk

    original = wk.broadcast_strides
    _refuse_borrowed(fn, "my_broadcast_strides", original)
    cases = [((3, 5), (3, 5)), ((1, 5), (3, 5)), ((5,), (3, 5)), ((3, 1), (3, 5)), ((), (2, 3)),
             ((4, 1, 6), (2, 4, 3, 6)), ((1, 1), (1, 1)), ((2, 1, 1), (2, 3, 4)), ((7,), (2, 1, 7))]
    expected = [original(s, o) for s, o in cases]
    why = "compute the strides yourself"
    # the attribute switched off, and the function itself watched: a default argument or a closure holds it too
    with without(attrs=[(wk, "broadcast_strides")], why=why), refusing_calls("my_broadcast_strides", original, why=why):
        for (shape, out_shape), want in zip(cases, expected):
            check_equal(list(fn(shape, out_shape)), want, name=f"my_broadcast_strides({shape}, {out_shape})")


def offset_check(fn: Callable[..., Any]) -> None:
    """``fn(i, out_shape, strides)``: the input element that output element ``i`` reads."""
    for shape, out_shape in [((1, 5), (3, 5)), ((3, 1), (3, 5)), ((4, 1, 6), (2, 4, 3, 6)), ((2, 3), (2, 3)),
                             ((1, 3, 1), (2, 3, 4))]:
        src = np.arange(int(np.prod(shape))).reshape(shape)
        expected = np.broadcast_to(src, out_shape).ravel()     # what the kernel must read, element by element
        st = [int(s) // src.itemsize for s in np.broadcast_to(src, out_shape).strides]   # 0 where broadcast
        check_function(lambda i, o=out_shape, s=st: fn(i, o, s), [((i,), expected[i]) for i in range(expected.size)],
                       name=f"my_offset_of(i, {out_shape}, {st})")


def groups_check(fn: Callable[..., Any], idle_threads: Any) -> None:
    """``fn(numel)``: the workgroup grid for ``numel`` threads in groups of 256; ``idle_threads`` for 10**6."""
    from ..backends import wgpu_kernels as wk

    original = wk.groups_for
    _refuse_borrowed(fn, "my_groups", original)
    sizes = (1, 15, 256, 257, 10 ** 6, 65535 * 256, 65535 * 256 + 1, 40_000_000, 123_456_789)
    expected = [np.array(original(-(-n // 256))) for n in sizes]
    why = "compute the grid yourself"
    with without(attrs=[(wk, "groups_for")], why=why), refusing_calls("my_groups", original, why=why):
        check_function(fn, [((n,), e) for n, e in zip(sizes, expected)], name="my_groups")
    gx, gy, _ = wk.groups_for(-(-10 ** 6 // 256))
    check_equal(idle_threads, gx * gy * 256 - 10 ** 6, name="idle_threads",
                hint="threads launched (groups x 256) minus the 10**6 elements")
