"""Lesson 18's checks (a character RNN, backprop through time), with their answers kept inside them.

The lesson's RNN, in row-vector form (a batch of B rows; weights stored (in, out) like ``at.nn.Linear``)::

    h_t      = tanh(x_t W_xh + h_{t-1} W_hh + b_h)      x_t W_xh = row tokens[:, t] of W_xh (an embedding)
    logits_t = h_t W_hy + b_y
    L        = sum over t of CE(logits_t, targets[:, t])  (each CE a mean over the batch)

The checks' references (the answer keys) are plain numpy, written out by hand (forward, and backward
through time): they share no code with asgteach's graphs, so they are an independent reference for them.
The lesson's demo (:func:`truncation_bias`, run by a cell of the lesson, where there are no keys) uses
asgteach's graphs, a way of its own. The checks run the student's functions on sequences, sizes and
parameters of their own (fresh random ones), so a number copied from the lesson cannot pass, and a wrong
answer is compared with the usual mistakes to say which one it looks like; ``RULES[2]`` (numpy, by the
recursion of section 3) is read from the answer's source. The lesson imports the public functions only;
the ``_private`` ones give the answers away: try the lesson first.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..grading.checks import check_array
from ..grading import rules
from ..grading.rules import STAND_INS, Rule
from ..grading.exercises import ExerciseError
from ..grading.keys import load as load_keys

__all__ = ["LESSON", "RULES", "PARAM_NAMES", "random_rnn", "truncation_bias", "truncated_bptt_check",
           "gradient_horizon_check"]

LESSON = "18-rnn-and-backprop-through-time"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {
    2: Rule(why="measure the norms by the backward recursion of section 3, with numpy",
            imports=STAND_INS | {"asgteach"}, names=frozenset({"at", "asgteach"})),
}

#: the parameters of the lesson's RNN, in the order the lesson creates them
PARAM_NAMES = ("W_xh", "W_hh", "b_h", "W_hy", "b_y")   # as answer_keys.PARAM_NAMES


def random_rnn(V: int, H: int, rho: float, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Random parameters for a vocabulary of V and H hidden units, W_hh scaled to spectral radius ``rho``."""
    W_hh = rng.standard_normal((H, H))
    return {"W_xh": rng.standard_normal((V, H)) * 0.5,
            "W_hh": W_hh * (rho / float(np.max(np.abs(np.linalg.eigvals(W_hh))))),
            "b_h": rng.standard_normal(H) * 0.1,
            "W_hy": rng.standard_normal((H, V)) / math.sqrt(H),
            "b_y": rng.standard_normal(V) * 0.1}


# --- the lesson's demo: how far the truncated gradient is from the full one ----------------------------------

def truncation_bias(params: Mapping[str, np.ndarray], tokens: np.ndarray, targets: np.ndarray,
                    ks: Sequence[int]) -> list[float]:
    """For each window length k: |truncated gradient - full gradient| / |full gradient| (all parameters).

    The lesson's own cell calls it, so it needs no answer keys (a student's install has none): it computes with
    asgteach's graphs, another way than exercise 1's one graph per window. ONE graph of all T steps in which the
    hidden state enters each window (after the first) as an input of the graph, fed with its value: the forward
    computation is the full one, and no path of the graph crosses a window boundary, so its gradient is the
    truncated one. k = T (no boundary) gives the full gradient.
    """
    params = {n: np.asarray(params[n], dtype=np.float64) for n in PARAM_NAMES}
    tokens, targets = np.asarray(tokens), np.asarray(targets)
    B, T = tokens.shape
    V, H = params["W_xh"].shape
    h, states = np.zeros((B, H)), []          # the forward states: the same whatever the windows
    for t in range(T):
        h = np.tanh(params["W_xh"][tokens[:, t]] + h @ params["W_hh"] + params["b_h"])
        states.append(h)

    def gradient(k: int) -> np.ndarray:
        import asgteach as at

        net = _cut_rnn(B, T, V, H, tuple(range(k, T, k)))
        feeds = {net["tokens"]: tokens, net["targets"]: targets,
                 **{net["params"][n]: params[n] for n in PARAM_NAMES},
                 **{h_in: (np.zeros((B, H)) if t == 0 else states[t - 1]) for t, h_in in net["starts"].items()}}
        return np.concatenate([np.ravel(g) for g in at.run(net["grads"], feeds)])

    full = gradient(T)
    return [float(np.linalg.norm(gradient(min(int(k), T)) - full) / np.linalg.norm(full)) for k in ks]


