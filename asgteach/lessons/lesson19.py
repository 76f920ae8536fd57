"""Lesson 19's checks (training-time state: dropout, batch norm, stop_gradient, weight decay, a validation split).

Each check runs the student's function on what the lesson never showed, and compares it with asgteach's own
layers and optimizers run here, or with a choice it makes itself:

* :func:`batchnorm_forward_check` calls ``batchnorm_forward(x, gamma, beta, running_mean, running_var, momentum,
  eps, training)`` on inputs of its own, (N, C) and (N, C, L), in training and in evaluation, at momentum 0, 1 and
  in between, with a large eps, two rows (n = 2) and a batch of one sequence, and compares the output and the two
  running statistics with ``at.nn.BatchNorm1d`` run on the same numbers; a wrong answer is matched against the
  usual slips (the biased running variance, momentum the wrong way round, eps outside the square root, the batch's
  statistics in evaluation...) to say which one it looks like;
* :func:`decay_per_step_check` *measures* how far weight decay moves a parameter per step, on asgteach's own
  ``SGD(weight_decay=)``, ``Adam(weight_decay=)`` (L2) and ``AdamW``, fed gradients of a given size for a thousand
  steps, and compares the student's *prediction* with it; then asks for cases where only the formula answers to
  round-off (one step of the library's update from the settled state);
* :func:`choose_by_validation_check` hands ``choose_by_validation(fit, error, candidates, X_train, y_train, X_val,
  y_val)`` ridge regressions and polynomial fits of its own, through ``fit`` and ``error`` functions that record
  what they are called on. No test set is passed at all: a function that evaluates on anything but the training
  and validation sets it was given (the notebook's test set, say) is caught by what it asks ``error`` for, and the
  choice must be the candidate with the lowest validation error.

``RULES`` (numpy for batch norm; a formula, not a measurement, for the decay; no test set and no library's search
for the choice) are read from the answers' source. Reading this file gives the exercises away: try them first.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ..grading import rules
from ..grading.checks import check_array, without
from ..grading.exercises import ExerciseError
from ..grading.rules import STAND_INS, Rule
from .common import call_answer, fresh

__all__ = ["LESSON", "RULES", "OPTIMIZERS", "batchnorm_forward_check", "decay_per_step_check",
           "choose_by_validation_check"]

LESSON = "19-training-time-state"

#: exercise -> what its answer may not use (the notebook's text states each one). Each names this module too: it
#: holds the checks' references, and the hands-off rule of the judge does not list it by name.
RULES: dict[int, Rule] = {
    1: Rule(why="write batch norm with numpy: asgteach's BatchNorm1d (and any other library's batch norm) is what "
                "the check compares with",
            imports=STAND_INS | {"asgteach"}, names=frozenset({"at", "asgteach", "lesson19"}),
            attrs=frozenset({"BatchNorm1d", "BatchNorm2d", "batch_norm"})),
    2: Rule(why="a prediction is a formula in w, grad_rms, lr and wd: no optimizer run, no measurement (neither "
                "asgteach's optimizers nor section 4's measure_decay)",
            imports=STAND_INS | {"asgteach"},
            names=frozenset({"at", "asgteach", "lesson19", "measure_decay", "update_plan"})),
    3: Rule(why="choose with the training and validation sets only: the test set (X_test, y_test) and the world "
                "(X_world, y_world) are for the one report after the choice, and no library's search does it for you",
            imports=STAND_INS | {"asgteach"},
            names=frozenset({"at", "asgteach", "lesson19", "X_test", "y_test", "X_world", "y_world", "draw",
                             "data_rng", "world_accuracy", "world_correct", "test_accuracies",
                             "test_accuracy_chosen"})),
}

#: the optimizers of exercise 2, by the name the student's function is given
OPTIMIZERS = ("sgd", "adam", "adamw")


def _array(got: Any, what: str, call: str) -> np.ndarray:
    try:
        return np.asarray(got, dtype=np.float64)
    except (TypeError, ValueError):
        raise ExerciseError(f"{call}: {what} should be a numpy array of numbers, got {type(got).__name__}: "
                            f"{got!r:.80}") from None


def _close(got: Any, want: np.ndarray, rtol: float = 1e-6, atol: float = 1e-9) -> bool:
    try:
        a = np.asarray(got, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return a.shape == want.shape and bool(np.all(np.isclose(a, want, rtol=rtol, atol=atol)))


# --- exercise 1: batch norm's forward pass and its running statistics ---------------------------------------

#: (what the case is, x's shape, momentum, eps, training)
BN_CASES = (
    ("a batch of 6 rows and 4 channels, training", (6, 4), 0.1, 1e-5, True),
    ("the same kind of layer in evaluation", (6, 4), 0.1, 1e-5, False),
    ("sequences (N, C, L) = (5, 3, 7), training: statistics over N and L", (5, 3, 7), 0.3, 1e-3, True),
    ("two rows (n = 2 values per channel), momentum 1", (2, 5), 1.0, 1e-5, True),
    ("sequences (4, 3, 5) in evaluation, eps 0.5", (4, 3, 5), 0.2, 0.5, False),
    ("one sequence (N = 1, L = 6), momentum 0", (1, 2, 6), 0.0, 1e-5, True),
    ("one channel, 9 rows, momentum 0.5, eps 0.2", (9, 1), 0.5, 0.2, True),
)


def _library_bn(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, running_mean: np.ndarray,
                running_var: np.ndarray, momentum: float, eps: float, training: bool) -> tuple[np.ndarray, ...]:
    """asgteach's BatchNorm1d on these numbers: (y, the running mean after the step, the running variance after it).

    The layer's graph computes the next running statistics in both modes; a runner keeps them only after a
    training step, so in evaluation they come back as they were."""
    import asgteach as at

    with at.Graph(name=f"check: BatchNorm1d on {x.shape}") as g:
        xi = at.input("x", x.shape)
        y = at.nn.BatchNorm1d(x.shape[1], eps=eps, momentum=momentum, name="bn")(xi)
    nxt = {n.name.rsplit(".", 1)[1]: at.Tensor(g, n.supplied.next) for n in g.nodes
           if n.supplied is not None and n.supplied.kind == "running_stat"}
    feeds = {xi: x, "bn.weight": gamma, "bn.bias": beta, "bn.running_mean": running_mean,
             "bn.running_var": running_var}
    y_v, mean_v, var_v = at.run([y, nxt["running_mean"], nxt["running_var"]], feeds, training=training)
    if not training:
        mean_v, var_v = running_mean.copy(), running_var.copy()
    return y_v, mean_v, var_v


def _bn_slip(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, running_mean: np.ndarray, running_var: np.ndarray,
             momentum: float, eps: float, training: bool, slip: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Batch norm with one usual slip (``slip``, a key of :data:`_BN_SLIPS`, or "" for none): for the hints only,
    the reference is the library's layer."""
    c = x.shape[1]
    per_channel = [1] * x.ndim
    per_channel[1] = c
    axes = (0,) if slip == "axis 0 only" else (0, *range(2, x.ndim))
    mean, var = x.mean(axis=axes, keepdims=True), x.var(axis=axes, keepdims=True)
    n = x.shape[0] if slip in ("axis 0 only", "n = N") else math.prod(x.shape[a] for a in axes)
    unbiased = var * (n / (n - 1)) if n > 1 else np.full(var.shape, np.inf)
    use_batch = {"evaluation uses the batch": True, "training uses the running": False}.get(slip, training)
    if use_batch:
        mu, v = mean, (unbiased if slip == "normalised with the unbiased variance" else var)
    else:
        mu, v = running_mean.reshape(per_channel), running_var.reshape(per_channel)
    denom = np.sqrt(v) + eps if slip == "eps outside the square root" else np.sqrt(v + eps)
    y = (x - mu) / denom * gamma.reshape(per_channel) + beta.reshape(per_channel)

    def per_c(a: np.ndarray) -> np.ndarray:      # a channel statistic as a (C,) vector
        return np.moveaxis(a, 1, 0).reshape(c, -1).mean(axis=1)

    batch_mean = per_c(mean)
    batch_var = per_c(var) if slip == "biased running variance" else per_c(unbiased)
    m = momentum
    if slip == "momentum the wrong way round":
        new_mean, new_var = m * running_mean + (1 - m) * batch_mean, m * running_var + (1 - m) * batch_var
    else:
        new_mean, new_var = (1 - m) * running_mean + m * batch_mean, (1 - m) * running_var + m * batch_var
    updates = {"evaluation updates": True, "training does not update": False}.get(slip, training)
    if not updates:
        new_mean, new_var = running_mean.copy(), running_var.copy()
    return y, new_mean, new_var


