"""Lessons 16 and 16b's checks (lesson16, lesson16b): right answers pass, the usual wrong ones fail and say why."""

from __future__ import annotations

import numpy as np
import pytest

from asgteach.grading.keys import load as load_keys
from asgteach.lessons import ExerciseError, check, exercise, lesson16, lesson16b

#: the course's answer keys (instructor/answer_keys.py): the references the checks compare with
answer_keys = load_keys()


# --- exercise 1: to_bfloat16 ---------------------------------------------------------------------------

def _right(x: np.ndarray) -> np.ndarray:
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return np.where(np.isnan(x), np.uint32(0x7FC00000), rounded).view(np.float32)


def _chop(x: np.ndarray) -> np.ndarray:
    return (x.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)


def _half_up(x: np.ndarray) -> np.ndarray:      # ties away from zero
    u = x.view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x8000) & 0xFFFF0000).astype(np.uint32)
    return np.where(np.isnan(x), np.uint32(0x7FC00000), rounded).view(np.float32)


def _nan_unaware(x: np.ndarray) -> np.ndarray:
    u = x.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)


def _nan_kept(x: np.ndarray) -> np.ndarray:     # a NaN, but not a bfloat16 one
    return np.where(np.isnan(x), x, _nan_unaware(x))


def _in_place(x: np.ndarray) -> np.ndarray:
    u = x.view(np.uint32)
    u += np.uint32(1)
    return _right(x)


def _by_value(x: np.ndarray) -> np.ndarray:     # frexp: right for normal numbers only
    with np.errstate(all="ignore"):
        m, e = np.frexp(x.astype(np.float64))
        return np.ldexp(np.rint(m * 256), e - 8).astype(np.float32)


def test_bfloat16_right_answer_passes() -> None:
    lesson16.bfloat16_check(_right)


def test_bfloat16_reference_on_known_patterns() -> None:
    u = np.array([0x3F808000, 0x3F818000, 0x3FFFFFFF, 0x7F7FFFFF, 0x7F800001, 0x807FFFFF, 0x80000001], dtype=np.uint32)
    want = [0x3F800000, 0x3F820000, 0x40000000, 0x7F800000, None, 0x80800000, 0x80000000]
    got = answer_keys.bf16_bits(u)
    for g, w in zip(got, want):
        assert (g & 0xFFFF) == 0 and (w is None or g == w), hex(int(g))
    assert np.isnan(got[4:5].view(np.float32)).all()


@pytest.mark.parametrize(("fn", "words"), [
    (_chop, "that is truncation"),
    (_half_up, "Ties go to the neighbour whose last kept bit is 0"),
    (_nan_unaware, "Test for NaN first"),
    (_nan_kept, "its low 16 bits are not 0"),
    (_in_place, "changed its input array"),
    (_by_value, "subnormals"),
    (lambda x: _right(x).astype(np.float64), "should return float32"),
    (lambda x: _right(x).ravel(), "of x's shape"),
])
def test_bfloat16_wrong_answers_fail_with_a_hint(fn, words: str) -> None:
    with pytest.raises(ExerciseError, match=words):
        lesson16.bfloat16_check(fn)


def _bf16_round(x: float) -> np.float32:       # the lesson's one-value rule
    u = int(np.float32(x).view(np.uint32))
    kept, dropped = u >> 16, u & 0xFFFF
    if dropped > 0x8000 or (dropped == 0x8000 and kept & 1):
        kept += 1
    return np.uint32((kept << 16) & 0xFFFFFFFF).view(np.float32)


def test_bfloat16_refuses_the_lessons_one_value_rule_in_a_loop() -> None:
    bf16_round = _bf16_round

    def looped(x: np.ndarray) -> np.ndarray:
        return np.where(np.isnan(x), np.float32(np.nan),
                        np.array([bf16_round(v) for v in np.nan_to_num(x).ravel()]).reshape(x.shape))

    for fn in (looped, np.vectorize(_bf16_round, otypes=[np.float32])):
        with pytest.raises(ExerciseError, match="hands the work to the lesson's bf16_round"):
            lesson16.bfloat16_check(fn)


def test_bfloat16_stub_is_not_done(capsys: pytest.CaptureFixture) -> None:
    def stub(x):
        raise NotImplementedError("exercise 1")

    with exercise(1):
        pass
    with check(1):
        lesson16.bfloat16_check(stub)
    assert "exercise 1: not done yet" in capsys.readouterr().out


# --- exercise 2: DynamicScaler ---------------------------------------------------------------------------

class _Right:
    def __init__(self, init_scale: float = 2.0 ** 16, growth_interval: int = 100) -> None:
        self.scale, self.growth_interval, self.good = init_scale, growth_interval, 0

    def update(self, grads: list) -> bool:
        if not all(np.isfinite(g).all() for g in grads):
            self.scale /= 2
            self.good = 0
            return False
        self.good += 1
        if self.good == self.growth_interval:
            self.scale *= 2
            self.good = 0
        return True