@functools.lru_cache(maxsize=16)
def _cut_rnn(B: int, T: int, V: int, H: int, cuts: tuple[int, ...]) -> dict[str, Any]:
    """The lesson's RNN over T steps as one graph, the hidden state an input (a value) at step 0 and at ``cuts``."""
    import asgteach as at

    with at.Graph(name=f"rnn T={T}, cut at {list(cuts)}"):
        tokens = at.input("tokens", (B, T), dtype="int")
        targets = at.input("targets", (B, T), dtype="int")
        P = {"W_xh": at.parameter("W_xh", (V, H)), "W_hh": at.parameter("W_hh", (H, H)),
             "b_h": at.parameter("b_h", (H,)), "W_hy": at.parameter("W_hy", (H, V)), "b_y": at.parameter("b_y", (V,))}
        starts, loss = {}, None
        for t in range(T):
            if t == 0 or t in cuts:
                h = starts[t] = at.input(f"h_in{t}", (B, H))     # the state carried into this window, as a value
            h = at.tanh(at.embedding(tokens[:, t], P["W_xh"]) + h @ P["W_hh"] + P["b_h"])
            ce = at.nn.cross_entropy(h @ P["W_hy"] + P["b_y"], targets[:, t])
            loss = ce if loss is None else loss + ce
        grads = at.grad(loss, [P[n] for n in PARAM_NAMES])
    return {"tokens": tokens, "targets": targets, "params": P, "starts": starts, "grads": grads}


# --- exercise 1: truncated BPTT ---------------------------------------------------------------------------

_MISTAKES = {
    "full": ("these are the gradients of FULL backprop through time: the gradient flows across the windows. "
             "Run one graph per window and feed the carried hidden state as a value (the window's input h0), "
             "so no graph path joins two windows"),
    "reset": ("this is what you get when the hidden state starts from zero in every window: carry the last "
              "hidden state of each window into the next one as its h0 (only the very first window starts "
              "from zeros)"),
    "last_only": ("this is the last window's alone: add up the windows' losses and gradients, do not keep only "
                  "the last one"),
    "drop_partial": ("this leaves out the last, shorter window: when k does not divide T, the last window has "
                     "T mod k steps (a graph of its own length)"),
}


def _call(fn: Callable[..., Any], P: Mapping[str, np.ndarray], tokens: np.ndarray, targets: np.ndarray,
          k: int, where: str) -> tuple[float, dict[str, Any]]:
    try:
        got = fn({n: v.copy() for n, v in P.items()}, tokens.copy(), targets.copy(), k)
    except (ExerciseError, NotImplementedError):
        raise
    except Exception as e:  # noqa: BLE001 - the student's function failing is a finding, reported as such
        raise ExerciseError(f"{where} raised {type(e).__name__}: {e}\n  Hint: the check uses sizes of its own: take "
                            "B and T from tokens.shape, V and H from params['W_xh'].shape") from e
    if not isinstance(got, (tuple, list)) or len(got) != 2 or not isinstance(got[1], Mapping):
        raise ExerciseError(f"{where} should return (loss, grads): the summed loss and a dict {{name: gradient}}, "
                            f"got {type(got).__name__}: {got!r:.80}")
    loss, grads = got
    missing = [n for n in PARAM_NAMES if n not in grads]
    if missing:
        raise ExerciseError(f"{where}: the gradients dict lacks {missing} (it should have {list(PARAM_NAMES)})")
    try:
        loss = float(np.asarray(loss, dtype=np.float64))
    except (TypeError, ValueError):
        raise ExerciseError(f"{where}: the loss should be a number, got {type(loss).__name__}") from None
    return loss, dict(grads)


