"""Lesson 10's checks (higher order and forward mode): Hessians, Jacobians and J t of functions of the check's own.

* Exercise 1, the third derivative: checked in the notebook (``check_tensor`` at fresh inputs).
* Exercises 2 and 3: :func:`hessian_from_hvp` and :func:`jacobian_by_jvp` hand the student's function an
  HVP or JVP graph of another function than the lesson's (a Jacobian that is not diagonal), so an answer
  fitted to the lesson's f or F cannot pass.
* Exercise 4, ``softmax_jacobian(y)``: :func:`softmax_jacobian_check` runs it at fresh probability
  vectors, one row and batches of rows, while the library's autodiff and softmax are switched off, and
  wants the formula's result to round-off (a finite difference is named as such). ``RULES[4]``: numpy only.
* Exercise 5, J t by transposition: :func:`jvp_by_transposition_check` calls the student's function inside
  a graph of its own with ``at.jvp`` switched off, allows two reverse sweeps, and runs the result at fresh
  x and t with any value fed to the cotangent u. ``RULES[5]``: reverse mode only.

This file gives the answers away: try the lesson first.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..grading.checks import check_array, check_function, without
from ..grading.exercises import ExerciseError
from ..grading.rules import STAND_INS, Rule, enforce
from .common import borrowed, fresh

__all__ = ["LESSON", "RULES", "hessian_from_hvp", "jacobian_by_jvp", "softmax_jacobian_check",
           "jvp_by_transposition_check"]

LESSON = "10-higher-order-and-forward-mode"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {
    4: Rule(why="the formula of section 6, with numpy only: asgteach's jvp, grad and softmax are the work which the "
                "exercise asks you to write yourself",
            imports=STAND_INS | {"asgteach"}, names=frozenset({"at", "asgteach", "jvp", "grad", "hvp"})),
    5: Rule(why="build J t from reverse-mode sweeps (at.grad) only: an answer that calls asgteach.jvp uses forward "
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


def jacobian_by_jvp(fn: Callable[..., Any], trials: int = 2) -> None:
    """``fn(jt, a, t, a0)`` -> the Jacobian at a0 of the function whose JVP graph ``jt`` is, here F(a) = tanh(M a).

    F maps R^4 to R^3, so the Jacobian is 3 x 4 and not diagonal: an answer fitted to the lesson's
    elementwise F (a diagonal) cannot pass.
    """
    import asgteach as at

    rng = fresh()
    M = rng.standard_normal((3, 4))
    with at.Graph(name="check: another F"):
        a = at.input("a", (4,))
        t = at.input("t", (4,))
        jt = at.jvp(at.tanh(at.constant(M) @ a), a, t)
    for k in range(trials):
        a0 = rng.standard_normal(4)
        want = (1 - np.tanh(M @ a0) ** 2)[:, None] * M
        check_function(fn, [((jt, a, t, a0), want)], name="jacobian_by_jvp", rtol=1e-8, atol=1e-10)



def _refuse_library(fn: Any, name: str, *originals: Any) -> None:
    """Refuse a function whose notebook globals hold the library's own answer (``from asgteach import jvp``)."""
    found = borrowed(fn, *originals)
    if found:
        raise ExerciseError(f"{name} calls the library's own {found} (imported by name), which the exercise asks "
                            "you to do without: write it yourself")


