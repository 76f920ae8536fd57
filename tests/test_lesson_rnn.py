"""Lesson 18's checks (asgteach.lessons.lesson18): right answers pass, the usual mistakes fail and say which."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest

from asgteach.grading.keys import load as load_keys
from asgteach.lessons import ExerciseError, lesson18

PARAM_NAMES = load_keys().PARAM_NAMES
_window = load_keys().rnn_window


def _truncated(params, tokens, targets, k, reset=False, full=False, last_only=False, drop_partial=False):
    """A student's truncated BPTT on the reference window (numpy), with the mistakes switched on one by one."""
    B, T = tokens.shape
    k = T if full else k
    h = np.zeros((B, params["W_hh"].shape[0]))
    total, grads = 0.0, {n: np.zeros_like(v) for n, v in params.items()}
    for start in range(0, T, k):
        if drop_partial and start + k > T:
            break
        if reset:
            h = np.zeros_like(h)
        loss, h, g = _window(params, tokens[:, start:start + k], targets[:, start:start + k], h)
        if last_only:
            total, grads = loss, g
        else:
            total, grads = total + loss, {n: grads[n] + g[n] for n in grads}
    return total, grads


def test_the_reference_window_is_the_gradient_of_its_loss() -> None:
    """Central differences of the window's loss agree with its hand-written backward pass (so the checks are right)."""
    rng = np.random.default_rng(0)
    P = lesson18.random_rnn(5, 4, 1.1, rng)
    tokens, targets, h0 = rng.integers(0, 5, (2, 6)), rng.integers(0, 5, (2, 6)), rng.standard_normal((2, 4)) * 0.3
    _, _, grads = _window(P, tokens, targets, h0)
    for name in PARAM_NAMES:
        for idx in [tuple(rng.integers(0, s) for s in P[name].shape) for _ in range(3)]:
            plus = {n: v.copy() for n, v in P.items()}
            minus = {n: v.copy() for n, v in P.items()}
            plus[name][idx] += 1e-6
            minus[name][idx] -= 1e-6
            fd = (_window(plus, tokens, targets, h0)[0] - _window(minus, tokens, targets, h0)[0]) / 2e-6
            assert abs(fd - grads[name][idx]) < 1e-6 * max(1.0, abs(fd))


def test_truncated_bptt_passes_a_right_answer() -> None:
    lesson18.truncated_bptt_check(_truncated)


@pytest.mark.parametrize("mistake, words", [
    ("full", "FULL backprop through time"),
    ("reset", "starts from zero in every window"),
    ("last_only", "the last window's alone"),
    ("drop_partial", "leaves out the last, shorter window"),
])
def test_truncated_bptt_names_the_mistake(mistake: str, words: str) -> None:
    with pytest.raises(ExerciseError, match=words):
        lesson18.truncated_bptt_check(lambda P, x, y, k: _truncated(P, x, y, k, **{mistake: True}))


def test_truncated_bptt_mean_instead_of_sum_and_global_sizes() -> None:
    def mean_loss(P, x, y, k):
        loss, grads = _truncated(P, x, y, k)
        return loss / x.shape[1], grads

    with pytest.raises(ExerciseError, match="the loss .* times the expected one"):
        lesson18.truncated_bptt_check(mean_loss)

    def lesson_sizes(P, x, y, k):
        h = np.zeros((x.shape[0], 32))          # the lesson's H, not the check's
        return _window(P, x[:, :k], y[:, :k], h)[0], {}

    with pytest.raises(ExerciseError, match="take\\s+B and T from tokens.shape"):
        lesson18.truncated_bptt_check(lesson_sizes)


def _horizon(W_hh, hs, g_last, threshold, previous_h=False, off_by_one=False):
    T = len(hs)
    norms, g = np.zeros(T), g_last
    norms[-1] = np.linalg.norm(g)
    for t in range(T - 1, 0, -1):
        g = (g * (1 - hs[t - 1 if previous_h else t] ** 2)) @ W_hh.T
        norms[t - 1] = np.linalg.norm(g)
    below = [j for j in range(1, T) if norms[T - 1 - j] < threshold * norms[-1]]
    j = below[0] if below else None
    return norms, (j + 1 if off_by_one and j is not None else j)