def _same(loss: float, grads: Mapping[str, Any], ref: tuple[float, Mapping[str, np.ndarray]],
          with_loss: bool = True) -> bool:
    ok = not with_loss or bool(np.isclose(loss, ref[0], rtol=1e-6, atol=1e-9))
    return ok and all(np.shape(grads[n]) == ref[1][n].shape
                      and np.allclose(np.asarray(grads[n], dtype=np.float64), ref[1][n], rtol=1e-5, atol=1e-8)
                      for n in PARAM_NAMES)


def truncated_bptt_check(fn: Callable[..., Any]) -> None:
    """``fn(params, tokens, targets, k) -> (loss, grads)``: truncated BPTT on batches and sizes of the check's own.

    The cases: k dividing T, k not dividing T (a shorter last window), k = T (must be full BPTT) and
    k = 1; each at fresh parameters (V = 7 characters, H = 5 hidden units, W_hh at spectral radius 1.2,
    so that what crosses a window boundary is not negligible).
    """
    keys = load_keys()   # the references, loaded only when a check runs
    rng = np.random.default_rng()
    V, H = 7, 5
    for B, T, k in [(3, 12, 4), (2, 11, 4), (2, 9, 9), (2, 5, 1)]:
        P = random_rnn(V, H, 1.2, rng)
        tokens, targets = rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))
        where = f"truncated_grads(<params V={V} H={H}>, <tokens {tokens.shape}>, <targets {targets.shape}>, k={k})"
        loss, grads = _call(fn, P, tokens, targets, k, where)
        ref = keys.truncated_bptt(P, tokens, targets, k)
        if _same(loss, grads, ref):
            continue
        windows = f"{-(-T // k)} window(s) of {k} step(s)" + (f", the last of {T % k}" if T % k else "")
        for mistake, why in _MISTAKES.items():
            if (mistake == "full" and k == T) or (mistake == "drop_partial" and T % k == 0):
                continue
            if _same(loss, grads, keys.truncated_bptt(P, tokens, targets, k, mistake), with_loss=mistake != "full"):
                raise ExerciseError(f"{where} ({windows}): {why}.")
        if not np.isclose(loss, ref[0], rtol=1e-6, atol=1e-9):
            check_array(loss, ref[0], name="the loss", where=f"{where}, {windows}", rtol=1e-6)
        for n in PARAM_NAMES:
            try:
                check_array(grads[n], ref[1][n], name=f"d loss/d {n}", where=f"{where}, {windows}", rtol=1e-5,
                            atol=1e-8)
            except ExerciseError as e:
                extra = (" With k = T there is one window: the result must be full BPTT." if k == T else
                         " The loss is right, so the forward pass is: look at how the windows' gradients are "
                         "combined (a sum over the windows, each from its own graph).")
                raise ExerciseError(f"{e}\n  Hint:{extra}") from None


# --- exercise 2: how far back does the gradient reach? -----------------------------------------------------

_HORIZON_MISTAKES = {
    "previous_h": "the tanh derivative belongs to the step's own output: dh_t/dh_{t-1} uses 1 - h_t**2, not "
                  "1 - h_{t-1}**2",
    "no_tanh": "the tanh derivative (1 - h_t**2) is missing from each step",
    "no_transpose": "row vectors: h_t = tanh(... + h_{t-1} @ W_hh), so the gradient goes back through W_hh.T, "
                    "not W_hh",
}