#: slip -> what to say (the first that matches the wrong output is said)
_BN_SLIPS = {
    "evaluation uses the batch": "In evaluation, normalise with running_mean and running_var: a prediction must not "
                                 "depend on the other examples of its batch (nor fail on a batch of one).",
    "training uses the running": "In training, normalise with the batch's own mean and variance; the running "
                                 "statistics are what evaluation uses.",
    "normalised with the unbiased variance": "Normalise with the BIASED variance of the batch (divide by n), as "
                                             "PyTorch does; the unbiased one (times n / (n - 1)) is only for the "
                                             "running variance.",
    "eps outside the square root": "eps goes inside the square root: (x - mean) / sqrt(var + eps).",
    "axis 0 only": "For x of shape (N, C, L) the statistics of a channel are over N AND L: every axis but axis 1.",
    "biased running variance": "The running variance is the UNBIASED one: the batch variance times n / (n - 1), "
                               "n = the values per channel (N, or N * L).",
    "n = N": "n counts every value of a channel: N * L for x of shape (N, C, L), not N.",
    "momentum the wrong way round": "PyTorch's momentum is the weight of the NEW statistic: running = (1 - momentum) "
                                    "* running + momentum * batch statistic.",
    "evaluation updates": "In evaluation the running statistics come back unchanged: only a training step moves "
                          "them.",
    "training does not update": "In training, return the running statistics after this step's update, not the "
                                "ones you were given.",
}


