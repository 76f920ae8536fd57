"""Lesson 10's checks (higher order and forward mode): Hessians and J t of functions of the check's own.

* Exercise 1, the third derivative: checked in the notebook (``check_tensor`` at fresh inputs).
* Exercise 2, the sharpest curvature: :func:`top_curvature_check` hands the student's ``top_curvature(hvp, n)``
  an ``hvp`` of its own (Hessians of n = 400 and 60, one a saddle, a small one, and the HVP graph of a function of
  its own), which counts its calls: more than :data:`HVP_BUDGET`, fewer than n, fails, so H cannot be formed. The
  calls come back to the check in both modes (in graded mode ``hvp`` is a handle the sandbox calls), so the budget
  holds there too.
* Exercise 3, J t by transposition for several inputs: :func:`jvp_by_transposition_check` calls the student's
  ``jvp_by_transposition(y, xs, ts)`` inside graphs of its own (one input; two inputs of different shapes, a case
  the lesson never shows) with ``at.jvp`` switched off, allows two reverse sweeps, and runs the result at fresh
  inputs and tangents with any value fed to the cotangent u. ``RULES[3]``: reverse mode only.

Lesson 10's Jacobian exercises (a Jacobian by forward mode, the softmax Jacobian) moved with their sections to
lesson 10b, and their checks to :mod:`asgteach.lessons.lesson10b`.

This file gives the answers away: try the lesson first.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..grading.checks import check_array, without
from ..grading.exercises import ExerciseError
from ..grading.rules import STAND_INS, Rule, enforce
from .common import borrowed, fresh

__all__ = ["LESSON", "RULES", "HVP_BUDGET", "top_curvature_check", "jvp_by_transposition_check"]

LESSON = "10-higher-order-and-forward-mode"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {
    3: Rule(why="build J t from reverse-mode sweeps (at.grad) only: an answer that calls asgteach.jvp uses forward "
                "mode",
            imports=STAND_INS, names=frozenset({"jvp"}), attrs=frozenset({"jvp"})),
}


def _refuse_library(fn: Any, name: str, *originals: Any) -> None:
    """Refuse a function whose notebook globals hold the library's own answer (``from asgteach import jvp``)."""
    found = borrowed(fn, *originals)
    if found:
        raise ExerciseError(f"{name} calls the library's own {found} (imported by name), which the exercise asks "
                            "you to do without: write it yourself")


# --- exercise 2: the sharpest curvature from HVPs alone -----------------------------------------------------

#: calls to ``hvp`` the answer may make on one Hessian, whatever its size (forming H takes n)
HVP_BUDGET = 100


class _Counted:
    """The check's ``hvp(v)``: H v for ONE vector of n numbers, counting calls (the budget is the exercise)."""

    def __init__(self, H: np.ndarray | None = None, hvp: Callable[[np.ndarray], np.ndarray] | None = None,
                 n: int = 0) -> None:
        self.H, self._hvp, self.n, self.calls = H, hvp, (H.shape[0] if H is not None else n), 0

    def __call__(self, v: Any) -> np.ndarray:
        self.calls += 1
        if self.calls > HVP_BUDGET:
            raise ExerciseError(f"top_curvature called hvp more than {HVP_BUDGET} times on a Hessian of n = {self.n}: "
                                "forming H takes n calls (one column each), which is what HVPs let you avoid. Power "
                                "iteration needs a few dozen calls whatever n is.")
        v = np.asarray(v, dtype=np.float64)
        if v.shape != (self.n,):
            raise ExerciseError(f"hvp takes ONE vector of n = {self.n} numbers, got shape {v.shape}")
        return self.H @ v if self.H is not None else np.asarray(self._hvp(v), dtype=np.float64)


def _spectrum_matrix(rng: np.random.Generator, eigenvalues: np.ndarray) -> np.ndarray:
    """A symmetric matrix with the given eigenvalues and random eigenvectors."""
    Q, _ = np.linalg.qr(rng.standard_normal((len(eigenvalues), len(eigenvalues))))
    return (Q * eigenvalues) @ Q.T


