"""Lesson 10b's checks (Jacobians and vmap): Jacobians and per-example gradients of functions of the check's own.

* Exercise 1, ``banded_jacobian(jvp, n)``: :func:`banded_jacobian_check` hands it a ``jvp`` of its own (tridiagonal
  Jacobians of n = 50, 8 and 2, and the JVP graph of a function of its own), which counts its calls: more than
  three fails, so section 1's n runs (one per column) cannot pass; the answer must pack the columns that share no
  row into one tangent.
* Exercise 2, ``softmax_vjp(y, g)``: :func:`softmax_vjp_check` runs it at fresh probability vectors and gradients,
  one row and batches of rows, while the library's autodiff and softmax are switched off (practice mode), and wants
  g^T J to round-off (hints for diag(y) g alone, the sign, a sum over the whole batch, a finite difference); then on
  rows of 200 000 classes, where forming J (320 GB a row) runs out of memory. ``RULES[2]``: numpy only.
* Exercise 3, ``clipped_grad_sum(loss_fn, w, X, Y, C)`` (DP-SGD's clipping, in the graph):
  :func:`clipped_grad_sum_check` calls it on losses of the check's own (softmax regression with a matrix of
  weights, a robust regression through a feature), at two batch sizes, in graphs of its own; runs the result at
  fresh values of w, X, Y and a C between the examples' gradient norms, and compares it with its own loop of
  ``at.grad``, one example at a time, clipped and summed in numpy (hints for the unclipped sum, a clip after the
  sum, every gradient scaled to C); and counts the nodes the function added for each batch size. Those must be
  the same: an answer that loops over the examples adds one copy of the loss and its gradient per example, which
  is what vmap exists to avoid. Everything here is behaviour (values, shapes, a
  node count read off the graph that comes back), so it holds in both modes: in a graded course the loss
  functions are the sandbox's copies of this module's (``on_submission_side``: the student's ``at.vmap``
  calls them where it runs), and the numbers are compared here.

This file gives the answers away: try the lesson first.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..grading.checks import check_array, without
from ..grading.exercises import ExerciseError, on_submission_side
from ..grading.rules import STAND_INS, Rule, enforce
from .common import borrowed, fresh

__all__ = ["LESSON", "RULES", "JVP_BUDGET", "banded_jacobian_check", "softmax_vjp_check", "BIG_CLASSES",
           "clipped_grad_sum_check",
           "check_loss_softmax", "check_loss_robust"]

LESSON = "10b-jacobians-and-vmap"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {
    2: Rule(why="the formula of section 3, with numpy only: asgteach's jvp, grad and softmax are the work which the "
                "exercise asks you to write yourself",
            imports=STAND_INS | {"asgteach"}, names=frozenset({"at", "asgteach", "jvp", "grad", "hvp"})),
}


# --- exercise 1: a Jacobian by forward mode --------------------------------------------------------------

# --- exercise 1: a banded Jacobian in three JVP runs -------------------------------------------------------

#: JVP runs the answer may make on a tridiagonal Jacobian, whatever n (section 1's way takes n)
JVP_BUDGET = 3


class _CountedJvp:
    """The check's ``jvp(t)``: J t for ONE tangent of n numbers, counting calls (the budget is the exercise)."""

    def __init__(self, n: int, jvp: Callable[[np.ndarray], np.ndarray]) -> None:
        self.n, self._jvp, self.calls = n, jvp, 0

    def __call__(self, t: Any) -> np.ndarray:
        self.calls += 1
        if self.calls > JVP_BUDGET:
            raise ExerciseError(f"banded_jacobian called jvp more than {JVP_BUDGET} times (n = {self.n}): one run per "
                                "column is section 1's way, n runs. In a tridiagonal J, columns j and j + 3 never "
                                "share a row: one tangent can carry both")
        t = np.asarray(t, dtype=np.float64)
        if t.shape != (self.n,):
            raise ExerciseError(f"jvp takes ONE tangent of n = {self.n} numbers, got shape {t.shape}")
        return np.asarray(self._jvp(t), dtype=np.float64)


def _tridiagonal(rng: np.random.Generator, n: int) -> np.ndarray:
    return (np.diag(rng.standard_normal(n)) + np.diag(rng.standard_normal(n - 1), 1)
            + np.diag(rng.standard_normal(n - 1), -1))