def test_gradient_horizon_passes_a_right_answer_and_names_the_mistakes() -> None:
    lesson18.gradient_horizon_check(_horizon)
    with pytest.raises(ExerciseError, match="uses 1 - h_t\\*\\*2, not"):
        lesson18.gradient_horizon_check(lambda *a: _horizon(*a, previous_h=True))
    with pytest.raises(ExerciseError, match="Off by one"):
        lesson18.gradient_horizon_check(lambda *a: _horizon(*a, off_by_one=True))
    with pytest.raises(ExerciseError, match="j should be None"):
        lesson18.gradient_horizon_check(lambda *a: (_horizon(*a)[0], _horizon(*a)[1] or 39))


def test_truncation_bias_is_zero_for_one_window_and_grows_as_windows_shrink() -> None:
    rng = np.random.default_rng(1)
    P = lesson18.random_rnn(6, 5, 0.9, rng)
    tokens, targets = rng.integers(0, 6, (2, 12)), rng.integers(0, 6, (2, 12))
    bias = lesson18.truncation_bias(P, tokens, targets, [1, 4, 12])
    assert bias[2] < 1e-12 and bias[0] > bias[1] > bias[2]


def test_truncation_bias_needs_no_keys_and_agrees_with_the_reference(monkeypatch) -> None:
    """The lesson's cell calls it where there are no answer keys (a student's install, a graded sandbox): its one
    graph cut at the window boundaries gives the truncated gradients of the keys' hand-written numpy."""
    rng = np.random.default_rng(2)
    P = lesson18.random_rnn(5, 4, 1.2, rng)
    tokens, targets = rng.integers(0, 5, (3, 11)), rng.integers(0, 5, (3, 11))
    keys = load_keys()

    def flat(g):
        return np.concatenate([np.ravel(g[n]) for n in PARAM_NAMES])

    full = flat(keys.truncated_bptt(P, tokens, targets, 11)[1])
    want = [np.linalg.norm(flat(keys.truncated_bptt(P, tokens, targets, k)[1]) - full) / np.linalg.norm(full)
            for k in (1, 3, 4, 11)]
    monkeypatch.setenv("ASGTEACH_KEYS", "/nonexistent/answer_keys.py")   # as in a student's install
    monkeypatch.delitem(sys.modules, "asgteach_answer_keys")
    np.testing.assert_allclose(lesson18.truncation_bias(P, tokens, targets, [1, 3, 4, 11]), want, rtol=1e-9,
                               atol=1e-12)


# --- exercise 3: truncation as a wall in one graph (lesson18.truncate_every_check) ---------------------------

def _truncate_every(when="right", h_only=False, reset=False):
    """A student's truncate_every, with the mistakes switched on one by one (``when``: where the cuts go)."""
    import asgteach as at

    def cut_before(t, k):
        return {"right": t > 0 and t % k == 0, "with_t0": t % k == 0, "full": False, "every": t > 0,
                "early": t > 0 and (t + 1) % k == 0, "late": t > 0 and (t - 1) % k == 0}[when]

    def wall(state):
        if reset:
            return tuple(s * 0.0 for s in state) if isinstance(state, tuple) else state * 0.0
        if isinstance(state, tuple):
            return (at.stop_gradient(state[0]), state[1]) if h_only else tuple(map(at.stop_gradient, state))
        return at.stop_gradient(state)

    def truncate_every(k):
        def unroll(step, xs, state):
            states = []
            for t, x in enumerate(xs):
                if cut_before(t, k):
                    state = wall(state)
                state = step(x, state)
                states.append(state)
            return states
        return unroll
    return truncate_every


def test_truncate_every_passes_right_answers() -> None:
    lesson18.truncate_every_check(_truncate_every())
    lesson18.truncate_every_check(_truncate_every("with_t0"))   # a wall on the start state changes nothing


@pytest.mark.parametrize("kwargs, words", [
    ({"when": "full"}, "FULL backprop through time"),
    ({"when": "every"}, "stopped before every step"),
    ({"when": "early"}, "before steps k - 1, 2k - 1"),
    ({"when": "late"}, "before steps 1, k + 1, 2k + 1"),
    ({"h_only": True}, "only h is cut"),
    ({"reset": True}, "changes no value"),
])
def test_truncate_every_names_the_mistake(kwargs, words) -> None:
    with pytest.raises(ExerciseError, match=re.escape(words)):
        lesson18.truncate_every_check(_truncate_every(**kwargs))


