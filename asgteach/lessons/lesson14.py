"""Lesson 14's checks (deep nets: vanishing and exploding gradients), with their answers inside them.

Each check runs the student's function on what the lesson never showed:

* :func:`grad_norm_ratio_check` hands ``grad_norm_ratio(loss, weights, feeds)`` deep nets built
  here (other depths, widths, activations, biases, a residual net with LayerNorm, fresh weights)
  and compares with the ratio it measures itself; a wrong ratio is matched against the usual
  slips (last over first, the weights' own norms, squared norms, the largest element);
* :func:`predicted_factor_check` *measures* the per-layer factor of the backward signal on wide
  leaky-ReLU nets of its own and compares the student's *prediction* with it. The prediction runs
  with the library's ``matmul`` switched off: it is a formula, not another measurement;
* :func:`clip_by_global_norm_check` calls ``clip_by_global_norm(grads, max_norm)`` on fresh
  gradient lists, edge cases included (below the limit, all zeros, one huge element, an inf), with
  ``at.optim.clip_grad_norm`` switched off; clipping each tensor on its own, or each element
  (``np.clip``), is recognised and named;
* :func:`clipped_training_check` trains a deep net of its own that diverges without clipping, with
  the student's function in the loop, and demands that it trains.

``RULES[2]`` (a formula: no network, no measurement) and ``RULES[3]`` (numpy, not asgteach's clipping) are
read from the answers' source. The references are the answer keys' (``instructor/answer_keys.py``), and the
checks here say what they compare, so reading this file gives the lesson's exercises away: try them first.
"""

from __future__ import annotations

import functools

import math
import sys
import types
from functools import lru_cache
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ..grading.checks import check_array, without
from ..grading import rules
from ..grading.rules import STAND_INS, Rule
from ..grading.exercises import ExerciseError
from ..grading.keys import load as load_keys

from .common import call_answer, quiet

__all__ = ["LESSON", "RULES", "grad_norm_ratio_check", "predicted_factor_check", "clip_by_global_norm_check",
           "clipped_training_check"]

LESSON = "14-deep-nets-vanishing-and-exploding"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {
    2: Rule(why="a formula in width, std and slope: no network, no measurement",
            imports=STAND_INS | {"asgteach"}, names=frozenset({"at", "asgteach", "feeds_for", "train"})),
    3: Rule(why="write the clipping with numpy: a call into asgteach hands the work to asgteach's own clipping "
                "(clip_grad_norm is what you are rebuilding)",
            imports=STAND_INS | {"asgteach"}, names=frozenset({"at", "asgteach"}),
            attrs=frozenset({"clip_grad_norm", "clip_grad_norm_"})),
}


def _number(got: Any, call: str) -> float:
    if isinstance(got, (list, tuple)) or (isinstance(got, np.ndarray) and got.size != 1):
        raise ExerciseError(f"{call} should return one number, got {type(got).__name__} of "
                            f"{np.size(got)} values")
    try:
        return float(np.asarray(got, dtype=np.float64))
    except (TypeError, ValueError):
        raise ExerciseError(f"{call} should return a number, got {type(got).__name__}: {got!r:.80}") from None


# --- exercise 1: the first-to-last ratio of weight-gradient norms, on nets of the check's ------------------

def _deep_net(depth: int, width: int, activation: str, std: float, seed: int, batch: int = 8, bias: bool = False,
              residual: bool = False, layer_norm: bool = False, mse: bool = False,
              slope: float | None = None) -> tuple[Any, list, dict, str, list]:
    """(loss, weights first to last, feeds, a description, their gradients): a deep MLP the lesson never built."""
    import asgteach as at

    act = getattr(at, activation)              # the public op function of that name (at.tanh, at.leaky_relu...)
    if slope is not None:
        act = functools.partial(act, negative_slope=slope)
    what = (f"{depth} {activation} layers of width {width}{', biases' if bias else ''}"
            f"{', residual' if residual else ''}{', LayerNorm' if layer_norm else ''}, weights N(0, {std:g}^2)")
    rng = np.random.default_rng(seed)
    feeds: dict[Any, np.ndarray] = {}
    with at.Graph(name=f"check: {what}"):
        x = at.input("x", (batch, width))
        feeds[x] = rng.standard_normal((batch, width))
        h, weights = x, []
        for k in range(1, depth + 1):
            w = at.parameter(f"W{k}", (width, width))
            feeds[w] = std * rng.standard_normal((width, width))
            weights.append(w)
            z = h @ w
            if bias:
                b = at.parameter(f"b{k}", (width,))
                feeds[b] = 0.1 * rng.standard_normal(width)
                z = z + b
            if layer_norm:
                z = at.layer_norm(z)
            h = h + act(z) if residual else act(z)
        if mse:
            t = at.input("t", (batch, width))
            feeds[t] = rng.standard_normal((batch, width))
            loss = at.mean((h - t) ** 2)
        else:
            r = at.input("r", (width, 1))
            feeds[r] = rng.standard_normal((width, 1))
            loss = at.mean(h @ r)
        grads = at.grad(loss, weights)
    return loss, weights, feeds, what, grads


