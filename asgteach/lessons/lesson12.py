"""Lesson 12's checks (convolution and pooling): a receptive field, a kernel gradient, max pooling's gradient.

* Exercise 1, ``receptive_field(layers)``: :func:`receptive_field_check` compares it with the receptive field
  that autograd measures (the support of one output pixel's gradient) on stacks of the check's own, conv2d
  switched off while it runs (practice mode); ``RULES[1]`` (arithmetic: no asgteach, nor section 1's
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

__all__ = ["LESSON", "RULES", "receptive_field_check", "measured_receptive_field", "STACKS", "max_pool_routing",
           "max_pool_grad_check"]

LESSON = "12-convolution-and-pooling"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {
    # the library's conv2d is reached through `at`, or through a class of the lesson's objects (type(conv)(...),
    # conv.__class__, conv.__init__(...)); section 1's conv2d_naive computes the size it returns
    1: Rule(why="with arithmetic: not the library's conv2d (no at, no asgteach, no type(...), .__class__ or "
                ".__init__ of the lesson's layers), nor section 1's conv2d_naive",
            imports=STAND_INS | {"asgteach"}, names=frozenset({"at", "asgteach", "type", "conv2d_naive"}),
            attrs=frozenset({"__class__", "__init__", "__new__"})),
    2: no_asgteach("with numpy (no other library's convolution gradient)"),
    3: no_asgteach("by hand (no asgteach): the routing of the gradient is the exercise"),
}


#: stacks of (kernel, stride, dilation), first layer first, that exercise 1's check measures (and fresh ones)
STACKS = [[(3, 1, 1)] * 3, [(3, 2, 1), (3, 2, 1), (3, 1, 1)], [(3, 1, 1), (3, 1, 2), (3, 1, 4)],
          [(5, 2, 1), (3, 1, 2)], [(2, 2, 1)] * 3, [(7, 3, 1), (1, 1, 1)], [(1, 2, 1), (3, 1, 1)],
          [(4, 1, 1), (2, 2, 2), (3, 3, 1)]]


def measured_receptive_field(layers: list[tuple[int, int, int]]) -> int:
    """The side of the input square one output pixel of the stack depends on, MEASURED: the gradient of one output
    pixel with respect to the image (kernels of ones, no padding) is nonzero exactly on its receptive field."""
    import asgteach as at

    span, jump = 1, 1                       # only to size an image that gives the last layer 3 x 3 pixels
    for k, s, d in layers:
        span, jump = span + d * (k - 1) * jump, jump * s
    size = span + 2 * jump
    with at.Graph(name="check: receptive field") as graph:
        x = at.input("x", (1, 1, size, size))
        y = x
        for k, s, d in layers:
            y = at.conv2d(y, at.constant(np.ones((1, 1, k, k))), stride=s, dilation=d)
        pick = np.zeros(y.shape)
        pick[0, 0, 1, 1] = 1.0              # one output pixel, away from the border
        (dx,) = at.grad(at.sum(y * at.constant(pick)), [x])
    del graph
    rows = np.flatnonzero(np.abs(at.run(dx, {x: np.ones((1, 1, size, size))})[0, 0]).sum(axis=1))
    return int(rows[-1] - rows[0] + 1)


def receptive_field_check(fn: Callable[[list], Any]) -> None:
    """Lesson 12, exercise 1: ``fn(layers)``, the receptive field of a stack of (kernel, stride, dilation) layers.

    Compared with the field measured by autograd (:func:`measured_receptive_field`, computed first) on the stacks of
    :data:`STACKS` and four fresh ones, so a table of the notebook's answers fails. The exercise's rule (arithmetic: no
    asgteach, no conv2d_naive) is read from ``fn``'s source; in practice mode conv2d is also switched off while ``fn``
    runs.
    """
    enforce(fn, RULES[1], "receptive_field")
    rng, stacks = fresh(), [list(s) for s in STACKS]
    while len(stacks) < len(STACKS) + 4:
        depth = int(rng.integers(2, 5))
        stacks.append([(int(rng.integers(1, 6)), int(rng.integers(1, 4)), int(rng.integers(1, 4)))
                       for _ in range(depth)])
    cases = [((stack,), measured_receptive_field(stack)) for stack in stacks]
    with without("conv2d", why="work the receptive field out with arithmetic"):
        check_function(fn, cases, name="receptive_field",
                       hint="one pixel of layer 1 sees d(k-1)+1 image pixels; one tap further in layer 2 moves s1 "
                            "image pixels (layer 1's stride), in layer 3 s1*s2: each layer widens the field by "
                            "d(k-1) times the product of the strides below it")


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