def _bn_hint(got: Sequence[Any], part: int, case: tuple[Any, ...]) -> str:
    for slip, hint in _BN_SLIPS.items():
        if case[0].ndim < 3 and slip in ("axis 0 only", "n = N"):
            continue
        wrong = _bn_slip(*case, slip)
        right = _bn_slip(*case, "")
        if _close(wrong[part], right[part]):
            continue     # this slip changes nothing in this part of this case
        if _close(got[part], wrong[part]):
            return " " + hint
    return ""


def batchnorm_forward_check(fn: Callable[..., Any]) -> None:
    """``fn(x, gamma, beta, running_mean, running_var, momentum, eps, training)`` -> (y, new running mean, new
    running variance), compared with ``at.nn.BatchNorm1d`` on cases of the check's own (:data:`BN_CASES`), with the
    library's batch norm switched off while it runs (practice mode) and its rule read from its source."""
    from ..nn import normalization

    rules.enforce(fn, RULES[1], "batchnorm_forward")
    if not callable(fn):
        raise ExerciseError(f"batchnorm_forward should be a function, got {type(fn).__name__}")
    rng = fresh()
    for what, shape, momentum, eps, training in BN_CASES:
        c = shape[1]
        scale = rng.uniform(0.3, 4.0, c) * rng.choice([-1.0, 1.0], c)
        shift = rng.uniform(-3.0, 3.0, c)
        per_channel = [1] * len(shape)
        per_channel[1] = c
        x = rng.standard_normal(shape) * scale.reshape(per_channel) + shift.reshape(per_channel)
        gamma, beta = rng.uniform(0.5, 2.0, c), rng.uniform(-1.0, 1.0, c)
        running_mean, running_var = rng.uniform(-2.0, 2.0, c), rng.uniform(0.3, 3.0, c)
        case = (x, gamma, beta, running_mean, running_var, momentum, eps, training)
        want = _library_bn(*case)
        call = (f"batchnorm_forward(<x {shape}>, gamma, beta, running_mean, running_var, momentum={momentum:g}, "
                f"eps={eps:g}, training={training}) on {what}")
        with without(attrs=[(normalization.BatchNormBase, "forward")], why="write batch norm with numpy"):
            got = call_answer(fn, call, x.copy(), gamma.copy(), beta.copy(), running_mean.copy(), running_var.copy(),
                        momentum, eps, training)
        if not isinstance(got, (tuple, list)) or len(got) != 3:
            raise ExerciseError(f"{call} should return three arrays, (y, new_running_mean, new_running_var), got "
                                f"{type(got).__name__}: {got!r:.80}")
        got = [_array(g, name, call) for g, name in zip(got, ("y", "new_running_mean", "new_running_var"))]
        for part, name in enumerate(("y", "new_running_mean", "new_running_var")):
            try:
                check_array(got[part], want[part], name=name, where=call, rtol=1e-6, atol=1e-9)
            except ExerciseError as e:
                raise ExerciseError(f"{e}{_bn_hint(got, part, case)}") from None