def _ratio_nets() -> Iterator[tuple[Any, list, dict, str, list]]:
    """The check's nets, built one at a time (a wrong answer stops at the first)."""
    yield _deep_net(12, 20, "tanh", 0.6, seed=11, bias=True)
    yield _deep_net(20, 16, "sigmoid", 0.25, seed=12)
    yield _deep_net(9, 24, "relu", 1.0, seed=13, residual=True, layer_norm=True)
    yield _deep_net(7, 12, "leaky_relu", 0.5, seed=14, batch=4, mse=True, slope=0.1)
    yield _deep_net(15, 10, "gelu", 0.2, seed=15, batch=5)


def _ratio_hint(got: float, grads: Sequence[np.ndarray], values: Sequence[np.ndarray]) -> str:
    g_first, g_last = np.asarray(grads[0]), np.asarray(grads[-1])
    w_first, w_last = np.asarray(values[0]), np.asarray(values[-1])
    slips = [
        (np.linalg.norm(g_last) / np.linalg.norm(g_first), "It is last over first: the exercise asks for the first "
                                                           "layer's norm divided by the last layer's."),
        (np.linalg.norm(w_first) / np.linalg.norm(w_last), "It is the ratio of the WEIGHTS' norms: take the norms of "
                                                           "their gradients, at.grad(loss, weights)."),
        (np.sum(g_first ** 2) / np.sum(g_last ** 2), "It is the ratio of the squared norms: take the square root of "
                                                     "the sum of squares."),
        (np.abs(g_first).max() / np.abs(g_last).max(), "It compares the largest elements: use the Frobenius norm, "
                                                       "the square root of the sum of the squares of all elements."),
    ]
    for value, hint in slips:
        if np.isfinite(got) and np.isclose(got, value, rtol=1e-6, atol=0.0):
            return " " + hint
    return (" The ratio is ||dL/dW_first|| / ||dL/dW_last||, Frobenius norms of the gradients at the values in "
            "feeds.")


def grad_norm_ratio_check(fn: Callable[[Any, list, dict], Any]) -> None:
    """``fn(loss, weights, feeds)`` -> ||dloss/dweights[0]|| / ||dloss/dweights[-1]|| (Frobenius norms), on nets
    built here: other depths, widths and activations, with biases, a residual net with LayerNorm, an MSE loss."""
    import asgteach as at

    if not callable(fn):
        raise ExerciseError(f"grad_norm_ratio should be a function, got {type(fn).__name__}")
    for k, (loss, weights, feeds, what, grads) in enumerate(_ratio_nets()):
        values = at.run(grads, feeds)
        want = float(np.linalg.norm(values[0]) / np.linalg.norm(values[-1]))
        call = f"grad_norm_ratio(loss, weights, feeds) on a net of the check's ({what})"
        got = _number(call_answer(fn, call, loss, list(weights), dict(feeds)), call)
        if not np.isclose(got, want, rtol=1e-6, atol=0.0):
            raise ExerciseError(f"{call}: the ratio should be {want:.6g}, got {got:.6g}."
                                + _ratio_hint(got, values, [feeds[w] for w in weights]))


# --- exercise 2: the per-layer factor of the backward signal, predicted, then measured here --------------