def _softmax_rows(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_jacobian_check(fn: Callable[[np.ndarray], Any]) -> None:
    """``fn(y)`` -> softmax's Jacobian dy/dz at the point whose output is ``y``: (n, n), or (b, n, n) for rows.

    Run at fresh probability vectors (sizes 2 to 7, one row and a batch of rows) while the
    library's autodiff and its softmax are switched off, so the numbers must come from the
    formula; to round-off, which a finite difference does not reach (the message says so).
    """
    enforce(fn, RULES[4], "softmax_jacobian")
    import asgteach as at

    from .. import autograd

    _refuse_library(fn, "softmax_jacobian", at.jvp, at.grad, at.hvp, at.softmax)
    rng = fresh()
    cases = [_softmax_rows(rng.standard_normal(n) * 2) for n in (2, 3, 5)]
    cases += [_softmax_rows(rng.standard_normal((b, n)) * 2) for b, n in ((4, 3), (1, 7))]
    refuse = [(at, "jvp"), (at, "grad"), (at, "hvp"), (autograd, "jvp"), (autograd, "grad")]
    for y in cases:
        want = y[..., :, None] * np.eye(y.shape[-1]) - y[..., :, None] * y[..., None, :]   # diag(y) - y y^T
        call = f"softmax_jacobian(<fresh y of shape {y.shape}>)"
        with without("softmax", "log_softmax", attrs=refuse,
                      why="section 6's formula gives J from y alone, with numpy"):
            try:
                got = fn(y.copy())
            except (ExerciseError, NotImplementedError):
                raise
            except Exception as e:  # noqa: BLE001 - the student's function failing is a finding
                batch = (f"\n  Hint: y here is a batch of rows, shape {y.shape}: return one n x n Jacobian per "
                         "row, shape (b, n, n) (numpy broadcasting over the leading axis, or a loop over the rows)"
                         if y.ndim == 2 else "")
                raise ExerciseError(f"{call} raised {type(e).__name__}: {e}{batch}") from e
        arr = np.asarray(got, dtype=np.float64) if np.shape(got) == want.shape else None
        if arr is not None and np.allclose(arr, want, rtol=1e-11, atol=1e-14):
            continue
        if arr is not None and np.allclose(arr, want, rtol=1e-4, atol=1e-7):
            # close but not exact: check_array's guesses (a factor, a transpose: J is symmetric) would mislead
            k = np.unravel_index(int(np.argmax(np.abs(arr - want))), want.shape)
            where = "[" + ", ".join(str(int(i)) for i in k) + "]"
            raise ExerciseError(f"{call} agrees with the Jacobian to a few digits only (worst element {where}: "
                                f"expected {float(want[k]):.12g}, got {float(arr[k]):.12g}): that is what finite "
                                "differences give. Use the formula of section 6, J[i, j] = y[i] (delta_ij - y[j]): it "
                                "is exact to round-off.")
        if y.ndim == 2 and np.shape(got) == (y.shape[-1], y.shape[-1]):
            raise ExerciseError(f"{call} returned one {np.shape(got)} matrix. Hint: y here is a batch of rows "
                                f"(b, n): return one n x n Jacobian per row, shape {want.shape}")
        try:
            check_array(got, want, name="the Jacobian", where=call, rtol=1e-11, atol=1e-14)
        except ExerciseError as e:
            extra = ""
            if arr is not None and np.allclose(arr, -want, rtol=1e-9, atol=1e-13):
                extra = "\n  Hint: the diagonal is y_i - y_i^2 (positive), the rest -y_i y_j."
            elif np.shape(got) != want.shape:
                extra = "\n  Hint: J is n x n for y of n entries (and one such matrix per row of a batch)."
            raise ExerciseError(f"{e}{extra}") from None


def jvp_by_transposition_check(fn: Callable[..., Any], trials: int = 3) -> None:
    """``fn(y, x, t)`` -> a Tensor holding J t, built by reverse mode alone (the transposition trick).

    The check builds F: R^4 -> R^3 of its own (not the lesson's), calls ``fn`` inside that
    graph's ``with`` block while ``at.jvp`` is switched off, allows at most two reverse sweeps
    (the VJP and the sweep through it: a Jacobian built row by row takes m), and runs the
    result at fresh x and t, feeding random values to any other input it reads (the
    cotangent u: J t must not depend on it).
    """
    enforce(fn, RULES[5], "jvp_by_transposition")
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
                     why="build J t from reverse-mode sweeps (at.grad), as in section 7"):
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
