"""Lesson 11's checks (backends): a kernel's arithmetic, against the backend's own.

The wgpu backend reads broadcast inputs by strides (0 along a broadcast axis) and launches its threads
in a grid of workgroups. Each exercise rewrites one of those functions, and each check compares it with
the backend's own (or numpy's broadcasting) on shapes and sizes the lesson never used.

The exercises' conventions are the backend's own, so no case tells an answer that hands the work back to
``asgteach.backends.wgpu_kernels.broadcast_strides`` / ``groups_for`` from one that does it: what keeps them
out is ``RULES`` (every answer of this lesson is plain Python or numpy, as the notebook says): no ``at``, no
``asgteach`` import, no name or attribute of the backend's functions. The judge of a graded course reads
it from the answer cells; in a student's own kernel the checks read it from the function's source
(:func:`asgteach.grading.rules.enforce`) and also watch what the function runs, with the backend's
function switched off (:func:`~asgteach.grading.checks.without`) and its code refused
(:func:`asgteach.grading.calls.refusing_calls`), so a default argument or a closure holding it fails too.

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
from ..grading.rules import STAND_INS, Rule, enforce
from .common import borrowed

__all__ = ["LESSON", "RULES", "broadcast_strides_check", "offset_check", "groups_check"]

LESSON = "11-backends"

#: what an answer that hands the work to the backend cannot avoid writing: asgteach (``at``, an import), the
#: backend's module and functions (also the lesson's ``dispatches_for``, which lowers a node to its dispatch)
_BACKEND_NAMES = frozenset({"at", "asgteach", "wgpu_kernels", "broadcast_strides", "groups_for", "dispatches_for"})
_BACKEND_ATTRS = frozenset({"backends", "wgpu_kernels", "broadcast_strides", "contiguous_strides", "groups_for"})


def _plain(why: str) -> Rule:
    return Rule(why=why, imports=STAND_INS | {"asgteach"}, names=_BACKEND_NAMES, attrs=_BACKEND_ATTRS)


#: exercise -> what its answer may not use (the notebook's text states it): the lesson's answers are plain Python
#: or numpy, so an answer that names asgteach hands the work to the backend, which the checks compare with
RULES: dict[int, Rule] = {
    1: _plain("write the strides yourself, in plain Python or numpy: an answer that uses asgteach (at, an import, "
              "the backend's broadcast_strides) hands the work to the backend the check compares with"),
    2: _plain("write offset_of yourself, in plain Python or numpy: this lesson's answers use no asgteach (at, an "
              "import, the backend's functions), which would hand the work to the backend"),
    3: _plain("write the grid yourself, in plain Python or numpy: an answer that uses asgteach (at, an import, "
              "the backend's groups_for) hands the work to the backend the check compares with"),
}


def _refuse_borrowed(fn: Any, name: str, *originals: Any) -> None:
    found = borrowed(fn, *originals)
    if found:
        raise ExerciseError(f"{name} hands the work to the backend's own function (as {found!r}): write it yourself")


def broadcast_strides_check(fn: Callable[..., Any]) -> None:
    """``fn(shape, out_shape)``: the element strides of ``shape`` read as ``out_shape`` (0 along broadcast axes)."""
    from ..backends import wgpu_kernels as wk

    original = wk.broadcast_strides
    _refuse_borrowed(fn, "my_broadcast_strides", original)
    enforce(fn, RULES[1], "my_broadcast_strides")
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
    enforce(fn, RULES[2], "my_offset_of")
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
    enforce(fn, RULES[3], "my_groups")
    sizes = (1, 15, 256, 257, 10 ** 6, 65535 * 256, 65535 * 256 + 1, 40_000_000, 123_456_789)
    expected = [np.array(original(-(-n // 256))) for n in sizes]
    why = "compute the grid yourself"
    with without(attrs=[(wk, "groups_for")], why=why), refusing_calls("my_groups", original, why=why):
        check_function(fn, [((n,), e) for n, e in zip(sizes, expected)], name="my_groups")
    gx, gy, _ = wk.groups_for(-(-10 ** 6 // 256))
    check_equal(idle_threads, gx * gy * 256 - 10 ** 6, name="idle_threads",
                hint="threads launched (groups x 256) minus the 10**6 elements")