def banded_jacobian_check(fn: Callable[..., Any]) -> None:
    """``fn(jvp, n)`` -> the n x n tridiagonal Jacobian behind ``jvp(t) = J t``, from at most three runs.

    On Jacobians of the check's own (n = 50, 8, 2, with every entry of the band nonzero) and on the JVP graph of
    F(x) = tanh(D x) * x, D tridiagonal, at a fresh point. ``jvp`` counts its calls in the check's process (a handle
    the sandbox calls, in a graded course), so more than :data:`JVP_BUDGET` fails in both modes.
    """
    import asgteach as at

    rng = fresh()
    cases = []
    for n in (50, 8, 2):
        J = _tridiagonal(rng, n)
        cases.append((f"a tridiagonal J, n = {n}", J, _CountedJvp(n, lambda t, J=J: J @ t)))
    n = 9
    D = _tridiagonal(rng, n)
    with at.Graph(name="check: F(x) = tanh(D x) * x"):
        x, t = at.input("x", (n,)), at.input("t", (n,))
        jt = at.jvp(at.tanh(at.constant(D) @ x) * x, x, t)
    x0 = rng.standard_normal(n)
    J_f = (1 - np.tanh(D @ x0) ** 2)[:, None] * D * x0[:, None] + np.diag(np.tanh(D @ x0))
    cases.append(("the JVP graph of F(x) = tanh(D x) * x, D tridiagonal, n = 9", J_f,
                  _CountedJvp(n, lambda t_: at.run(jt, {x: x0, t: t_}))))
    for label, want, jvp in cases:
        call = f"banded_jacobian(jvp, {jvp.n}) on the check's {label}"
        try:
            got = fn(jvp, jvp.n)
        except (ExerciseError, NotImplementedError):
            raise
        except Exception as e:  # noqa: BLE001 - the student's function failing is a finding
            raise ExerciseError(f"{call} raised {type(e).__name__}: {e}") from e
        if jvp.calls > JVP_BUDGET:
            raise ExerciseError(f"{call} called jvp {jvp.calls} times, more than {JVP_BUDGET}: one run per column is "
                                "section 1's way")
        try:
            check_array(got, want, name="the Jacobian", where=call, rtol=1e-10, atol=1e-12)
        except ExerciseError as e:
            raise ExerciseError(f"{e}\n  Hint: run c (c = 0, 1, 2) has t = 1 at every column j with j % 3 == c; "
                                "in its result, row i holds J[i, j] for the ONE column j of i - 1, i, i + 1 with "
                                "j % 3 == c; every entry outside the band is 0") from None


# --- exercise 2: the softmax Jacobian from its output ------------------------------------------------------

def _refuse_library(fn: Any, name: str, *originals: Any) -> None:
    """Refuse a function whose notebook globals hold the library's own answer (``from asgteach import jvp``)."""
    found = borrowed(fn, *originals)
    if found:
        raise ExerciseError(f"{name} calls the library's own {found} (imported by name), which the exercise asks "
                            "you to do without: write it yourself")