# --- exercise 2: how far weight decay moves a parameter, predicted, then measured here -----------------------

def _optimizer(kind: str, wd: float) -> Any:
    from ..nn import optim

    return {"sgd": optim.SGD, "adam": optim.Adam, "adamw": optim.AdamW}[kind](weight_decay=wd)


def _update_plan(kind: str, wd: float, shape: tuple[int, ...]) -> tuple[Any, Any, Any, Any, Any, Any]:
    """One step of the library's optimizer as a compiled plan: (plan, w, g, lr, step, update)."""
    import asgteach as at

    with at.Graph(name=f"check: one {kind} step, weight_decay={wd:g}"):
        w, g = at.input("w", shape), at.input("g", shape)
        lr, step = at.input("lr", ()), at.input("step", ())
        up = _optimizer(kind, wd).build([w], [g], lr, step)
    return at.compile([up.new_params[0], *up.state_out]), w, g, lr, step, up


def measured_decay(kind: str, w: np.ndarray, grad_rms: np.ndarray, lr: float, wd: float, steps: int = 1500,
                   settle: int = 500, replicas: int = 32, seed: int = 0) -> np.ndarray:
    """How much further each parameter moves per step with weight decay than without, on the library's optimizer.

    Each parameter is held at its value in ``w`` and fed gradients of mean 0 and root mean square ``grad_rms``
    (``replicas`` copies of it, each its own random stream, the same stream with and without decay); the
    difference of the two updates, ``w_new(without) - w_new(with)``, is averaged over the steps after ``settle``
    (Adam's moments have settled by then) and over the copies."""
    w, grad_rms = np.asarray(w, dtype=np.float64), np.asarray(grad_rms, dtype=np.float64)
    shape = (replicas, *w.shape)
    runs = [_update_plan(kind, wd, shape), _update_plan(kind, 0.0, shape)]
    states = [[np.zeros(shape) for _ in up.state_in] for *_, up in runs]
    W = np.broadcast_to(w, shape).copy()
    rng = np.random.default_rng(seed)
    total = np.zeros(w.shape)
    for t in range(1, steps + 1):
        G = rng.standard_normal(shape) * grad_rms
        new = []
        for k, (plan, wi, gi, lri, stepi, up) in enumerate(runs):
            out = plan.run({wi: W, gi: G, lri: lr, stepi: float(t), **dict(zip(up.state_in, states[k]))})
            new.append(out[0])
            states[k] = list(out[1:])
        if t > settle:
            total += (new[1] - new[0]).mean(axis=0)
    return total / (steps - settle)


def settled_decay(kind: str, w: np.ndarray, grad_rms: np.ndarray, lr: float, wd: float) -> np.ndarray:
    """The same difference from ONE step of the library's update, taken from the settled state itself: Adam's
    averages at their means (m = the mean gradient the update sees, 0 without decay and wd * w with L2; v such that
    v_hat after the step is grad_rms ** 2; a step count so large that the bias corrections are 1) and a gradient of
    0. What a prediction gives to round-off and a measurement only to a percent."""
    w, grad_rms = np.asarray(w, dtype=np.float64), np.asarray(grad_rms, dtype=np.float64)
    out = []
    for decay in (wd, 0.0):
        plan, wi, gi, lri, stepi, up = _update_plan(kind, decay, w.shape)
        state = []
        for s in up.state_in:
            role = s.node.meta["optimizer_state"]
            if role == "m":
                state.append(decay * w if kind == "adam" else np.zeros(w.shape))
            else:   # "v": b2 v + (1 - b2) g^2 = grad_rms^2 (the decay's own square is below round-off here)
                state.append(grad_rms ** 2 / 0.999)
        res = plan.run({wi: w, gi: np.zeros(w.shape), lri: lr, stepi: 1e6, **dict(zip(up.state_in, state))})
        out.append(res[0])
    return out[1] - out[0]


