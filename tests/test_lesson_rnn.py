"""Lesson 18's checks (asgteach.lessons.lesson18): right answers pass, the usual mistakes fail and say which."""

from __future__ import annotations

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