#: (width, weight std, negative slope of the leaky ReLU): slope 1 is a linear net, slope 0 a ReLU net
FACTOR_CASES = ((256, 0.05, 0.0), (128, 0.15, 1.0), (192, 0.1, 0.4), (256, 0.08, 0.25), (160, 0.3, 0.6))
#: nets no one can build (a width x width weight matrix of 10**12 and more entries): a formula answers, a measurement
#: cannot (issue 34: "measuring a gradient factor instead of predicting it")
WIDE_CASES = ((10**6, 1e-3, 0.0), (2**31, 3e-5, 0.3), (10**9, 4e-5, 1.0))


@lru_cache(maxsize=None)
def measured_factor(width: int, std: float, slope: float, depth: int = 16, batch: int = 32, seed: int = 0) -> float:
    """The per-layer factor of ||dL/dh|| going down a fresh net: (||dL/dx|| / ||dL/dh_top||) ** (1 / depth).

    ``depth`` layers ``h = leaky_relu(h @ W, slope)`` (slope 1: linear), W of shape (width, width) drawn from
    N(0, std^2), read out by a random vector (so the gradient arriving at the top is independent of the net).
    Seeded, so the same arguments measure the same number (cached: a check run twice measures once).
    """
    import asgteach as at

    rng = np.random.default_rng(seed)
    with at.Graph(name=f"check: {depth} leaky_relu({slope:g}) layers of width {width}"):
        x = at.input("x", (batch, width))
        r = at.input("r", (width, 1))
        feeds = {x: rng.standard_normal((batch, width)), r: rng.standard_normal((width, 1))}
        h = x
        for k in range(1, depth + 1):
            w = at.parameter(f"W{k}", (width, width))
            feeds[w] = std * rng.standard_normal((width, width))
            h = h @ w if slope == 1.0 else at.leaky_relu(h @ w, slope)
        dx, dh = at.grad(at.mean(h @ r), [x, h])
    gx, gh = at.run([dx, dh], feeds)
    return float((np.linalg.norm(gx) / np.linalg.norm(gh)) ** (1.0 / depth))


def predicted_factor_check(fn: Callable[[int, float, float], Any], rtol: float = 0.05) -> None:
    """``fn(width, std, slope)``: the predicted per-layer factor, within ``rtol`` of the factor measured on wide
    nets built here. The student's function runs with the library's matmul switched off (predict, don't measure)."""
    rules.enforce(fn, RULES[2], "predicted_factor")
    keys = load_keys()   # the references, loaded only when a check runs
    if not callable(fn):
        raise ExerciseError(f"predicted_factor should be a function, got {type(fn).__name__}")
    this = sys.modules[__name__]
    found = _borrows(fn, (keys.predicted_factor, measured_factor))
    if found:
        raise ExerciseError(f"predicted_factor hands the work to the check's own answer (as {found!r}): predict it "
                            "yourself")
    measured = [measured_factor(*case) for case in FACTOR_CASES]
    for (width, std, slope), m in zip(FACTOR_CASES, measured):
        call = f"predicted_factor({width}, {std:g}, {slope:g})"
        try:
            with without("matmul", attrs=[(keys, "predicted_factor"), (this, "measured_factor")],
                         why="predict the factor yourself"):
                got = _number(call_answer(fn, call, width, std, slope), call)
        except ExerciseError as e:
            if "the library's matmul" not in str(e):
                raise
            raise ExerciseError(f"{call} builds a graph with matmul: PREDICT the factor with a formula of width, "
                                "std and slope (no net, no measurement); the check measures it on nets of its own"
                                ) from None
        if np.isfinite(got) and abs(got / m - 1.0) <= rtol:
            continue
        msg = (f"{call} = {got:.4g}, but the factor measured on a fresh {width}-wide net of "
               f"leaky_relu(slope={slope:g}) layers with weights N(0, {std:g}^2) is {m:.4g} (a prediction within "
               f"{rtol:.0%} passes).")
        q = got / m if np.isfinite(got) and m else float("nan")
        if not np.isfinite(got) or got <= 0:
            msg += " A factor is a positive number: how much ||dL/dh|| is multiplied by per layer, going down."
        elif abs(q - math.sqrt(2.0)) < 0.05 * math.sqrt(2.0) or abs(q - 1 / math.sqrt(2.0)) < 0.05 / math.sqrt(2.0):
            msg += (" It is off by about sqrt(2): which fraction of the units pass the gradient back, and multiplied "
                    "by what?")
        elif slope not in (0.0, 1.0) and np.isclose(got, std * math.sqrt(width * (1.0 + slope) / 2.0), rtol=0.01):
            msg += (" A unit on the negative side multiplies the gradient by the slope: what does that do to the "
                    "gradient's SQUARE?")
        elif np.isclose(got, m * m, rtol=0.03):
            msg += (" That is about the factor of the SQUARED norm (a variance); the norm's factor is its square "
                    "root.")
        elif np.isclose(got, std * math.sqrt(width), rtol=0.02) and slope != 1.0:
            msg += " That is the linear net's factor: what does the leaky ReLU's derivative do to the backward signal?"
        else:
            msg += (" Backward, one layer is dL/dh_prev = (dL/dh * phi'(z)) @ W.T: how much does each step multiply "
                    "the squared norm, on average?")
        raise ExerciseError(msg)
    # A prediction answers where no measurement can: nets far too wide to build. A factor measured on random
    # nets (in numpy, say) passes the cases above within 5 %, but it cannot give these, and never to 1e-9.
    for width, std, slope in WIDE_CASES:
        call = f"predicted_factor({width}, {std:g}, {slope:g})"
        try:
            got = _number(call_answer(fn, call, width, std, slope), call)
        except ExerciseError as e:
            raise ExerciseError(f"{e}. A net {width} units wide is too wide to build, but its factor is a formula "
                                "away: predict it from width, std and slope (no net, no measurement)") from None
        want = keys.predicted_factor(width, std, slope)
        if not (np.isfinite(got) and abs(got / want - 1.0) <= 1e-9):
            raise ExerciseError(f"{call} = {got:.10g}: on a net this wide (too wide to build or measure) the "
                                f"predicted factor is {want:.10g}. A prediction is exact to round-off, a measurement "
                                "is not: write the factor as a formula of width, std and slope")