def _decay_cases(rng: np.random.Generator) -> list[tuple[str, np.ndarray, np.ndarray, float, float]]:
    """(optimizer, w, grad_rms, lr, wd), measured: gradients far larger than wd * |w|, as the prediction assumes."""
    def signs(n: int) -> np.ndarray:
        return rng.choice([-1.0, 1.0], n)

    w1, w2, w3 = signs(4) * rng.uniform(0.2, 2.0, 4), signs(5) * rng.uniform(0.2, 2.0, 5), signs(4) * rng.uniform(
        0.2, 2.0, 4)
    return [
        ("sgd", w1, np.array([1.0, 0.1, 5.0, 0.5]), float(rng.uniform(0.02, 0.1)), float(rng.uniform(0.005, 0.05))),
        ("adam", w2, np.array([8.0, 1.0, 0.2, 3.0, 0.06]), float(rng.uniform(1e-3, 1e-2)),
         float(rng.uniform(5e-4, 1e-3))),
        ("adamw", w3, np.array([2.0, 0.05, 0.5, 10.0]), float(rng.uniform(1e-3, 1e-2)),
         float(rng.uniform(0.01, 0.1))),
        # gradients as small as Adam's eps (1e-8): there eps counts
        ("adam", signs(4) * np.array([2e-7, 1e-7, 5e-8, 1e-7]), np.array([3e-8, 1e-7, 1e-8, 5e-9]),
         float(rng.uniform(1e-3, 1e-2)), 1e-4),
    ]


def _exact_cases(rng: np.random.Generator) -> list[tuple[str, np.ndarray, np.ndarray, float, float]]:
    """Cases a measurement cannot answer to round-off: 2-D parameters, gradients from 1e-9 to 10. (lr * wd is kept
    above 1e-4, so that d is not lost in the round-off of w - d: the library's difference is exact to ~1e-11.)"""
    cases = []
    for kind in ("adam", "sgd", "adamw", "adam"):
        rms = 10.0 ** rng.uniform(-9, 1, (2, 3))
        lr, wd = float(10.0 ** rng.uniform(-2, -0.5)), float(10.0 ** rng.uniform(-2, -1))
        w = rng.choice([-1.0, 1.0], (2, 3)) * rms * 1e-5 / wd * rng.uniform(0.1, 1.0, (2, 3))   # wd |w| << rms
        if kind != "adam":
            w = rng.choice([-1.0, 1.0], (2, 3)) * rng.uniform(0.1, 3.0, (2, 3))
        cases.append((kind, w, rms, lr, wd))
    return cases


def _decay_hint(kind: str, got: np.ndarray, w: np.ndarray, rms: np.ndarray, lr: float, wd: float) -> str:
    eps = 1e-8
    plain = lr * wd * w
    divided = plain / (rms + eps)

    def near(a: np.ndarray) -> bool:
        return got.shape == a.shape and bool(np.allclose(got, a, rtol=0.05, atol=0.0))

    if near(-plain) or near(-divided) or (kind == "adam" and near(-divided)):
        return (" The sign: d is what weight decay SUBTRACTS from w (w_new = w_new without decay - d), so it has "
                "w's sign.")
    if kind == "adam":
        if near(plain):
            return (" That is the decay of SGD and AdamW. With L2 in the loss (at.optim.Adam(weight_decay=...)) the "
                    "term wd * w joins the gradient, and Adam divides ALL of its gradient by sqrt(v_hat) + eps: "
                    "what is sqrt(v_hat) once it has settled?")
        if near(plain / (rms ** 2 + eps)):
            return " v_hat settles at the mean of g**2, about grad_rms**2: Adam divides by its square root."
        if near(plain / rms):
            return " Adam divides by sqrt(v_hat) + eps (eps = 1e-8): with gradients this small, eps counts."
    elif near(divided):
        return (" SGD divides nothing: its step is lr times the gradient." if kind == "sgd" else
                " AdamW shrinks w directly, w * (1 - lr * wd), outside Adam's division by sqrt(v_hat) + eps.")
    return (" Where does weight decay enter each update (section 4)? As L2 it joins the gradient; decoupled, it "
            "shrinks w directly. Then: what does the optimizer do to that part of its gradient, once its averages "
            "have settled?")


