"""Lesson 12's checks (convolution and pooling): max pooling's gradient, routed by hand.

* Exercise 1, ``conv_out_size``: :func:`out_size_check` compares it with ``at.conv2d``'s shape inference, switched
  off while it runs (practice mode); ``RULES[1]`` (from the formula: no asgteach, nor section 1's
  ``conv2d_naive``, nor a class taken from the lesson's objects) is read from its source, in both modes: in graded
  mode the function runs in the sandbox, where switching the judge's library off does nothing.
* Exercise 2, ``grad_weight_np``: checked in the notebook against asgteach's convolution, which is switched off
  while the student's function runs; ``RULES[2]`` keeps the gradient in numpy.
* Exercise 3, ``max_pool_grad(x, g)``: :func:`max_pool_grad_check` runs it on images of the check's own
  (other sizes, ties at random, a window whose first maximum by rows is not its first by columns, four
  equal values, negative numbers) and compares with autograd's own gradient, computed first; the pool's
  ops are switched off while the student's function runs, and ``RULES[3]`` (by hand, no asgteach) is read
  from its source. :func:`max_pool_routing` checks the lesson's ``dX5`` the same way.

This file gives the answers away: try the lesson first.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..grading.checks import check_array, check_function, without
from ..grading.exercises import ExerciseError
from ..grading.rules import STAND_INS, Rule, enforce, no_asgteach
from .common import fresh

__all__ = ["LESSON", "RULES", "out_size_check", "CONV_SETTINGS", "max_pool_routing", "max_pool_grad_check"]

LESSON = "12-convolution-and-pooling"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {
    # the library's conv2d is reached through `at`, or through a class of the lesson's objects (type(conv)(...),
    # conv.__class__, conv.__init__(...)); section 1's conv2d_naive computes the size it returns
    1: Rule(why="from the formula: not the library's conv2d (no at, no asgteach, no type(...), .__class__ or "
                ".__init__ of the lesson's layers), nor section 1's conv2d_naive",
            imports=STAND_INS | {"asgteach"}, names=frozenset({"at", "asgteach", "type", "conv2d_naive"}),
            attrs=frozenset({"__class__", "__init__", "__new__"})),
    2: no_asgteach("with numpy (no other library's convolution gradient)"),
    3: no_asgteach("by hand (no asgteach): the routing of the gradient is the exercise"),
}


#: (size, kernel, stride, padding, dilation) of the convolutions exercise 1's check builds
CONV_SETTINGS = [(8, 3, 1, 0, 1), (8, 3, 1, 1, 1), (8, 3, 2, 1, 1), (9, 3, 2, 0, 1), (28, 5, 3, 2, 1),
                 (10, 3, 1, 0, 2), (10, 3, 2, 2, 3), (7, 7, 1, 0, 1), (7, 1, 4, 0, 1), (32, 4, 4, 0, 1),
                 (5, 2, 1, 1, 2), (12, 3, 5, 3, 2)]


def out_size_check(fn: Callable[[int, int, int, int, int], Any]) -> None:
    """Lesson 12, exercise 1: ``fn(size, kernel, stride, padding, dilation)``, a convolution's output size on one axis.

    Compared with the shape ``at.conv2d`` infers on a dozen settings and four fresh ones (built first), so a table
    of the dozen's answers fails. The exercise's rule (from the formula: no asgteach, no conv2d_naive) is read from
    ``fn``'s source; in practice mode conv2d is also switched off while ``fn`` runs.
    """
    import asgteach as at

    enforce(fn, RULES[1], "conv_out_size")
    rng, settings = fresh(), list(CONV_SETTINGS)
    while len(settings) < len(CONV_SETTINGS) + 4:
        size, k, s, p, d = (int(v) for v in (rng.integers(5, 41), rng.integers(1, 6), rng.integers(1, 5),
                                             rng.integers(0, 3), rng.integers(1, 4)))
        if d * (k - 1) + 1 <= size + 2 * p:      # a kernel that fits
            settings.append((size, k, s, p, d))
    cases = []
    for size, k, s, p, d in settings:
        with at.Graph(name="check: conv2d sizes"):
            shape = at.conv2d(at.input("x", (1, 1, size, size)), at.input("w", (1, 1, k, k)),
                              stride=s, padding=p, dilation=d).shape
        cases.append(((size, k, s, p, d), shape[2]))
    with without("conv2d", why="derive the size from the formula"):
        check_function(fn, cases, name="conv_out_size")


def _max_pool_grad(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """d/dx of sum(max_pool2d(x, 2) * g) for a 2-D image: autograd's own answer, the library's first-maximum rule."""
    import asgteach as at

    with at.Graph(name="check: max pool"):
        xi = at.input("x", (1, 1) + x.shape)
        gi = at.input("g", (1, 1) + g.shape)
        (d,) = at.grad(at.sum(at.max_pool2d(xi, 2) * gi), [xi])
    return at.run(d, {xi: x.reshape((1, 1) + x.shape), gi: g.reshape((1, 1) + g.shape)})[0, 0]


def max_pool_routing(dX: Any, x: np.ndarray, g: np.ndarray) -> None:
    """Lesson 12: d/dx of sum(max_pool2d(x, 2) * g), worked out by hand; the check asks autograd itself."""
    x, g = np.asarray(x, dtype=np.float64), np.asarray(g, dtype=np.float64)
    check_array(dX, _max_pool_grad(x, g), name="dX5")


def _pool_images(rng: np.random.Generator) -> list[np.ndarray]:
    """Images the lesson never showed, each a trap for one way of getting the routing wrong."""
    def size() -> tuple[int, int]:
        h, w = rng.integers(1, 5, size=2)
        return int(2 * h), int(2 * w)

    crossed = rng.integers(0, 3, size=(4, 8)).astype(np.float64)
    crossed[0:2, 0:2] = [[0.0, 5.0], [5.0, 0.0]]   # by rows (0, 1) wins, by columns (1, 0) would
    crossed[2:4, 4:6] = 7.0                        # a window of four equal values: only its first pixel
    negative = -rng.integers(1, 4, size=(2, 6)).astype(np.float64)
    negative[:, 2:4] = [[-2.0, -1.0], [-1.0, -3.0]]   # a maximum that starts at 0 never finds (0, 1)
    return [
        rng.integers(0, 3, size=size()).astype(np.float64),           # small integers: ties everywhere
        crossed,
        negative,
        rng.standard_normal(size()),                                  # no ties at all
    ]


def max_pool_grad_check(fn: Callable[[np.ndarray, np.ndarray], Any]) -> None:
    """Lesson 12: ``fn(x, g)``, a 2x2 max pool's gradient (stride 2) by hand, on images of the check's own.

    Compared with the library's own gradient (computed first; the pool's ops are switched off while
    ``fn`` runs) on sizes the lesson never used, with ties at random, a window whose first maximum
    by rows is not its first by columns, four equal values, and an image of negative numbers. The
    exercise's rule (no asgteach) is read from ``fn``'s source: a function returning the lesson's
    ``dX5`` typed in fails on the other images, one handing the work to autograd on its source.
    """
    if not callable(fn):
        raise ExerciseError(f"max_pool_grad should be a function max_pool_grad(x, g), got {type(fn).__name__}")
    enforce(fn, RULES[3], "max_pool_grad")
    rng = fresh()
    cases = []
    for x in _pool_images(rng):
        g = rng.standard_normal((x.shape[0] // 2, x.shape[1] // 2))
        cases.append(((x, g), _max_pool_grad(x, g)))
    with without("max_pool2d", "max_pool2d_grad", "max_pool2d_gather", why="route the gradient by hand, in numpy"):
        check_function(fn, cases, name="max_pool_grad", rtol=1e-12, atol=1e-12,
                       hint="each window's gradient goes to ONE pixel: its first maximum, reading the window row "
                            "by row (np.argmax of the flattened window finds it); on a tie the others get 0, and "
                            "the maximum starts from the window's own values (the image may be negative)")