def test_truncate_every_a_wall_on_what_the_loss_reads_and_a_state_that_is_not_a_tensor() -> None:
    import asgteach as at

    def on_the_output(k):               # the stopped state is also the one the step's own loss reads
        def unroll(step, xs, state):
            out = []
            for t, x in enumerate(xs):
                state = step(x, state)
                if (t + 1) % k == 0:
                    state = tuple(map(at.stop_gradient, state)) if isinstance(state, tuple) else at.stop_gradient(state)
                out.append(state)
            return out
        return unroll

    with pytest.raises(ExerciseError, match="cut only the state that the NEXT"):
        lesson18.truncate_every_check(on_the_output)

    def only_tensors(k):                # the notebook's one line, which an LSTM's pair does not take
        def unroll(step, xs, state):
            out = []
            for t, x in enumerate(xs):
                state = step(x, at.stop_gradient(state) if t and t % k == 0 else state)
                out.append(state)
            return out
        return unroll

    with pytest.raises(ExerciseError, match=r"a tuple \(h, c\): cut each of its parts"):
        lesson18.truncate_every_check(only_tensors)
    with pytest.raises(ExerciseError, match="should return the list of the 7 states"):
        lesson18.truncate_every_check(lambda k: (lambda step, xs, state: step(xs[0], state)))


def _numpy_windowed_rnn(P, xs, ws, h0, starts):
    """The check's tanh RNN by hand, loss sum_t sum(w_t * h_t), backward through windows starting at ``starts``."""
    T = len(xs)
    hs, h = [], h0
    for t in range(T):
        h = np.tanh(xs[t] @ P["W_x"] + h @ P["W_h"] + P["b"])
        hs.append(h)
    grads = {n: np.zeros_like(v) for n, v in P.items()}
    g = np.zeros_like(h0)
    for t in range(T - 1, -1, -1):
        g = g + ws[t]                                  # this step's loss, plus what came back from t + 1
        da = g * (1 - hs[t] ** 2)
        before = hs[t - 1] if t > 0 else h0
        grads["W_x"] += xs[t].T @ da
        grads["W_h"] += before.T @ da
        grads["b"] += da.sum(axis=0)
        g = np.zeros_like(g) if t in starts else da @ P["W_h"].T   # no gradient crosses into an earlier window
    return grads


@pytest.mark.parametrize("T, k", [(7, 3), (6, 2), (5, 1), (4, 6)])
def test_truncate_every_reference_is_windowed_bptt_by_hand(T, k) -> None:
    """The check's reference (graphs with the carried state fed as a value, no stop_gradient) agrees with numpy."""
    rng = np.random.default_rng(T * 10 + k)
    values = lesson18.wall_values("rnn", T, rng)
    got = lesson18.wall_reference("rnn", T, values, range(k, T, k))
    want = _numpy_windowed_rnn(values["params"], values["xs"], values["ws"], values["s0"][0], set(range(k, T, k)))
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_truncate_every_reference_matches_stop_gradient_and_truncation_matters(kind) -> None:
    """For the gated cells: the windowed reference equals a stop_gradient unroll (two constructions, one gradient),
    and differs from full BPTT and from an LSTM cut on h alone by far more than the check's tolerance."""
    rng = np.random.default_rng(7)
    T, k = 9, 4
    values = lesson18.wall_values(kind, T, rng)
    ref = lesson18.wall_reference(kind, T, values, range(k, T, k))
    net = lesson18.wall_graph(kind, T, unroll=_truncate_every()(k))
    _, walled = lesson18.wall_run(net, values)
    full = lesson18.wall_reference(kind, T, values, ())
    for name in ref:
        np.testing.assert_allclose(walled[name], ref[name], rtol=1e-10, atol=1e-12)

    def gap(other):
        return max(np.max(np.abs(other[n] - ref[n])) / np.max(np.abs(ref[n])) for n in ref)

    assert gap(full) > 1e-3
    if kind == "lstm":
        assert gap(lesson18.wall_reference(kind, T, values, range(k, T, k), cut=(0,))) > 1e-3