def gradient_horizon_check(fn: Callable[..., Any]) -> None:
    """``fn(W_hh, hs, g_last, threshold) -> (norms, j)`` on hidden states, W_hh and thresholds of the check's own.

    W_hh is drawn at spectral radii from 0.5 (fast vanishing) to 2.5 (no vanishing: j is None there).
    """
    rules.enforce(fn, RULES[2], "gradient_horizon")
    keys = load_keys()   # the references, loaded only when a check runs
    rng = np.random.default_rng()
    V, H, B, T = 9, 6, 3, 40
    for rho, threshold in [(0.5, 1e-3), (0.85, 1e-2), (1.0, 1e-3), (2.5, 1e-3)]:
        for _ in range(100):   # the last case is one where the gradient does not vanish (j is None): draw one
            P = random_rnn(V, H, rho, rng)
            tokens = rng.integers(0, V, (B, T))
            h, hs = np.zeros((B, H)), []
            for t in range(T):
                h = np.tanh(P["W_xh"][tokens[:, t]] + h @ P["W_hh"] + P["b_h"])
                hs.append(h)
            g_last = rng.standard_normal((B, H))
            want_norms, want_j = keys.gradient_horizon(P["W_hh"], hs, g_last, threshold)
            if rho < 2 or want_j is None:
                break
        where = f"gradient_horizon(<W_hh {H}x{H}, spectral radius {rho}>, <{T} states {(B, H)}>, g_last, {threshold})"
        try:
            got = fn(P["W_hh"].copy(), [x.copy() for x in hs], g_last.copy(), threshold)
        except (ExerciseError, NotImplementedError):
            raise
        except Exception as e:  # noqa: BLE001 - the student's function failing is a finding
            raise ExerciseError(f"{where} raised {type(e).__name__}: {e}\n  Hint: the check uses sizes of its own: "
                                "take T from len(hs) and the shapes from the arrays") from e
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            raise ExerciseError(f"{where} should return (norms, j), got {type(got).__name__}: {got!r:.80}")
        norms, j = got
        if np.shape(norms) != (T,) or not np.allclose(np.asarray(norms, dtype=np.float64), want_norms, rtol=1e-6,
                                                      atol=1e-300):
            for mistake, why in _HORIZON_MISTAKES.items():
                wrong = keys.gradient_horizon(P["W_hh"], hs, g_last, threshold, mistake)[0]
                if np.shape(norms) == (T,) and np.allclose(np.asarray(norms, dtype=np.float64), wrong,
                                                          rtol=1e-6, atol=1e-300):
                    raise ExerciseError(f"{where}: the norms are off: {why}.")
            try:
                check_array(norms, want_norms, name="norms", where=where, rtol=1e-6, atol=1e-300)
            except ExerciseError as e:
                raise ExerciseError(f"{e}\n  Hint: norms[t] is the norm of dL/dh_t over the whole (B, H) array; "
                                    "start from norms[T-1] = |g_last| and apply g <- (g * (1 - h_t**2)) @ W_hh.T "
                                    "once per step back") from None
        if j != want_j:
            bound = math.ceil(math.log(threshold) / math.log(rho)) if rho < 1 else None
            if want_j is None:
                hint = ("the norms never fall below threshold * norms[-1] here (W_hh's spectral radius is "
                        f"{rho}): j should be None")
            elif isinstance(j, (int, np.integer)) and j in (want_j - 1, want_j + 1):
                hint = ("off by one: j counts steps back from the last state, so norms[T - 1 - j] is the "
                        "first norm below threshold * norms[T - 1]")
            elif j is not None and bound is not None and j == bound:
                hint = ("that is the estimate rho**j < threshold from the spectral radius alone; measure it "
                        "from the norms (the tanh derivatives and W_hh's non-normality change it)")
            elif isinstance(j, (int, np.integer)) and j == T - 1 - want_j:
                hint = "that is the index t of the state; j counts steps back from the last one (j = T - 1 - t)"
            else:
                hint = "the smallest j >= 1 with norms[T - 1 - j] < threshold * norms[T - 1], or None"
            raise ExerciseError(f"{where}: j should be {want_j!r}, got {j!r}. {hint[0].upper()}{hint[1:]}")