def top_curvature_check(fn: Callable[..., Any]) -> None:
    """``fn(hvp, n)`` -> the eigenvalue of largest magnitude of the symmetric H behind ``hvp`` (sign included).

    On Hessians of the check's own: one of n = 400 (a minimum: every eigenvalue positive, the top one 2.5 times the
    next), a saddle whose dominant eigenvalue is negative (a magnitude without its sign fails), a small one, and
    the HVP graph of a function of the check's own. ``hvp`` counts its calls: more than :data:`HVP_BUDGET` (forming
    H takes n) fails.
    """
    import asgteach as at

    rng = fresh()
    n_big = 400
    minimum = np.concatenate([[10.0], rng.uniform(0.0, 4.0, n_big - 1)])
    saddle = np.concatenate([[-8.0], rng.uniform(-3.0, 3.0, 59)])
    cases = [("a minimum, n = 400", _Counted(_spectrum_matrix(rng, minimum))),
             ("a saddle, n = 60", _Counted(_spectrum_matrix(rng, saddle))),
             ("n = 3", _Counted(_spectrum_matrix(rng, np.array([1.0, -0.5, 6.0]))))]
    w = rng.standard_normal(4) * 2
    with at.Graph(name="check: another f"):
        x = at.input("x", (4,))
        v = at.input("v", (4,))
        f = at.sum(at.tanh(x)) + 0.5 * at.sum(x * at.constant(w)) ** 2
        hv = at.hvp(f, x, v)
    x0 = rng.standard_normal(4)
    th = np.tanh(x0)
    H_f = np.diag(-2 * th * (1 - th ** 2)) + np.outer(w, w)
    cases.append(("the HVP graph of f(x) = sum(tanh x) + (w . x)^2 / 2, n = 4",
                  _Counted(hvp=lambda u: at.run(hv, {x: x0, v: u}), n=4)))
    wants = [np.linalg.eigvalsh(c.H) if c.H is not None else np.linalg.eigvalsh(H_f) for _, c in cases]
    for (label, hvp), eig in zip(cases, wants):
        want = float(eig[np.argmax(np.abs(eig))])
        call = f"top_curvature(hvp, {hvp.n}) on the check's Hessian ({label})"
        try:
            got = fn(hvp, hvp.n)
        except (ExerciseError, NotImplementedError):
            raise
        except Exception as e:  # noqa: BLE001 - the student's function failing is a finding
            raise ExerciseError(f"{call} raised {type(e).__name__}: {e}") from e
        if hvp.calls > HVP_BUDGET:
            raise ExerciseError(f"{call} called hvp {hvp.calls} times, more than {HVP_BUDGET}: forming H takes n "
                                "calls, which is what HVPs let you avoid")
        try:
            got = float(got)
        except (TypeError, ValueError):
            raise ExerciseError(f"{call} should return one number, got {type(got).__name__}") from None
        if abs(got - want) <= 1e-6 * abs(want):
            continue
        hint = "repeat v <- H v / |H v| from a random v; then v . H v (v of length 1) is the eigenvalue, with its sign"
        if abs(abs(got) - abs(want)) <= 1e-6 * abs(want):
            hint = ("the size is right and the sign wrong: |H v| is the eigenvalue's magnitude; v . H v (v of length "
                    "1), the Rayleigh quotient, keeps its sign")
        elif hvp.calls < 5:
            hint = (f"{hvp.calls} call(s) of hvp: one product H v does not point along the sharpest direction yet; "
                    "repeat v <- H v / |H v| until it stops turning")
        raise ExerciseError(f"{call} returned {got:.8g}; the eigenvalue of largest magnitude is {want:.8g}\n"
                            f"  Hint: {hint}")


# --- exercise 3: J t from reverse mode alone, for several inputs --------------------------------------------

