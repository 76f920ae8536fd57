"""Lesson 10's checks (higher order and forward mode): Hessians and J t of functions of the check's own.

* Exercise 1, the third derivative: checked in the notebook (``check_tensor`` at fresh inputs).
* Exercise 2: :func:`hessian_from_hvp` hands the student's function the HVP graph of another function than
  the lesson's, so an answer fitted to the lesson's f cannot pass.
* Exercise 3, J t by transposition: :func:`jvp_by_transposition_check` calls the student's function inside
  a graph of its own with ``at.jvp`` switched off, allows two reverse sweeps, and runs the result at fresh
  x and t with any value fed to the cotangent u. ``RULES[3]``: reverse mode only.

Lesson 10's Jacobian exercises (a Jacobian by forward mode, the softmax Jacobian) moved with their sections to
lesson 10b, and their checks to :mod:`asgteach.lessons.lesson10b`.

This file gives the answers away: try the lesson first.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..grading.checks import check_array, check_function, without
from ..grading.exercises import ExerciseError
from ..grading.rules import STAND_INS, Rule, enforce
from .common import borrowed, fresh

__all__ = ["LESSON", "RULES", "hessian_from_hvp", "jvp_by_transposition_check"]

LESSON = "10-higher-order-and-forward-mode"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {
    3: Rule(why="build J t from reverse-mode sweeps (at.grad) only: an answer that calls asgteach.jvp uses forward "
                "mode",
            imports=STAND_INS, names=frozenset({"jvp"}), attrs=frozenset({"jvp"})),
}


def hessian_from_hvp(fn: Callable[..., Any], trials: int = 2) -> None:
    """``fn(hv, x, v, x0)`` -> the Hessian at x0 of the function whose HVP graph ``hv`` is (a function of the check's).

    f(x) = sum(tanh(x)) + (w . x)^2 / 2, so H = diag(-2 tanh (1 - tanh^2)) + w w^T: not the lesson's f.
    """
    import asgteach as at

    rng = fresh()
    n = 4
    w = rng.standard_normal(n)
    with at.Graph(name="check: another f"):
        x = at.input("x", (n,))
        v = at.input("v", (n,))
        f = at.sum(at.tanh(x)) + 0.5 * at.sum(x * at.constant(w)) ** 2
        hv = at.hvp(f, x, v)
    for k in range(trials):
        x0 = rng.standard_normal(n)
        th = np.tanh(x0)
        want = np.diag(-2 * th * (1 - th ** 2)) + np.outer(w, w)
        check_function(fn, [((hv, x, v, x0), want)], name="hessian_from_hvp", rtol=1e-8, atol=1e-10)


def _refuse_library(fn: Any, name: str, *originals: Any) -> None:
    """Refuse a function whose notebook globals hold the library's own answer (``from asgteach import jvp``)."""
    found = borrowed(fn, *originals)
    if found:
        raise ExerciseError(f"{name} calls the library's own {found} (imported by name), which the exercise asks "
                            "you to do without: write it yourself")


def jvp_by_transposition_check(fn: Callable[..., Any], trials: int = 3) -> None:
    """``fn(y, x, t)`` -> a Tensor holding J t, built by reverse mode alone (the transposition trick).

    The check builds F: R^4 -> R^3 of its own (not the lesson's), calls ``fn`` inside that
    graph's ``with`` block while ``at.jvp`` is switched off, allows at most two reverse sweeps
    (the VJP and the sweep through it: a Jacobian built row by row takes m), and runs the
    result at fresh x and t, feeding random values to any other input it reads (the
    cotangent u: J t must not depend on it).
    """
    enforce(fn, RULES[3], "jvp_by_transposition")
    import asgteach as at

    from .. import autograd
    from ..tensor import Tensor

    _refuse_library(fn, "jvp_by_transposition", at.jvp)
    rng = fresh()
    M = rng.standard_normal((3, 4))
    N = rng.standard_normal((3, 4))
    with at.Graph(name="check: F(x) = tanh(M x) * (N x)") as graph:
        x = at.input("x", (4,))
        y = at.tanh(at.constant(M) @ x) * (at.constant(N) @ x)
        t = at.input("t", (4,))
        sweeps = len(graph.passes)
        with without(attrs=[(at, "jvp"), (autograd, "jvp")],
                     why="build J t from reverse-mode sweeps (at.grad), as in section 4"):
            try:
                jt = fn(y, x, t)
            except (ExerciseError, NotImplementedError):
                raise
            except Exception as e:  # noqa: BLE001 - the student's function failing is a finding
                raise ExerciseError(f"jvp_by_transposition(y, x, t) on the check's F: R^4 -> R^3 raised "
                                    f"{type(e).__name__}: {e}") from e
    call = "jvp_by_transposition(y, x, t) (the check's F(x) = tanh(M x) * (N x), R^4 -> R^3)"
    if not isinstance(jt, Tensor) or jt.graph is not graph:
        raise ExerciseError(f"{call} should return a Tensor of y's graph (J t as a node), got "
                            f"{type(jt).__name__}: keep it a Tensor, the check runs it at points of its own")
    if jt.shape != y.shape:
        extra = (" - that is x's shape: J^T u (the VJP itself), or a gradient with respect to x. J t has one entry "
                 "per output: differentiate <VJP, t> with respect to the cotangent u" if jt.shape == x.shape else "")
        raise ExerciseError(f"{call} returned a Tensor of shape {jt.shape}; J t should have y's shape {y.shape}{extra}")
    used = len(graph.passes) - sweeps
    if used > 2:
        raise ExerciseError(f"{call} ran {used} reverse sweeps (at.grad calls): the trick needs two, one for the "
                            "VJP (with the cotangent u as an input) and one through the VJP graph with respect to "
                            "u. Building J row by row costs one sweep per output.")
    leaves = at.compile([jt]).leaves
    for k in range(trials):
        x0, t0 = rng.standard_normal(4), rng.standard_normal(4)
        feeds = {leaf.id: rng.standard_normal(leaf.shape) * 3 for leaf in leaves}   # u: any value at all
        feeds.update({x.node_id: x0, t.node_id: t0})
        a, b = M @ x0, N @ x0
        want = ((1 - np.tanh(a) ** 2) * b)[:, None] * M @ t0 + (np.tanh(a)[:, None] * N) @ t0
        try:
            got = at.run(jt, feeds)
        except Exception as e:  # noqa: BLE001 - a tensor that cannot run is a finding
            raise ExerciseError(f"{call}: running your Tensor failed ({type(e).__name__}: {e})") from e
        try:
            check_array(got, want, name="J t", where=f"{call}, fresh x and t, trial {k + 1}", rtol=1e-9, atol=1e-12)
        except ExerciseError as e:
            raise ExerciseError(f"{e}\n  Hint: J t = d/du <VJP(u), t>, where VJP(u) = at.grad(y, x, seed=u) and u "
                                "is an input of y's shape; it must not depend on the value fed to u.") from None