def decay_per_step_check(fn: Callable[..., Any]) -> None:
    """``fn(optimizer, w, grad_rms, lr, wd)`` -> d, the part of each step that weight decay adds (w_new = w_new
    without decay - d), predicted; compared with :func:`measured_decay` on the library's optimizers (within 5 %),
    then with :func:`settled_decay` to round-off, where only a formula answers."""
    from ..nn import optim

    rules.enforce(fn, RULES[2], "decay_per_step")
    if not callable(fn):
        raise ExerciseError(f"decay_per_step should be a function, got {type(fn).__name__}")
    rng = fresh()
    refused = [(optim.SGD, "build"), (optim.Adam, "build")]
    for kind, w, rms, lr, wd in _decay_cases(rng):
        want = measured_decay(kind, w, rms, lr, wd, seed=int(rng.integers(2**31)))
        call = (f"decay_per_step({kind!r}, w={np.array2string(w, precision=3)}, grad_rms="
                f"{np.array2string(rms, precision=3)}, lr={lr:.3g}, wd={wd:.3g})")
        with without(attrs=refused, why="predict it: a formula, not an optimizer run"):
            got = _array(call_answer(fn, call, kind, w.copy(), rms.copy(), lr, wd), "d", call)
        if got.shape != w.shape:
            raise ExerciseError(f"{call} should return an array of w's shape {w.shape}, got shape {got.shape}")
        bad = ~np.isclose(got, want, rtol=0.05, atol=0.0)
        if bad.any():
            k = int(np.argmax(bad))
            raise ExerciseError(
                f"{call}: for parameter {k} (w = {w[k]:.4g}, gradients of rms {rms[k]:.3g}) weight decay's part of "
                f"the step, measured on asgteach's {kind} over 1000 steps, is d = {want[k]:.4g}, but your prediction "
                f"is {got[k]:.4g} (within 5 % passes)." + _decay_hint(kind, got, w, rms, lr, wd))
    for kind, w, rms, lr, wd in _exact_cases(rng):
        want = settled_decay(kind, w, rms, lr, wd)
        call = f"decay_per_step({kind!r}, <w (2, 3)>, <grad_rms from {rms.min():.2g} to {rms.max():.2g}>, " \
               f"lr={lr:.3g}, wd={wd:.3g})"
        with without(attrs=refused, why="predict it: a formula, not an optimizer run"):
            got = _array(call_answer(fn, call, kind, w.copy(), rms.copy(), lr, wd), "d", call)
        if got.shape != w.shape or not np.allclose(got, want, rtol=1e-9, atol=0.0):
            hint = _decay_hint(kind, got, w, rms, lr, wd) if got.shape == w.shape else ""
            raise ExerciseError(
                f"{call}: d should be {np.array2string(want.ravel(), precision=6)}, got "
                f"{np.array2string(got.ravel(), precision=6)}. A prediction from the settled state is exact to "
                "round-off, a measurement is not: write d as a formula of w, grad_rms, lr and wd." + hint)


# --- exercise 3: a choice made on the validation set --------------------------------------------------------