# --- exercise 3: clipping by the global norm -----------------------------------------------------------

def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):  # comprehensions, lambdas, nested functions
            names |= _code_names(const)
    return names


def _borrows(fn: Any, originals: Sequence[Any]) -> str | None:
    """The name under which ``fn`` reaches one of ``originals`` (the library's answer): itself, a global its code
    reads, or a variable of its closure."""
    if any(fn is o for o in originals):
        return getattr(fn, "__name__", "it")
    code = getattr(fn, "__code__", None)
    names = _code_names(code) if code is not None else set()
    for name, value in getattr(fn, "__globals__", {}).items():
        if name in names and any(value is o for o in originals):
            return name
    for cell, name in zip(getattr(fn, "__closure__", None) or (), getattr(code, "co_freevars", ())):
        try:
            if any(cell.cell_contents is o for o in originals):
                return name
        except ValueError:  # an empty cell
            continue
    return None


def _clip_cases() -> list[tuple[str, list[np.ndarray], float]]:
    """(what the case is, fresh gradients, max_norm)."""
    rng = np.random.default_rng(2024)
    shapes = [(3, 4), (4,), (2, 2, 2)]
    big = [3.0 * rng.standard_normal(s) for s in shapes]
    small = [rng.standard_normal(s) for s in shapes]
    small_norm = math.sqrt(sum(float(np.sum(g * g)) for g in small))
    equal = [rng.standard_normal(s) for s in [(5,), (2, 3)]]
    equal_norm = math.sqrt(sum(float(np.sum(g * g)) for g in equal))
    # two tensors each under the limit, together over it: per-tensor clipping leaves them alone
    a, b = rng.standard_normal((4, 3)), rng.standard_normal(6)
    a, b = 0.8 * a / np.linalg.norm(a), 0.75 * b / np.linalg.norm(b)
    huge = [rng.standard_normal((3, 3)), rng.standard_normal(5), rng.standard_normal((2, 2))]
    huge[1][2] = 1e8
    return [
        ("a norm above max_norm", big, 5.0),
        ("a norm below max_norm", small, 2.0 * small_norm),
        ("a norm exactly max_norm", equal, equal_norm),
        ("all-zero gradients", [np.zeros((3, 2)), np.zeros(4)], 1.0),
        ("two gradients each under max_norm, together over it", [a, b], 1.0),
        ("one huge element among small ones", huge, 1.0),
        ("a scalar gradient among matrices", [np.array(7.0), 2.0 * rng.standard_normal((3, 3))], 0.5),
        ("a norm just above max_norm", [0.5 * rng.standard_normal((6, 6))], 1.0),
    ]