def jvp_by_transposition_check(fn: Callable[..., Any], trials: int = 3) -> None:
    """``fn(y, xs, ts)`` -> a Tensor holding J t = sum_i (dy/dx_i) t_i, built by reverse mode alone (the trick).

    The check builds functions of its own (not the lesson's): F(x) = tanh(M x) * (N x), R^4 -> R^3, called with one
    input (``[x]``, ``[t]``), and G(x1, x2) = tanh(M x1) * (N x2) of two inputs, a (3, 2) matrix and a vector, called
    with both. It calls ``fn`` inside each graph's ``with`` block while ``at.jvp`` is switched off, allows at most two
    reverse sweeps (one VJP sweep gives the VJPs of all inputs at once, and one sweep through it), and runs the result
    at fresh inputs and tangents, feeding random values to any other input it reads (the cotangent u: J t must not
    depend on it).
    """
    enforce(fn, RULES[3], "jvp_by_transposition")
    import asgteach as at

    _refuse_library(fn, "jvp_by_transposition", at.jvp)
    rng = fresh()
    M = rng.standard_normal((3, 4))
    N = rng.standard_normal((3, 4))
    N2 = rng.standard_normal((3, 6))

    def one_input(x0: dict[str, np.ndarray]) -> np.ndarray:
        a, b = M @ x0["x"], N @ x0["x"]
        return ((1 - np.tanh(a) ** 2) * b)[:, None] * M @ x0["t"] + (np.tanh(a)[:, None] * N) @ x0["t"]

    def two_inputs(x0: dict[str, np.ndarray]) -> np.ndarray:
        a, b = M @ x0["x1"], N2 @ x0["x2"].reshape(-1)
        return (1 - np.tanh(a) ** 2) * (M @ x0["t1"]) * b + np.tanh(a) * (N2 @ x0["t2"].reshape(-1))

    cases = []
    with at.Graph(name="check: F(x) = tanh(M x) * (N x)") as graph:
        x = at.input("x", (4,))
        y = at.tanh(at.constant(M) @ x) * (at.constant(N) @ x)
        t = at.input("t", (4,))
    cases.append((graph, y, {"x": x}, {"t": t}, one_input, "F(x) = tanh(M x) * (N x), R^4 -> R^3, xs = [x]"))
    with at.Graph(name="check: G(x1, x2) = tanh(M x1) * (N x2)") as graph2:
        x1, x2 = at.input("x1", (4,)), at.input("x2", (3, 2))
        y2 = at.tanh(at.constant(M) @ x1) * (at.constant(N2) @ at.reshape(x2, (6,)))
        t1, t2 = at.input("t1", (4,)), at.input("t2", (3, 2))
    cases.append((graph2, y2, {"x1": x1, "x2": x2}, {"t1": t1, "t2": t2}, two_inputs,
                  "G(x1, x2) = tanh(M x1) * (N reshape(x2)), x1 of shape (4,) and x2 of shape (3, 2), xs = [x1, x2]"))
    for graph, y, xs, ts, reference, label in cases:
        call = f"jvp_by_transposition(y, xs, ts) (the check's {label})"
        jt = _call_in(fn, graph, y, list(xs.values()), list(ts.values()), call)
        if jt.shape != y.shape:
            extra = (" - that is an input's shape: a VJP itself, or a gradient with respect to an input. J t has one "
                     "entry per output: differentiate the VJP's inner product with the tangents with respect to the "
                     "cotangent u" if any(jt.shape == v.shape for v in xs.values()) else "")
            raise ExerciseError(f"{call} returned a Tensor of shape {jt.shape}; J t should have y's shape "
                                f"{y.shape}{extra}")
        leaves = at.compile([jt]).leaves
        for k in range(trials):
            values = {name: rng.standard_normal(v.shape) for name, v in {**xs, **ts}.items()}
            feeds = {leaf.id: rng.standard_normal(leaf.shape) * 3 for leaf in leaves}   # u: any value at all
            feeds.update({v.node_id: values[name] for name, v in {**xs, **ts}.items()})
            try:
                got = at.run(jt, feeds)
            except Exception as e:  # noqa: BLE001 - a tensor that cannot run is a finding
                raise ExerciseError(f"{call}: running your Tensor failed ({type(e).__name__}: {e})") from e
            try:
                check_array(got, reference(values), name="J t", where=f"{call}, fresh inputs and tangents, trial "
                            f"{k + 1}", rtol=1e-9, atol=1e-12)
            except ExerciseError as e:
                raise ExerciseError(f"{e}\n  Hint: J t = d/du sum_i <VJP_i(u), t_i>, where VJP_1(u), VJP_2(u), ... = "
                                    "at.grad(y, xs, seed=u) and u is an input of y's shape; every input's share is "
                                    "added, and the result must not depend on the value fed to u.") from None


def _call_in(fn: Callable[..., Any], graph: Any, y: Any, xs: list[Any], ts: list[Any], call: str) -> Any:
    """The student's function called inside ``graph`` with at.jvp off; its result a Tensor of that graph, made by at
    most two reverse sweeps."""
    import asgteach as at

    from .. import autograd
    from ..tensor import Tensor

    sweeps = len(graph.passes)
    with graph, without(attrs=[(at, "jvp"), (autograd, "jvp")],
                        why="build J t from reverse-mode sweeps (at.grad), as in section 4"):
        try:
            jt = fn(y, xs, ts)
        except (ExerciseError, NotImplementedError):
            raise
        except Exception as e:  # noqa: BLE001 - the student's function failing is a finding
            raise ExerciseError(f"{call} raised {type(e).__name__}: {e}") from e
    if not isinstance(jt, Tensor) or jt.graph is not graph:
        raise ExerciseError(f"{call} should return a Tensor of y's graph (J t as a node), got "
                            f"{type(jt).__name__}: keep it a Tensor, the check runs it at points of its own")
    used = len(graph.passes) - sweeps
    if used > 2:
        raise ExerciseError(f"{call} ran {used} reverse sweeps (at.grad calls): the trick needs two, one for the "
                            "VJP (with the cotangent u as an input; one sweep gives the VJPs of ALL the inputs, "
                            "at.grad(y, xs, seed=u)) and one through the VJP graph with respect to u. Building J row "
                            "by row costs one sweep per output, the trick once per input one more pair per input.")
    return jt
