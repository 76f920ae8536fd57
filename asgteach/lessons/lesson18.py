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
recursion of section 3) is read from the answer's source. Exercise 3 (``truncate_every(k)``: truncated BPTT
as ONE graph, a wall on the state every k steps) is checked on graphs the check builds itself, with a tanh
RNN, ``at.nn.GRUCell`` and ``at.nn.LSTMCell`` (whose state is the pair (h, c)), against a windowed
reference that has no stop_gradient in it (the carried state fed as a value, as in section 4); it needs no
answer keys. The lesson imports the public functions only; the ``_private`` ones give the answers away: try
the lesson first.
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
           "gradient_horizon_check", "truncate_every_check", "wall_graph", "wall_values", "wall_reference", "wall_run"]

LESSON = "18-rnn-and-backprop-through-time"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {
    2: Rule(why="measure the norms by the backward recursion of section 3, with numpy",
            imports=STAND_INS | {"asgteach"}, names=frozenset({"at", "asgteach"})),
    3: Rule(why="cut the check's graph with asgteach's own ops (at.stop_gradient), not another autodiff library",
            imports=STAND_INS),
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


# --- exercise 3: truncation as a wall in one graph, for any recurrent cell ---------------------------------

#: the check's cases: (cell, T, k): k dividing T or not, k = 1, k = T, k > T; an LSTM's state is a pair (h, c)
_WALL_CASES = (("rnn", 7, 3), ("gru", 8, 8), ("rnn", 5, 1), ("rnn", 4, 6), ("gru", 10, 4), ("lstm", 9, 4),
               ("lstm", 7, 2))
_WALL_SIZES = {"B": 2, "D": 3, "H": 4}

_WALL_MISTAKES = {
    "full": ("no gradient is stopped anywhere: this is FULL backprop through time (k is ignored). Pass the state "
             "that steps k, 2k, 3k, ... read through at.stop_gradient"),
    "every": ("the gradient is stopped before every step: only the state that steps k, 2k, 3k, ... read is cut "
              "(k = 1 is the one case where that is every step)"),
    "early": ("off by one: the cuts are before steps k - 1, 2k - 1, ...; the windows are [0, k), [k, 2k), ..., so "
              "the state that step k reads (the last one of the first window) is the one to cut"),
    "late": ("off by one: the cuts are before steps 1, k + 1, 2k + 1, ... (after steps 0, k, 2k, ...); the windows "
             "are [0, k), [k, 2k), ..., so the state that step k reads is the one to cut"),
    "h_only": ("only h is cut: an LSTM carries the pair (h, c) from step to step, and the gradient still crosses "
               "the window boundary along c. Stop the gradient of every part of the state"),
}


def wall_graph(kind: str, T: int, unroll: Callable[..., Any] | None = None, starts: Sequence[int] = (),
                cut: Sequence[int] = (0, 1)) -> dict[str, Any]:
    """The check's own recurrent graph over T steps: a plain tanh RNN, ``at.nn.GRUCell`` or ``at.nn.LSTMCell``.

    With ``unroll`` (the answer's), the states are ``unroll(step, xs, state0)``. Without it, the check's own loop,
    in which the state that each step of ``starts`` reads is an input of the graph (all its parts, or the parts
    ``cut`` of an LSTM's pair), fed with its value: the windowed reference, with no stop_gradient in it. The loss
    is sum over t of sum(w_t * h_t), every state's h.
    """
    import asgteach as at

    B, D, H = _WALL_SIZES["B"], _WALL_SIZES["D"], _WALL_SIZES["H"]
    parts = 2 if kind == "lstm" else 1
    with at.Graph(name=f"check's {kind} T={T}") as g:
        xs = [at.input(f"x{t}", (B, D)) for t in range(T)]
        ws = [at.input(f"w{t}", (B, H)) for t in range(T)]
        s0 = [at.input(f"s0_{j}", (B, H)) for j in range(parts)]
        if kind == "rnn":
            P = {"W_x": at.parameter("W_x", (D, H)), "W_h": at.parameter("W_h", (H, H)), "b": at.parameter("b", (H,))}

            def step(x: Any, h: Any) -> Any:
                return at.tanh(x @ P["W_x"] + h @ P["W_h"] + P["b"])
        else:
            cell = (at.nn.GRUCell if kind == "gru" else at.nn.LSTMCell)(D, H, name=kind)
            P = {p.name: p for p in cell.parameters()}

            def step(x: Any, state: Any) -> Any:
                return cell(x, state)

        state0 = tuple(s0) if parts == 2 else s0[0]
        fed: dict[tuple[int, int], Any] = {}
        if unroll is not None:
            states = unroll(step, xs, state0)
        else:
            state, states = state0, []
            for t in range(T):
                if t in starts:
                    now = list(state) if parts == 2 else [state]
                    for j in range(parts):
                        if parts == 1 or j in cut:
                            now[j] = fed[(t, j)] = at.input(f"s{t}_{j}", (B, H))
                    state = tuple(now) if parts == 2 else now[0]
                state = step(xs[t], state)
                states.append(state)
    return {"graph": g, "xs": xs, "ws": ws, "s0": s0, "params": P, "states": states, "fed": fed, "parts": parts}


def wall_values(kind: str, T: int, rng: np.random.Generator) -> dict[str, Any]:
    """Fresh values for a case: inputs, loss weights, start state, and parameters where truncation matters."""
    B, D, H = _WALL_SIZES["B"], _WALL_SIZES["D"], _WALL_SIZES["H"]
    if kind == "rnn":
        W_h = rng.standard_normal((H, H))
        P = {"W_x": rng.standard_normal((D, H)) / math.sqrt(D),
             "W_h": W_h * (1.1 / float(np.max(np.abs(np.linalg.eigvals(W_h))))), "b": rng.standard_normal(H) * 0.1}
    else:
        G = 3 if kind == "gru" else 4
        P = {f"{kind}.weight_ih": rng.uniform(-0.8, 0.8, (D, G * H)),
             f"{kind}.weight_hh": rng.uniform(-0.8, 0.8, (H, G * H)),
             f"{kind}.bias_ih": rng.uniform(-0.3, 0.3, (G * H,)), f"{kind}.bias_hh": rng.uniform(-0.3, 0.3, (G * H,))}
        gate = 1                                   # the gate that keeps the state: GRU's z, LSTM's f (block 1)
        P[f"{kind}.bias_hh"][gate * H:(gate + 1) * H] += 1.5   # near 1: the gradient reaches across windows
    return {"xs": rng.standard_normal((T, B, D)), "ws": rng.standard_normal((T, B, H)),
            "s0": rng.standard_normal((2 if kind == "lstm" else 1, B, H)) * 0.5, "params": P}


def wall_run(net: Mapping[str, Any], values: Mapping[str, Any], fed: Mapping[tuple[int, int], np.ndarray] | None = None
              ) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
    """Run a case's graph: (the T states' h values, {parameter name: gradient of the loss})."""
    import asgteach as at

    def h_of(state: Any) -> Any:
        return state[0] if net["parts"] == 2 else state

    hs = [h_of(s) for s in net["states"]]
    loss = None
    for h, w in zip(hs, net["ws"]):
        term = at.sum(h * w)
        loss = term if loss is None else loss + term
    names = list(net["params"])
    grads = at.grad(loss, [net["params"][n] for n in names])
    feeds = {**{x: v for x, v in zip(net["xs"], values["xs"])}, **{w: v for w, v in zip(net["ws"], values["ws"])},
             **{s: v for s, v in zip(net["s0"], values["s0"])},
             **{net["params"][n]: values["params"][n] for n in names},
             **{net["fed"][key]: value for key, value in (fed or {}).items()}}
    out = at.run([*hs, *grads], feeds)
    return out[:len(hs)], dict(zip(names, out[len(hs):]))


def wall_reference(kind: str, T: int, values: Mapping[str, Any], starts: Sequence[int],
                    cut: Sequence[int] = (0, 1)) -> dict[str, np.ndarray]:
    """The gradient with windows starting at ``starts``: the carried state fed as a value (section 4's way)."""
    import asgteach as at

    plain = wall_graph(kind, T)                   # no cut: the forward values of every state
    parts = [part for s in plain["states"] for part in (s if plain["parts"] == 2 else (s,))]
    forward = at.run(parts, {**{x: v for x, v in zip(plain["xs"], values["xs"])},
                             **{s: v for s, v in zip(plain["s0"], values["s0"])},
                             **{plain["params"][n]: v for n, v in values["params"].items()}})
    net = wall_graph(kind, T, starts=starts, cut=cut)
    fed = {(t, j): forward[(t - 1) * plain["parts"] + j] for (t, j) in net["fed"]}
    return wall_run(net, values, fed)[1]


def truncate_every_check(fn: Callable[..., Any]) -> None:
    """``fn(k) -> unroll(step, xs, state) -> [the T states]``: truncated BPTT in one graph, on cells of the check's own.

    For each case (a tanh RNN, a GRU, an LSTM whose state is the pair (h, c); T and k of the check's, k dividing T
    or not, k = 1, k >= T) the check builds its own graph, lets the answer unroll the step over it, puts a loss on
    every state's h, and compares the states' values with the plain unroll's and the parameters' gradient with
    windows of k steps run as graphs of their own (the state carried as a value): no stop_gradient in the reference.
    """
    rules.enforce(fn, RULES[3], "truncate_every")
    rng = np.random.default_rng()
    for kind, T, k in _WALL_CASES:
        values = wall_values(kind, T, rng)
        state = "the pair (h, c)" if kind == "lstm" else "h"
        where = f"truncate_every({k})(step, <{T} inputs>, {state}) on the check's {kind.upper()} step"
        try:
            unroll = fn(k)
            net = wall_graph(kind, T, unroll=unroll)
        except (ExerciseError, NotImplementedError):
            raise
        except Exception as e:  # noqa: BLE001 - the student's function failing is a finding, reported as such
            hint = (" The state here is a tuple (h, c): cut each of its parts (at.stop_gradient takes one Tensor)."
                    if kind == "lstm" else " step(xs[t], state) returns the next state; xs has T Tensors.")
            raise ExerciseError(f"{where} raised {type(e).__name__}: {e}\n  Hint:{hint}") from e
        states = net["states"]
        if not isinstance(states, (list, tuple)) or len(states) != T:
            raise ExerciseError(f"{where} should return the list of the {T} states (what step returned at each step), "
                                f"got {type(states).__name__}" + (f" of length {len(states)}"
                                                                  if isinstance(states, (list, tuple)) else ""))
        parts, shape = net["parts"], (_WALL_SIZES["B"], _WALL_SIZES["H"])
        what = "a pair (h, c) of Tensors" if parts == 2 else "a Tensor"
        for t, s in enumerate(states):
            items = list(s) if parts == 2 and isinstance(s, (list, tuple)) else [s]
            if len(items) != parts or not all(_is_tensor_of(x, net["graph"], shape) for x in items):
                raise ExerciseError(f"{where}: state {t} should be {what} of shape {shape} in the check's graph (what "
                                    f"step returned), got {s!r:.100}")
        try:
            hs, grads = wall_run(net, values)
        except Exception as e:  # noqa: BLE001 - a graph the answer built that does not run
            raise ExerciseError(f"{where}: the graph does not run: {type(e).__name__}: {e}") from e
        plain_hs, _ = wall_run(wall_graph(kind, T), values)
        bad = [t for t in range(T) if not np.allclose(hs[t], plain_hs[t], rtol=1e-10, atol=1e-12)]
        if bad:
            raise ExerciseError(f"{where}: the value of state {bad[0]} is not the plain unroll's (largest difference "
                                f"{np.max(np.abs(hs[bad[0]] - plain_hs[bad[0]])):.3g}). at.stop_gradient changes "
                                "no value: the forward pass must be the same as without cuts (a state reset to zeros, "
                                "or a step skipped, changes it)")
        ref = wall_reference(kind, T, values, range(k, T, k))
        if _same_grads(grads, ref):
            continue
        candidates = {"full": dict(starts=()), "every": dict(starts=range(1, T)),
                      "early": dict(starts=[t for t in range(k - 1, T, k) if t > 0]),
                      "late": dict(starts=range(1, T, k))}
        if kind == "lstm":
            candidates["h_only"] = dict(starts=range(k, T, k), cut=(0,))
        for mistake, spec in candidates.items():
            if sorted(spec["starts"]) == sorted(range(k, T, k)) and mistake != "h_only":
                continue                            # the same cuts as the right answer here (k = 1, k >= T)
            if _same_grads(grads, wall_reference(kind, T, values, **spec)):
                raise ExerciseError(f"{where}: {_WALL_MISTAKES[mistake]}.")
        name = next(n for n in ref if not np.allclose(grads[n], ref[n], rtol=1e-7, atol=1e-10))
        try:
            check_array(grads[name], ref[name], name=f"d loss/d {name}", where=where, rtol=1e-7, atol=1e-10)
        except ExerciseError as e:
            raise ExerciseError(f"{e}\n  Hint: the values are right, so the cuts are in the wrong place: return what "
                                "step returned (the loss reads those states) and cut only the state that the NEXT "
                                f"step reads, before steps k, 2k, ... (here {list(range(k, T, k)) or 'none: k >= T'})"
                                ) from None
        raise ExerciseError(f"{where}: the gradient is not truncated BPTT's")   # not reached: check_array raised


def _same_grads(got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray]) -> bool:
    return all(np.allclose(got[n], want[n], rtol=1e-7, atol=1e-10) for n in want)


def _is_tensor_of(x: Any, graph: Any, shape: tuple[int, ...]) -> bool:
    import asgteach as at

    return isinstance(x, at.Tensor) and x.graph is graph and tuple(x.shape) == shape