def _ridge_fit(lam: float, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.linalg.solve(X.T @ X + lam * np.eye(X.shape[1]), X.T @ y)


def _ridge_error(w: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean((X @ w - y) ** 2))


def _poly_fit(degree: int, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.polynomial.polynomial.polyfit(x, y, int(degree))


def _poly_error(coefs: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean((np.polynomial.polynomial.polyval(x, coefs) - y) ** 2))


def _selection_cases(rng: np.random.Generator) -> Iterator[tuple[str, list, Callable, Callable, tuple, tuple]]:
    """(what, candidates, fit, error, (X_train, y_train), (X_val, y_val)): the best on validation is neither the best
    on training nor the first or last candidate, and no two validation errors are close."""
    def usable(candidates: list, fit: Callable, error: Callable, train: tuple, val: tuple) -> bool:
        models = [fit(c, *train) for c in candidates]
        v = np.array([error(m, *val) for m in models])
        t = np.array([error(m, *train) for m in models])
        order = np.sort(v)
        return (int(np.argmin(v)) not in (0, len(v) - 1, int(np.argmin(t)), int(np.argmax(t)))
                and order[1] - order[0] > 1e-3 * order[0])

    # ridge regression, 30 features, few rows: the smallest penalty fits the training set best and generalises worst
    for _ in range(200):
        d, n_tr, n_val = 30, 40, 60
        w_true = rng.standard_normal(d)
        X_tr, X_val = rng.standard_normal((n_tr, d)), rng.standard_normal((n_val, d))
        y_tr = X_tr @ w_true + 3.0 * rng.standard_normal(n_tr)
        y_val = X_val @ w_true + 3.0 * rng.standard_normal(n_val)
        cands = [float(c) for c in rng.permutation([1e-3, 0.03, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0])]
        if usable(cands, _ridge_fit, _ridge_error, (X_tr, y_tr), (X_val, y_val)):
            yield ("ridge regressions (30 features, 40 training rows), the penalty to choose", cands, _ridge_fit,
                   _ridge_error, (X_tr, y_tr), (X_val, y_val))
            break
    else:  # pragma: no cover - the check's own scenario
        raise RuntimeError("no usable ridge case drawn")
    # polynomials of one variable: the highest degree fits the 16 training points best
    for _ in range(200):
        x_tr, x_val = rng.uniform(-1, 1, 16), rng.uniform(-1, 1, 50)
        y_tr = np.sin(3.0 * x_tr) + 0.5 * x_tr + 0.3 * rng.standard_normal(16)
        y_val = np.sin(3.0 * x_val) + 0.5 * x_val + 0.3 * rng.standard_normal(50)
        cands = [int(c) for c in rng.permutation([1, 2, 3, 4, 5, 7, 9, 12])]
        if usable(cands, _poly_fit, _poly_error, (x_tr, y_tr), (x_val, y_val)):
            yield ("polynomial fits to 16 points, the degree to choose", cands, _poly_fit, _poly_error, (x_tr, y_tr),
                   (x_val, y_val))
            break
    else:  # pragma: no cover
        raise RuntimeError("no usable polynomial case drawn")
    # another ridge case: more rows, another size and candidate list
    for _ in range(200):
        d, n_tr, n_val = 12, 20, 100
        w_true = rng.standard_normal(d) * 0.5
        X_tr, X_val = rng.standard_normal((n_tr, d)), rng.standard_normal((n_val, d))
        y_tr = X_tr @ w_true + 2.0 * rng.standard_normal(n_tr)
        y_val = X_val @ w_true + 2.0 * rng.standard_normal(n_val)
        cands = [float(c) for c in rng.permutation([0.01, 0.5, 2.0, 8.0, 20.0, 60.0, 200.0])]
        if usable(cands, _ridge_fit, _ridge_error, (X_tr, y_tr), (X_val, y_val)):
            yield ("ridge regressions (12 features, 20 training rows), the penalty to choose", cands, _ridge_fit,
                   _ridge_error, (X_tr, y_tr), (X_val, y_val))
            break
    else:  # pragma: no cover
        raise RuntimeError("no usable second ridge case drawn")


def _same(a: Any, b: np.ndarray) -> bool:
    try:
        arr = np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return arr.shape == b.shape and bool(np.array_equal(arr, b))


def choose_by_validation_check(fn: Callable[..., Any]) -> None:
    """``fn(fit, error, candidates, X_train, y_train, X_val, y_val)`` -> (the chosen candidate, its model), on
    problems of the check's own. ``fit`` and ``error`` are the check's and record what they are asked: a fit on
    anything but the training set, or an error on anything but the training or validation set, fails the exercise
    whatever the function returns (no test set is passed: one it finds elsewhere is data the check did not give)."""
    rules.enforce(fn, RULES[3], "choose_by_validation")
    if not callable(fn):
        raise ExerciseError(f"choose_by_validation should be a function, got {type(fn).__name__}")
    rng = fresh()
    for what, cands, fitter, err, (X_tr, y_tr), (X_val, y_val) in _selection_cases(rng):
        stray_fits: list[str] = []
        stray_errors: list[str] = []
        on_val: list[Any] = []

        def fit(candidate: Any, X: Any, y: Any) -> np.ndarray:
            if not (_same(X, X_tr) and _same(y, y_tr)):
                stray_fits.append(f"fit({candidate!r}, <{np.shape(X)}>, <{np.shape(y)}>)")
                raise ValueError("fit: these are not the training data this check gave you")
            return fitter(candidate, np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64))

        def error(model: Any, X: Any, y: Any) -> float:
            is_train, is_val = _same(X, X_tr) and _same(y, y_tr), _same(X, X_val) and _same(y, y_val)
            if not (is_train or is_val):
                stray_errors.append(f"error(model, <{np.shape(X)}>, <{np.shape(y)}>)")
                raise ValueError("error: these are neither the training nor the validation data this check gave you")
            value = err(np.asarray(model, dtype=np.float64), np.asarray(X, dtype=np.float64),
                        np.asarray(y, dtype=np.float64))
            if is_val:
                on_val.append(value)
            return value

        call = f"choose_by_validation(fit, error, {cands}, X_train, y_train, X_val, y_val) on {what}"
        try:
            result = call_answer(fn, call, fit, error, list(cands), X_tr.copy(), y_tr.copy(), X_val.copy(),
                                 y_val.copy())
        except ExerciseError:
            if not (stray_fits or stray_errors):
                raise
            result = None
        if stray_errors:
            raise ExerciseError(
                f"{call}: your function asked for {stray_errors[0]}, on data that are neither the training set nor "
                "the validation set it was given (the notebook's test set?). Choose with the validation set only: the "
                "test set is looked at once, after the choice, to report how the chosen model does.")
        if stray_fits:
            raise ExerciseError(
                f"{call}: your function asked for {stray_fits[0]}, on data that are not the training set it was "
                "given. Fit every candidate on the training set only: the validation set must be data the fit never "
                "saw, or its error says nothing about new data.")
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise ExerciseError(f"{call} should return two things, (the chosen candidate, its model), got "
                                f"{type(result).__name__}: {result!r:.80}")
        best, model = result
        models = [fitter(c, X_tr, y_tr) for c in cands]
        val_errors = np.array([err(m, X_val, y_val) for m in models])
        train_errors = np.array([err(m, X_tr, y_tr) for m in models])
        want = cands[int(np.argmin(val_errors))]
        if not (isinstance(best, (int, float, np.integer, np.floating)) and best == want):
            table = ", ".join(f"{c!r}: {v:.4g}" for c, v in zip(cands, val_errors))
            if best == cands[int(np.argmin(train_errors))]:
                hint = ("That candidate has the lowest TRAINING error: the training set rewards the model that fits "
                        "it best, noise included. Compare the candidates on the validation set.")
            elif best == cands[int(np.argmax(val_errors))]:
                hint = "That candidate has the HIGHEST validation error: error is lower-is-better."
            elif not on_val:
                hint = "Your function never asked for an error on the validation set: compare the candidates there."
            else:
                hint = "Fit each candidate on the training set, ask error(model, X_val, y_val), keep the lowest."
            raise ExerciseError(f"{call}: the choice should be {want!r}, got {best!r:.40}. The validation errors of "
                                f"the candidates' models are {{{table}}}. {hint}")
        try:
            check_array(model, models[int(np.argmin(val_errors))], name="the model", where=call, rtol=1e-9,
                        atol=1e-12)
        except ExerciseError as e:
            raise ExerciseError(f"{e}\n  Hint: return the model of the chosen candidate as fit returned it, fit on the "
                                "training set (the one the validation error was measured on).") from None