def _softmax_rows(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


#: exercise 2's large rows: softmax over this many classes, where J (n x n float64) would take 320 GB per row
BIG_CLASSES = 200_000


def softmax_vjp_check(fn: Callable[[np.ndarray, np.ndarray], Any]) -> None:
    """``fn(y, g)`` -> g^T J for softmax at the point whose output is ``y`` (J = diag(y) - y y^T): the gradient of a
    loss with respect to the logits, from y and the gradient g with respect to y, without forming J.

    Run at fresh probability vectors and gradients (sizes 2 to 7, one row and batches of rows) while the library's
    autodiff and softmax are switched off, to round-off (a finite difference is named as such); then on rows of
    :data:`BIG_CLASSES` classes, where forming J runs out of memory (the message says why, and what O(n) means).
    """
    enforce(fn, RULES[2], "softmax_vjp")
    import asgteach as at

    from .. import autograd

    _refuse_library(fn, "softmax_vjp", at.jvp, at.grad, at.hvp, at.softmax)
    rng = fresh()
    ys = [_softmax_rows(rng.standard_normal(n) * 2) for n in (2, 3, 5)]
    ys += [_softmax_rows(rng.standard_normal((b, n)) * 2) for b, n in ((4, 3), (1, 7), (3, 6))]
    refuse = [(at, "jvp"), (at, "grad"), (at, "hvp"), (autograd, "jvp"), (autograd, "grad")]

    def call_fn(y: np.ndarray, g: np.ndarray, call: str) -> Any:
        with without("softmax", "log_softmax", attrs=refuse, why="section 3's J gives g^T J from y and g, with numpy"):
            try:
                return fn(y.copy(), g.copy())
            except (ExerciseError, NotImplementedError):
                raise
            except MemoryError as e:
                raise ExerciseError(
                    f"{call} ran out of memory: J of softmax over n classes holds n^2 numbers ({y.shape[-1]:,} "
                    f"classes: {8 * y.shape[-1] ** 2 / 1e9:,.0f} GB per row), and a backward pass never forms it. "
                    "Write g^T J out with section 3's formula: it needs only y and g (O(n) numbers)") from e
            except Exception as e:  # noqa: BLE001 - the student's function failing is a finding
                raise ExerciseError(f"{call} raised {type(e).__name__}: {e}") from e

    for y in ys:
        g = rng.standard_normal(y.shape)
        want = y * (g - (g * y).sum(axis=-1, keepdims=True))
        call = f"softmax_vjp(<fresh y of shape {y.shape}>, <fresh g of the same shape>)"
        got = call_fn(y, g, call)
        arr = np.asarray(got, dtype=np.float64) if np.shape(got) == want.shape else None
        if arr is not None and np.allclose(arr, want, rtol=1e-11, atol=1e-14):
            continue
        hint = ""
        if arr is None:
            hint = (f"g^T J has the shape of y and g, {want.shape}: one gradient per logit (per row of a batch)"
                    + (" - an n x n matrix is J itself" if np.ndim(got) == y.ndim + 1 else ""))
        elif np.allclose(arr, want, rtol=1e-4, atol=1e-7):
            hint = "it agrees to a few digits only: that is what finite differences give; the formula is exact"
        elif np.allclose(arr, y * g, rtol=1e-9, atol=1e-13):
            hint = "that is diag(y) g alone: J also has -y y^T, whose part is -y (y . g)"
        elif np.allclose(arr, -want, rtol=1e-9, atol=1e-13):
            hint = "the sign: J = diag(y) - y y^T"
        elif y.ndim == 2 and np.allclose(arr, y * (g - (g * y).sum()), rtol=1e-9, atol=1e-13):
            hint = "the sum y . g runs over each row's n entries, one per row, not over the whole batch"
        try:
            check_array(arr if arr is not None else got, want, name="g^T J", where=call, rtol=1e-11, atol=1e-14)
        except ExerciseError as e:
            raise ExerciseError(f"{e}" + (f"\n  Hint: {hint}." if hint else "")) from None
        if hint:
            raise ExerciseError(f"{call} is not g^T J.\n  Hint: {hint}.")
    y = _softmax_rows(rng.standard_normal((2, BIG_CLASSES)) * 3)
    g = rng.standard_normal(y.shape)
    call = f"softmax_vjp(<y of shape {y.shape}>, <g of the same shape>)"
    got = call_fn(y, g, call)
    check_array(np.asarray(got, dtype=np.float64), y * (g - (g * y).sum(axis=-1, keepdims=True)), name="g^T J",
                where=call, rtol=1e-10, atol=1e-15)


# --- exercise 3: per-example gradients with at.vmap --------------------------------------------------------
#
# The check's losses, each for ONE example, as the exercise's loss_fn(w, x, y). They are module functions so
# that a graded check can hand the student's function the sandbox's copy of them (on_submission_side): the
# student's at.vmap traces them where it runs. What the student's function returns is believed only as a graph
# that the check runs here, at values of its own.

def check_loss_softmax(w: Any, x: Any, y: Any) -> Any:
    """Softmax regression: weights w (d, k), features x (d,), target probabilities y (k,); the cross-entropy."""
    import asgteach as at

    return -at.sum(y * at.log_softmax(x @ w))


def check_loss_robust(w: Any, x: Any, y: Any) -> Any:
    """A robust (pseudo-Huber) regression on tanh features: w (d,), x (d,), y (); sqrt(1 + r^2) - 1."""
    import asgteach as at

    r = at.sum(at.tanh(x) * w) - y
    return at.sqrt(1.0 + r * r) - 1.0


#: name -> (the loss, shapes (w, one x, one y) for d and k, values of y for n examples)
_LOSSES: dict[str, tuple[Callable[..., Any], Callable[[int, int], tuple], Callable[..., np.ndarray]]] = {
    "softmax regression": (check_loss_softmax, lambda d, k: ((d, k), (d,), (k,)),
                           lambda rng, n, k: _softmax_rows(rng.standard_normal((n, k)))),
    "robust regression": (check_loss_robust, lambda d, k: ((d,), (d,), ()),
                          lambda rng, n, k: rng.standard_normal(n) * 2),
}


def _loop_of_grads(loss: Callable[..., Any], W: np.ndarray, Xv: np.ndarray, Yv: np.ndarray) -> np.ndarray:
    """The per-example gradients the slow way: one graph for ONE example, run once per example."""
    import asgteach as at

    with at.Graph(name="check: one example at a time"):
        w = at.parameter("w", W.shape)
        x, y = at.input("x", Xv.shape[1:]), at.input("y", Yv.shape[1:])
        g = at.grad(loss(w, x, y), w)
    return np.stack([at.run(g, {w: W, x: Xv[i], y: Yv[i]}) for i in range(len(Xv))])


def _clipped_sum(G: np.ndarray, C: float) -> np.ndarray:
    """sum_i G[i] * min(1, C / |G[i]|): each example's gradient clipped to norm C, then summed (numpy)."""
    norms = np.sqrt((G.reshape(len(G), -1) ** 2).sum(axis=1))
    scale = np.minimum(1.0, C / np.where(norms > 0, norms, np.inf))
    return (G * scale.reshape((-1,) + (1,) * (G.ndim - 1))).sum(axis=0)


def _tempting_sums(G: np.ndarray, C: float) -> list[tuple[np.ndarray, str]]:
    """The clipped sums a careless answer computes from the per-example gradients G, each with the words that name
    its slip."""
    norms = np.sqrt((G.reshape(len(G), -1) ** 2).sum(axis=1))
    total = G.sum(axis=0)
    return [(total, "that is the sum of the gradients unclipped (the batch's gradient): clip each example's gradient "
                    "to norm C before summing"),
            (total * min(1.0, C / max(float(np.linalg.norm(total)), 1e-300)),
             "that is the batch's gradient clipped once, after summing: DP-SGD clips every example's gradient, so "
             "one example cannot move the weights by more than C"),
            ((G * (C / np.where(norms > 0, norms, np.inf)).reshape((-1,) + (1,) * (G.ndim - 1))).sum(axis=0),
             "every gradient was scaled to norm exactly C: min(1, C/|g_i|) leaves the small ones as they are")]


def _apart(values: list[np.ndarray]) -> bool:
    """No two of ``values`` agree (so a wrong answer matches at most one slip, and never the right answer)."""
    return all(not np.allclose(a, b, rtol=1e-6, atol=1e-9) for i, a in enumerate(values) for b in values[i + 1:])


def clipped_grad_sum_check(fn: Callable[..., Any], trials: int = 2) -> None:
    """``fn(loss_fn, w, X, Y, C)`` -> a Tensor of w's shape: sum over i of g_i * min(1, C / |g_i|), g_i the gradient
    of ``loss_fn(w, X[i], Y[i])`` with respect to w and |g_i| its norm over all of w's entries (DP-SGD's clipping).

    For each of the check's losses (not the lesson's), at two batch sizes: the graph of w, X, Y is the check's;
    the function is called inside it with the loss (the sandbox's copy in a graded course); the result must be
    a Tensor of that graph of w's shape, equal at fresh w, X, Y (``trials`` times, with C between the smallest and
    the largest per-example norm, so some are clipped and some not) to the check's own loop of at.grad, clipped
    and summed in numpy; and the number of nodes the function added must not depend on n.
    """
    import asgteach as at

    from ..tensor import Tensor

    rng = fresh()
    for label, (own_loss, shapes, targets) in _LOSSES.items():
        d, k = int(rng.integers(2, 6)), int(rng.integers(2, 5))
        w_shape, x_shape, y_shape = shapes(d, k)
        n_small = int(rng.integers(3, 6))
        added: dict[int, int] = {}
        for n in (n_small, n_small + int(rng.integers(3, 21))):
            with at.Graph(name=f"check: {label}, {n} examples") as graph:
                w = at.parameter("w", w_shape)
                X, Y = at.input("X", (n, *x_shape)), at.input("Y", (n, *y_shape))
                c_in = at.input("C", ())
            loss_fn = on_submission_side(f"{__name__}.{own_loss.__name__}")
            call = (f"clipped_grad_sum(loss_fn, w, X, Y, C) with the check's {label} (w {w_shape}, X {X.shape}, "
                    f"Y {Y.shape}, C a scalar input)")
            before = len(graph)
            with graph:
                try:
                    got = fn(loss_fn, w, X, Y, c_in)
                except (ExerciseError, NotImplementedError):
                    raise
                except Exception as e:  # noqa: BLE001 - the student's function failing is a finding
                    raise ExerciseError(f"{call} raised {type(e).__name__}: {e}") from e
            if not isinstance(got, Tensor):
                raise ExerciseError(f"{call} should return a Tensor of X's graph (the clipped sum as a node), got "
                                    f"{type(got).__name__}: keep it a Tensor, the check runs it at values of its own")
            if got.graph is not graph:
                raise ExerciseError(f"{call} returned a Tensor of another graph, not a Tensor of X's graph (the "
                                    "graph of the w, X and Y it was given): build the result from the arguments")
            if got.shape != tuple(w_shape):
                extra = (" - one row per example: the per-example gradients, clipped or not, still to be summed"
                         if got.shape == (n, *w_shape) else "")
                raise ExerciseError(f"{call} returned a Tensor of shape {got.shape}; the clipped sum has w's shape "
                                    f"{tuple(w_shape)}{extra}")
            added[n] = len(graph) - before
            for trial in range(trials):
                for _ in range(100):   # values at which the right sum and each tempting wrong one differ (a batch
                    W = rng.standard_normal(w_shape)    # gradient no longer than C would equal its clipped self)
                    Xv, Yv = rng.standard_normal((n, *x_shape)), targets(rng, n, k)
                    G = _loop_of_grads(own_loss, W, Xv, Yv)
                    norms = np.sqrt((G.reshape(n, -1) ** 2).sum(axis=1))
                    C = float(rng.uniform(norms.min(), norms.max())) if norms.max() > norms.min() else float(norms[0])
                    want = _clipped_sum(G, C)
                    tempting = _tempting_sums(G, C)
                    if _apart([want, *(v for v, _ in tempting)]):
                        break
                try:
                    value = np.asarray(at.run(got, {w: W, X: Xv, Y: Yv, c_in: C}), dtype=np.float64)
                except Exception as e:  # noqa: BLE001 - a tensor that cannot run is a finding
                    raise ExerciseError(f"{call}: running your Tensor at fresh w, X, Y failed "
                                        f"({type(e).__name__}: {e})") from e
                try:
                    check_array(value, want, name="the clipped sum of the per-example gradients",
                                where=f"{call}, fresh values, C = {C:.4g}, trial {trial + 1}", rtol=1e-9, atol=1e-12)
                except ExerciseError as e:
                    hint = next((h for v, h in tempting if np.allclose(value, v, rtol=1e-8, atol=1e-11)),
                                "row i of vmap's result is example i's gradient; its norm runs over all of w's "
                                "entries (every axis but the first)")
                    raise ExerciseError(f"{e}\n  Hint: {hint}.") from None
        small, large = sorted(added)
        if added[small] != added[large]:
            raise ExerciseError(
                f"clipped_grad_sum added {added[small]} nodes to the graph for {small} examples and "
                f"{added[large]} for {large} (the check's {label}): one copy of the loss and its gradient per "
                "example, the loop that vmap exists to avoid. Write the gradient for ONE example and let at.vmap "
                "batch it: the nodes it adds do not depend on the batch size.")
