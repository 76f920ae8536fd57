"""asgteach.lessons.suspects: lesson 9's attention suspects have the bugs their verdicts name, and the check says so."""

from __future__ import annotations

import math

import numpy as np
import pytest

import asgteach as at
from asgteach.lessons import ExerciseError, suspects


#: the planted bugs, as whoever planted them knows them (the test checks each by its numbers below; the
#: lesson's own answer stays out of reach of the student's kernel)
TRUTH = {1: "mask after softmax", 2: "correct", 3: "no scale"}


def _weights(n: int, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    t, d = mask.shape[0], 8
    Q, K = rng.standard_normal((t, d)), rng.standard_normal((t, d))
    with at.Graph():
        q, k, v = at.input("q", (t, d)), at.input("k", (t, d)), at.input("v", (t, t))
        out = suspects.attention(n, q, k, v, mask)
    got = at.run(out, {q: Q, k: K, v: np.eye(t)})          # v = I: the output is the weight matrix
    s = Q @ K.T / math.sqrt(d) + mask
    ref = np.exp(s - s.max(-1, keepdims=True))
    return got, ref / ref.sum(-1, keepdims=True)


def test_each_suspect_has_the_bug_its_verdict_names() -> None:
    mask = at.nn.causal_mask(5)
    verdicts = {n: TRUTH[n] for n in (1, 2, 3)}
    assert sorted(verdicts.values()) == sorted(suspects.VERDICTS)
    for n, verdict in verdicts.items():
        got, ref = _weights(n, mask)
        assert np.all(got[np.triu_indices(5, 1)] == 0), n              # every suspect respects the mask...
        rows_sum_to_one = np.allclose(got.sum(-1), 1.0)
        matches = np.allclose(got, ref)
        if verdict == "correct":
            assert matches
        elif verdict == "no scale":
            assert rows_sum_to_one and not matches
        else:
            assert not rows_sum_to_one and not matches


def test_suspects_without_a_mask_and_batched() -> None:
    with at.Graph():
        q = at.input("q", (2, 3, 4, 8))
        out = suspects.attention(2, q, q, q)
    assert out.shape == (2, 3, 4, 8)
    with pytest.raises(ValueError, match="three suspects"):
        suspects.attention(4, q, q, q)


def test_check_diagnosis_passes_on_the_truth_and_explains_a_wrong_verdict() -> None:
    suspects.check_diagnosis(dict(TRUTH))
    wrong = dict(TRUTH)
    wrong[1], wrong[2] = wrong[2], wrong[1]
    with pytest.raises(ExerciseError, match="suspect 1 is not 'correct'.*matches the numpy reference"):
        suspects.check_diagnosis(wrong)


@pytest.mark.parametrize("suspect", [1, 2, 3])
def test_a_wrong_verdict_gets_a_hint_that_narrows_not_the_answer(suspect: int) -> None:
    truth = TRUTH[suspect]
    for verdict in suspects.VERDICTS:
        if verdict == truth:
            continue
        guess = dict(TRUTH)
        guess[suspect] = verdict
        with pytest.raises(ExerciseError) as err:
            suspects.check_diagnosis(guess)
        text = str(err.value)
        assert f"suspect {suspect} is not {verdict!r}" in text
        # the message tests the verdict given; it never names the true one
        assert repr(truth) not in text and f'"{truth}"' not in text
    with pytest.raises(ExerciseError, match="one of"):
        suspects.check_diagnosis({1: "scale", 2: "correct", 3: "correct"})
    with pytest.raises(ExerciseError, match="keys 1, 2 and 3"):
        suspects.check_diagnosis({1: "correct"})
    with pytest.raises(ExerciseError, match="should be a dict"):
        suspects.check_diagnosis(["correct"])
