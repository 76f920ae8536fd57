"""asgteach.lessons.suspects: lesson 9's attention suspects have the bugs their verdicts name, and the check of the
student's ``verdict(attention, q, k, mask)`` runs it on implementations of its own, where only a right test passes."""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pytest

import asgteach as at
from asgteach.lessons import ExerciseError, suspects


#: the planted bugs, as whoever planted them knows them (the test checks each by its numbers below; the
#: lesson's own answer stays out of reach of the student's kernel)
TRUTH = {1: "mask after softmax", 2: "correct", 3: "no scale"}


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _weights(attention, q: np.ndarray, k: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``attention``'s weights: its output for v = identity."""
    t = q.shape[-2]
    with at.Graph():
        qi, ki, vi = at.input("q", q.shape), at.input("k", k.shape), at.input("v", (t, t))
        out = attention(qi, ki, vi, mask)
    return at.run(out, {qi: q, ki: k, vi: np.eye(t)})


def by_reference(attention, q, k, mask):
    """Section 7's evidence: rows that do not sum to 1, else the numpy reference."""
    w = _weights(attention, q, k, mask)
    if not np.allclose(w.sum(axis=-1), 1.0):
        return "mask after softmax"
    reference = _softmax(q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]) + mask)
    return "correct" if np.allclose(w, reference) else "no scale"


def by_models(attention, q, k, mask):
    """Every hypothesis modelled in numpy; the verdict is the one the weights match best."""
    w = _weights(attention, q, k, mask)
    raw = np.einsum("...id,...jd->...ij", q, k)
    models = {"correct": _softmax(raw / math.sqrt(q.shape[-1]) + mask), "no scale": _softmax(raw + mask),
              "mask after softmax": _softmax(raw / math.sqrt(q.shape[-1])) * (mask == 0)}
    return min(models, key=lambda name: np.abs(models[name] - w).max())


def test_each_suspect_has_the_bug_its_verdict_names() -> None:
    rng = np.random.default_rng(1)
    mask = at.nn.causal_mask(5)
    Q, K = rng.standard_normal((5, 8)), rng.standard_normal((5, 8))
    assert sorted(TRUTH.values()) == sorted(suspects.VERDICTS)
    for n, verdict in TRUTH.items():
        got = _weights(partial(suspects.attention, n), Q, K, mask)
        ref = _softmax(Q @ K.T / math.sqrt(8) + mask)
        assert np.all(got[np.triu_indices(5, 1)] == 0), n              # every suspect respects the mask...
        rows_sum_to_one = np.allclose(got.sum(-1), 1.0)
        matches = np.allclose(got, ref)
        if verdict == "correct":
            assert matches
        elif verdict == "no scale":
            assert rows_sum_to_one and not matches
            assert np.allclose(got, _softmax(Q @ K.T + mask))
        else:
            assert not rows_sum_to_one and not matches
        # ...and a right test of the evidence names each one
        assert by_reference(partial(suspects.attention, n), Q, K, mask) == verdict
        assert by_models(partial(suspects.attention, n), Q, K, mask) == verdict


def test_suspects_without_a_mask_and_batched() -> None:
    with at.Graph():
        q = at.input("q", (2, 3, 4, 8))
        out = suspects.attention(2, q, q, q)
    assert out.shape == (2, 3, 4, 8)
    with pytest.raises(ValueError, match="three suspects"):
        suspects.attention(4, q, q, q)


@pytest.mark.parametrize("verdict", [by_reference, by_models])
def test_check_verdict_passes_a_right_test_in_any_style(verdict) -> None:
    for _ in range(3):                        # fresh implementations, inputs and order every time
        suspects.check_verdict(verdict)


def test_the_check_hands_over_each_kind_on_inputs_the_lesson_never_used() -> None:
    seen = []

    def recording(attention, q, k, mask):
        seen.append((by_reference(attention, q, k, mask), q.shape, mask))
        return seen[-1][0]

    suspects.check_verdict(recording)
    assert sorted(kind for kind, _, _ in seen) == sorted(suspects.VERDICTS * 3)
    assert any(len(shape) == 3 for _, shape, _ in seen)                      # a batch axis in front
    assert any((m[:, -1] != 0).all() for _, _, m in seen)                    # a padding mask: a column masked
    assert {shape[-1] for _, shape, _ in seen} - {8} and {shape[-2] for _, shape, _ in seen} - {4}


def test_verdicts_typed_in_or_read_by_suspect_number_fail() -> None:
    lesson_suspects = {n: partial(suspects.attention, n) for n in (1, 2, 3)}

    def by_number(attention, q, k, mask):      # section 7's verdicts, by suspect
        for n, word in TRUTH.items():
            if attention is lesson_suspects[n]:
                return word
        return "correct"

    assert [by_number(lesson_suspects[n], None, None, None) for n in (1, 2, 3)] == list(TRUTH.values())
    with pytest.raises(ExerciseError, match="is not 'correct'. Test the verdict you gave"):
        suspects.check_verdict(by_number)


@pytest.mark.parametrize("word", suspects.VERDICTS)
def test_one_verdict_for_everything_fails_with_a_hint_that_tests_it_not_the_answer(word: str) -> None:
    with pytest.raises(ExerciseError) as err:
        suspects.check_verdict(lambda attention, q, k, mask: word)
    text = str(err.value)
    assert f"that attention is not {word!r}. Test the verdict you gave" in text
    assert "the check's own implementation" in text
    for other in suspects.VERDICTS:           # the message tests the verdict given; it never names the true one
        if other != word:
            assert repr(other) not in text and f'"{other}"' not in text


def test_half_a_test_fails() -> None:
    def reference_only(attention, q, k, mask):   # never looks at the row sums
        w = _weights(attention, q, k, mask)
        reference = _softmax(q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]) + mask)
        return "correct" if np.allclose(w, reference) else "no scale"

    with pytest.raises(ExerciseError, match="is not 'no scale'.*rows that sum to 1"):
        suspects.check_verdict(reference_only)


def test_a_test_written_for_one_token_axis_only_is_told_about_the_batch_axis() -> None:
    def two_axes(attention, q, k, mask):
        t = q.shape[0]
        with at.Graph():
            qi, ki, vi = at.input("q", q.shape), at.input("k", k.shape), at.input("v", (t, t))
            w = at.run(attention(qi, ki, vi, mask), {qi: q, ki: k, vi: np.eye(t)})
        if not np.allclose(w.sum(axis=-1), 1.0):
            return "mask after softmax"
        return "correct" if np.allclose(w, _softmax(q @ k.T / math.sqrt(q.shape[1]) + mask)) else "no scale"

    with pytest.raises(ExerciseError, match=r"(?s)raised .*swapaxes"):
        suspects.check_verdict(two_axes)


def test_a_verdict_is_one_of_the_three_words_from_a_function() -> None:
    with pytest.raises(ExerciseError, match="should return one of"):
        suspects.check_verdict(lambda attention, q, k, mask: "scale")
    with pytest.raises(ExerciseError, match="should be a function"):
        suspects.check_verdict(dict(TRUTH))

    def stub(attention, q, k, mask):
        raise NotImplementedError("exercise 3")

    with pytest.raises(NotImplementedError):  # the student version's stub: check(3) says "not done yet"
        suspects.check_verdict(stub)