class _NeverBacksOff(_Right):
    def update(self, grads: list) -> bool:
        finite = all(np.isfinite(g).all() for g in grads)
        if finite:
            super().update(grads)
        return finite


class _AppliesOverflow(_Right):
    def update(self, grads: list) -> bool:
        super().update(grads)
        return True


class _NoResetOnOverflow(_Right):
    def update(self, grads: list) -> bool:
        if not all(np.isfinite(g).all() for g in grads):
            self.scale /= 2
            return False
        return super().update(grads)


class _GrowsLate(_Right):
    def update(self, grads: list) -> bool:
        if not all(np.isfinite(g).all() for g in grads):
            return super().update(grads)
        if self.good == self.growth_interval:
            self.scale *= 2
            self.good = 0
        self.good += 1
        return True


class _InfOnly(_Right):
    def update(self, grads: list) -> bool:
        return super().update([np.where(np.isnan(g), 0.0, g) for g in grads])


def test_scaler_right_answer_passes() -> None:
    lesson16b.scaler_check(_Right)


@pytest.mark.parametrize(("cls", "words"), [
    (_NeverBacksOff, "never backs off"),
    (_AppliesOverflow, "That step must be skipped"),
    (_NoResetOnOverflow, "starts again from 0 after an overflow"),
    (_GrowsLate, "double the scale now"),
    (_InfOnly, "np.isinf does not see NaN"),
])
def test_scaler_wrong_answers_fail_with_a_hint(cls: type, words: str) -> None:
    with pytest.raises(ExerciseError, match=words):
        lesson16b.scaler_check(cls)


# --- lesson 16, exercise 2: rounding to any (e, m) format -------------------------------------------------------

def _round_to_format(x, e, m, ties_even=True, subnormals=True, overflow=True):
    x = np.asarray(x, dtype=np.float64)
    bias = 2 ** (e - 1) - 1
    largest = (2 - 2.0 ** -m) * 2.0 ** bias
    out = x.copy()
    fin = np.isfinite(x)
    a = np.abs(x[fin])
    _, ex = np.frexp(a)
    gap = np.ldexp(1.0, (np.maximum(ex - 1, 1 - bias) if subnormals else ex - 1) - m)
    r = (np.rint(a / gap) if ties_even else np.floor(a / gap + 0.5)) * gap
    out[fin] = np.copysign(np.where(r > largest, np.inf, r) if overflow else np.minimum(r, largest), x[fin])
    return out


def test_round_to_format_passes_on_the_rule_and_matches_numpy_for_float16_and_float32() -> None:
    lesson16.round_to_format_check(_round_to_format)
    x = np.random.default_rng(0).standard_normal(1000) * 10.0 ** np.random.default_rng(1).uniform(-9, 6, 1000)
    with np.errstate(over="ignore"):
        assert np.array_equal(_round_to_format(x, 5, 10), x.astype(np.float16).astype(np.float64))
        assert np.array_equal(_round_to_format(x, 8, 23), x.astype(np.float32).astype(np.float64))


@pytest.mark.parametrize(("kw", "words"), [
    ({"ties_even": False}, "last mantissa bit is 0"),
    ({"subnormals": False}, "the gap stays"),
    ({"overflow": False}, "Do not clip"),
])
def test_round_to_format_names_each_slip(kw, words) -> None:
    with pytest.raises(ExerciseError, match=words):
        lesson16.round_to_format_check(lambda x, e, m: _round_to_format(x, e, m, **kw))


def test_round_to_format_by_numpys_float16_fails_on_another_format() -> None:
    with np.errstate(over="ignore"), pytest.raises(ExerciseError, match="e=4, m=3"):
        lesson16.round_to_format_check(lambda x, e, m: np.asarray(x).astype(np.float16).astype(np.float64))


# --- lesson 16b, exercise 2: the window of safe loss scales -------------------------------------------------------

def test_safe_scales_passes_on_a_search_and_names_the_overflow_threshold() -> None:
    from asgteach.grading.keys import load

    keys = load()
    lesson16b.safe_scales_check(keys.safe_scales)

    def strict(grads, tol):      # overflow read as "beyond 65504" instead of "rounds to inf" (65520)
        g = np.concatenate([np.abs(np.asarray(a, np.float64)).ravel() for a in grads])
        window = keys.safe_scales(grads, tol)
        if window is None:
            return None
        k_hi = max(k for k in range(-80, 81) if g.max() * 2.0 ** k <= 65504)
        return window[0], k_hi

    # (the check's gradients are random: a maximum between 65504 and 65520 after scaling is rare, so force one)
    g = [np.array([1.0, 2.0 ** -10, 65510.0 / 2.0 ** 3], dtype=np.float32)]
    assert keys.safe_scales(g, 0.0)[1] == 3 and strict(g, 0.0)[1] == 2
    with pytest.raises(ExerciseError, match="expected"):
        lesson16b.safe_scales_check(lambda grads, tol: (0, 0))
    with pytest.raises(ExerciseError, match="not lost"):
        lesson16b.safe_scales_check(lambda grads, tol: None)