def _clip_hint(got: Sequence[np.ndarray], grads: Sequence[np.ndarray], max_norm: float, norm: float) -> str:
    per_tensor = [g * min(1.0, max_norm / n) if (n := float(np.linalg.norm(g))) > 0 else g for g in grads]
    by_value = [np.clip(g, -max_norm, max_norm) for g in grads]
    always = [g * (max_norm / norm) for g in grads] if norm > 0 else None

    def same(xs: Sequence[np.ndarray] | None) -> bool:
        return xs is not None and all(np.shape(a) == np.shape(b) and np.allclose(a, b, rtol=1e-6, atol=1e-15)
                                      for a, b in zip(got, xs))

    if same(by_value):
        return ("That clips each ELEMENT to [-max_norm, max_norm] (clipping by value, np.clip), which changes the "
                "gradient's direction. Clip by the global norm: multiply every gradient by one factor.")
    if same(per_tensor):
        return ("Each gradient was clipped by its OWN norm. Clip by the global norm: one norm over all the gradients "
                "together, and one factor for all of them.")
    if norm <= max_norm and same(always):
        return "The global norm is not above max_norm here: the gradients should come back unchanged."
    if any(not np.all(np.isfinite(np.asarray(x, dtype=np.float64))) for x in got):
        return "The result holds nan or inf: do not divide by a norm of zero."
    return ("Clipped gradients are g * min(1, max_norm / norm), with norm = sqrt(sum of the squares of every element "
            "of every gradient).")


def clip_by_global_norm_check(fn: Callable[[list, float], Any]) -> None:
    """``fn(grads, max_norm)`` -> (clipped list, pre-clip global norm), on fresh gradient lists and edge cases,
    with asgteach's own clipping switched off (and refused when the answer holds it under another name)."""
    rules.enforce(fn, RULES[3], "clip_by_global_norm")
    keys = load_keys()   # the references, loaded only when a check runs
    from ..nn import optim

    if not callable(fn):
        raise ExerciseError(f"clip_by_global_norm should be a function, got {type(fn).__name__}")
    library = (optim.clip_grad_norm, optim.clip_grad_value, keys.clip_by_global_norm)
    found = _borrows(fn, library)
    if found:
        raise ExerciseError(f"clip_by_global_norm hands the work to asgteach's own clipping (as {found!r}): write "
                            "it yourself in numpy")
    for what, grads, max_norm in _clip_cases():
        want, want_norm = keys.clip_by_global_norm(grads, max_norm)
        call = f"clip_by_global_norm(<{len(grads)} gradients: {what}>, max_norm={max_norm:.4g})"
        with without(attrs=[(optim, "clip_grad_norm"), (optim, "clip_grad_value"), (keys, "clip_by_global_norm")],
                     why="clip the numpy gradients yourself"):
            result = call_answer(fn, call, [g.copy() for g in grads], max_norm)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise ExerciseError(f"{call} should return two things, (the clipped list, the norm before clipping), "
                                f"got {type(result).__name__}: {result!r:.80}")
        clipped, norm = result
        if not isinstance(clipped, (list, tuple)) or len(clipped) != len(grads):
            raise ExerciseError(f"{call}: the clipped gradients should be a list of {len(grads)} arrays (one per "
                                f"gradient, in order), got {type(clipped).__name__}"
                                + (f" of {len(clipped)}" if isinstance(clipped, (list, tuple)) else ""))
        got_norm = _number(norm, call)
        if not np.isclose(got_norm, want_norm, rtol=1e-9, atol=1e-12):
            after = math.sqrt(sum(float(np.sum(np.square(c))) for c in want))
            hint = (" That is the norm AFTER clipping: return the one before (what a training loop logs)."
                    if np.isclose(got_norm, after, rtol=1e-6) else
                    " The global norm is sqrt(sum over all gradients of the sum of their squared elements).")
            raise ExerciseError(f"{call}: the norm before clipping should be {want_norm:.6g}, got "
                                f"{got_norm:.6g}.{hint}")
        for j, (c, w) in enumerate(zip(clipped, want)):
            values = np.asarray(c, dtype=np.float64) if isinstance(c, (np.ndarray, float, int, list)) else None
            if values is not None and values.shape == w.shape and not np.all(np.isfinite(values)):
                raise ExerciseError(f"{call}: clipped[{j}] holds nan or inf, where every value should be finite"
                                    + (" (these gradients are all zero, so their norm is 0: do not divide by it)"
                                       if want_norm == 0 else ""))
            try:
                check_array(c, w, name=f"clipped[{j}]", where=call, rtol=1e-5, atol=1e-12)
            except ExerciseError as e:
                raise ExerciseError(f"{e}\n  {_clip_hint(clipped, grads, max_norm, want_norm)}") from None
    # an inf somewhere: the norm says so (a training loop then skips the step); the values are not checked
    grads = [np.array([1.0, np.inf]), np.ones((2, 2))]
    call = "clip_by_global_norm(<2 gradients, one holding inf>, max_norm=1)"
    with without(attrs=[(optim, "clip_grad_norm"), (optim, "clip_grad_value"), (keys, "clip_by_global_norm")],
                 why="clip the gradients yourself"):
        result = call_answer(fn, call, [g.copy() for g in grads], 1.0)
    norm = result[1] if isinstance(result, (tuple, list)) and len(result) == 2 else result
    got_norm = _number(norm, call)
    if not got_norm == math.inf:
        raise ExerciseError(f"{call}: the norm before clipping should be inf, got {got_norm!r} (compute it as it is, "
                            "so that the caller sees the gradient blew up)")


def _training_run(clip: Callable[[list, float], Any] | None, steps: int = 120, lr: float = 0.25,
                  max_norm: float = 1.0) -> list[float]:
    """SGD on a deep ReLU regression net of the check's own (He init, a learning rate too big for it)."""
    import asgteach as at

    rng = np.random.default_rng(77)
    dims = [6, 24, 24, 24, 24, 24, 24, 24, 1]
    xs = rng.standard_normal((48, dims[0]))
    ts = np.tanh(xs @ rng.standard_normal((dims[0], 1)))
    with at.Graph(name="check: a deep ReLU net and a big learning rate"):
        x, t = at.input("x", xs.shape), at.input("t", ts.shape)
        params, h = [], x
        for k, (a, b) in enumerate(zip(dims[:-1], dims[1:]), start=1):
            w, bias = at.parameter(f"W{k}", (a, b)), at.parameter(f"b{k}", (b,))
            params += [w, bias]
            h = h @ w + bias
            if k < len(dims) - 1:
                h = at.relu(h)
        loss = at.mean((h - t) ** 2)
        plan = at.compile([loss, *at.grad(loss, params)])
    values = []
    for a, b in zip(dims[:-1], dims[1:]):
        values += [rng.standard_normal((a, b)) * math.sqrt(2.0 / a), np.zeros(b)]
    history: list[float] = []
    with quiet():
        for step in range(steps):
            loss_value, *grads = plan.run({x: xs, t: ts, **dict(zip(params, values))}, on_nan="ignore")
            history.append(float(loss_value))
            if not np.isfinite(history[-1]) or history[-1] > 1e6:
                break
            if clip is not None:
                result = call_answer(clip, "clip_by_global_norm(grads, 1.0) in the check's training loop", grads,
                                     max_norm)
                grads = result[0]
            values = [v - lr * np.asarray(g, dtype=np.float64) for v, g in zip(values, grads)]
    return history


def clipped_training_check(fn: Callable[[list, float], Any]) -> None:
    """Train a deep net of the check's own, which diverges without clipping, with ``fn`` clipping every step."""
    plain = _training_run(None)
    if np.isfinite(plain[-1]) and plain[-1] < 1e6:  # pragma: no cover - the check's own scenario
        raise RuntimeError("the check's training run should diverge without clipping")
    history = _training_run(fn)
    if len(history) < 120 or not np.all(np.isfinite(history)) or history[-1] > 0.05 * history[0]:
        raise ExerciseError(
            f"a deep ReLU net of the check's (lr 0.25, max_norm 1) diverges without clipping (loss {plain[0]:.3g} -> "
            f"{plain[-1]:.3g} in {len(plain)} steps); with your clip_by_global_norm in the loop its loss went "
            f"{history[0]:.3g} -> {history[-1]:.3g} in {len(history)} steps, but it should train to below "
            f"{0.05 * history[0]:.3g} in 120 steps")
