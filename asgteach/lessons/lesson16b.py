"""Lesson 16b's checks (mixed-precision training: dynamic loss scaling, the window of safe scales).

* :func:`scaler_check` drives the student's ``DynamicScaler`` with fresh sequences of gradient
  batches, some holding inf or NaN, and compares every step's answer (apply or skip) and the scale
  after it with the reference policy (PyTorch's ``GradScaler``: halve and skip on inf/NaN, double
  after ``growth_interval`` finite steps in a row). A scaler that never backs off, or that applies
  an overflowing step, is told so.

* :func:`safe_scales_check` runs the student's ``safe_scales(grads, max_underflow)`` on gradient sets of its own
  (magnitudes spread over many powers of two, zeros, negative values; one set too wide for any scale) and compares
  (k_lo, k_hi) with the answer keys, with hints for the overflow threshold (65520, not 65504), zeros counted as
  lost, and a scale returned instead of its exponent.

The exercises have no rule on their source: the check drives the class on sequences it never showed. The
``_private`` helpers give the answer away: try the lesson first.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..grading.exercises import ExerciseError
from ..grading.keys import load as load_keys
from ..grading.rules import Rule

__all__ = ["LESSON", "RULES", "scaler_check", "safe_scales_check"]

LESSON = "16b-mixed-precision-training"

#: exercise -> what its answer may not use: nothing here (the check drives the class itself)
RULES: dict[int, Rule] = {}


# --- the exercise: the dynamic loss scaler -----------------------------------------------------------------

def _batch(rng: np.random.Generator, bad: str | None, where: str = "any") -> tuple[list[np.ndarray], str, int]:
    """2-4 float32 gradient arrays, ``bad`` ("inf", "-inf", "nan") put in one element of array i: (arrays, what, i)."""
    shapes = [tuple(int(s) for s in rng.integers(1, 6, rng.integers(1, 3, endpoint=True)))
              for _ in range(int(rng.integers(2, 4, endpoint=True)))]
    grads = [(rng.standard_normal(s) * 1e-3).astype(np.float32) for s in shapes]
    if bad is None:
        return grads, "finite", -1
    i = len(grads) - 1 if where == "last" else int(rng.integers(0, len(grads)))
    k = int(rng.integers(0, grads[i].size))
    grads[i].flat[k] = {"inf": np.inf, "-inf": -np.inf, "nan": np.nan}[bad]
    index = np.unravel_index(k, grads[i].shape)
    return grads, f"{bad} in grads[{i}][{', '.join(str(int(j)) for j in index)}] (of {len(grads)} arrays)", i


def _scenarios(rng: np.random.Generator) -> list[tuple[float, int, list[tuple[str | None, str]]]]:
    """(init_scale, growth_interval, [(bad or None, where)]): designed sequences first, then random ones."""
    def s0() -> float:
        return float(2.0 ** int(rng.integers(4, 20)))

    n1, n2, n3 = (int(rng.integers(3, 6, endpoint=True)) for _ in range(3))
    ok: tuple[str | None, str] = (None, "any")
    growth = [ok] * (2 * n1 + 1)                                             # grows at step n1, again at 2 n1
    backoff = [ok, ("inf", "any"), ok] + [ok] * (n2 - 2) + [("nan", "any"), ("-inf", "any")] + [ok] * (n2 + 1)
    kinds = [ok] * (n3 - 1) + [("nan", "any")] + [ok] * (n3 - 1) + [("inf", "last")] + [ok] * n3 + [("nan", "last")]
    out = [(s0(), n1, growth), (s0(), n2, backoff), (s0(), n3, kinds)]
    for _ in range(3):
        n = int(rng.integers(2, 5, endpoint=True))
        seq = [(str(rng.choice(["inf", "-inf", "nan"])), "any") if rng.random() < 0.25 else ok for _ in range(40)]
        out.append((s0(), n, seq))
    return out


def _trace(kinds: list[str], scales: list[float]) -> str:
    marks = " ".join(("F" if k == "finite" else "X") for k in kinds[-12:])
    values = " ".join(f"{s:g}" for s in scales[-12:])
    more = "... " if len(kinds) > 12 else ""
    return (f"\n  the steps so far (F finite, X inf/NaN): {more}{marks}"
            f"\n  the scale after each (reference): {more}{values}")


def scaler_check(cls: Any) -> None:
    """``cls(init_scale=..., growth_interval=...)`` with ``.scale`` and ``.update(grads) -> bool``, driven on fresh
    sequences of gradient batches and compared, step by step, with the reference policy."""
    keys = load_keys()   # the references, loaded only when a check runs
    if not isinstance(cls, type) and not callable(cls):
        raise ExerciseError(f"DynamicScaler should be a class, got {type(cls).__name__}")
    rng = np.random.default_rng()
    for init, interval, seq in _scenarios(rng):
        try:
            mine = cls(init_scale=init, growth_interval=interval)
        except NotImplementedError:
            raise
        except Exception as e:  # noqa: BLE001 - a constructor that fails is a finding
            raise ExerciseError(f"DynamicScaler(init_scale={init:g}, growth_interval={interval}) raised "
                                f"{type(e).__name__}: {e}") from e
        ref = keys.ReferenceScaler(init, interval)
        label = f"DynamicScaler(init_scale={init:g}, growth_interval={interval})"
        scale = _scale_of(mine, label)
        if scale != init:
            raise ExerciseError(f"{label} should start with scale {init:g}, got {scale:g}")
        kinds: list[str] = []
        scales: list[float] = []
        since_change = 0
        for step, (bad, where) in enumerate(seq, start=1):
            grads, what, in_array = _batch(rng, bad, where)
            before = ref.scale
            try:
                answer = mine.update([g.copy() for g in grads])
            except NotImplementedError:
                raise
            except Exception as e:  # noqa: BLE001 - the student's method failing is a finding
                raise ExerciseError(f"{label}: step {step}, update(grads) raised {type(e).__name__}: {e} "
                                    f"(grads: a list of {len(grads)} arrays, {what})") from e
            want = ref.update(grads)
            kinds.append(what)
            scales.append(ref.scale)
            since_change = 0 if ref.scale != before else since_change + 1
            if not isinstance(answer, (bool, np.bool_)):
                forgot = " (did update forget its return?)" if answer is None else ""
                raise ExerciseError(f"{label}: update(grads) should return True (apply the step) or False (skip it), "
                                    f"got {answer!r}{forgot}")
            if bool(answer) != want:
                if not want:
                    hint = ""
                    if in_array > 0:
                        hint += " Look at every array of grads, not only the first."
                    if bad == "nan":
                        hint += " np.isinf does not see NaN: np.isfinite is False for inf, -inf and NaN."
                    raise ExerciseError(
                        f"{label}: step {step}'s gradients hold {what}, but update returned True. That step must be "
                        "skipped (return False): applying it would write inf or NaN into the weights, and the "
                        f"weights would never recover.{hint}" + _trace(kinds, scales))
                raise ExerciseError(f"{label}: at step {step} every gradient is finite, but update returned False "
                                    "(skip). Only a step whose gradients hold inf or NaN is skipped."
                                    + _trace(kinds, scales))
            got = _scale_of(mine, label)
            if got != ref.scale:
                raise ExerciseError(f"{label}: after step {step} ({what}) the scale should be {ref.scale:g} (it was "
                                    f"{before:g}), got {got:g}. "
                                    + _scale_hint(bad is not None, before, ref.scale, got, interval, ref.good_steps)
                                    + _trace(kinds, scales))


def _scale_of(obj: Any, label: str) -> float:
    try:
        return float(obj.scale)
    except AttributeError:
        raise ExerciseError(f"{label} has no attribute scale: the training loop reads scaler.scale before each "
                            "step") from None
    except (TypeError, ValueError):
        raise ExerciseError(f"{label}.scale should be a number, got {obj.scale!r:.60}") from None


def _scale_hint(overflow: bool, before: float, want: float, got: float, interval: int, good: int) -> str:
    if overflow:
        if got == before:
            return ("The gradients overflowed, so the scale was too large: halve it. Your scaler never backs off, so "
                    "every later step would overflow again and be skipped.")
        if got > before:
            return "The gradients overflowed: the scale must go DOWN, by a factor 2."
        return "On inf or NaN, back off by exactly a factor 2 (scale / 2)."
    if want > before and got == before:
        return (f"That made {interval} finite steps in a row since the last overflow or the last growth "
                f"(growth_interval = {interval}): double the scale now, and start counting again from 0.")
    if want == before and got > before:
        return (f"Only {good} finite step(s) in a row since the last overflow or growth, and growth_interval is "
                f"{interval}: not yet. The count of good steps starts again from 0 after an overflow AND after "
                "each growth.")
    if want > before:
        return "Grow by exactly a factor 2."
    return "On a finite step the scale only changes when it grows (x 2 after growth_interval good steps in a row)."


# --- exercise 2: the window of safe scales ----------------------------------------------------------------------

def _gradient_sets(rng: np.random.Generator) -> list[tuple[str, list[np.ndarray], float]]:
    """(what it is, float32 gradient arrays, max_underflow)."""
    def spread(n: int, lo: float, hi: float) -> np.ndarray:
        return (rng.choice([-1.0, 1.0], n) * 2.0 ** rng.uniform(lo, hi, n)).astype(np.float32)

    with_zeros = spread(3000, -30, -2)
    with_zeros[rng.choice(3000, 300, replace=False)] = 0.0
    return [
        ("gradients from 2^-30 to 2^-2 in three arrays", [spread(2000, -30, -2), spread(500, -26, -8),
                                                          spread(40, -12, 0)], 0.01),
        ("the same kind with 10% exact zeros (already 0: not lost to float16)", [with_zeros], 0.01),
        ("large gradients, from 2^-10 to 2^12", [spread(4000, -10, 12)], 0.001),
        ("a tight tolerance: none may be lost", [spread(1000, -20, 4)], 0.0),
        ("gradients spread over 2^-40 to 2^10: wider than float16's 40 powers of two", [spread(5000, -40, 10)], 0.0),
    ]


def safe_scales_check(fn: Any) -> None:
    """``fn(grads, max_underflow)`` -> (k_lo, k_hi) or None, compared with the keys on gradient sets of its own."""
    keys = load_keys()   # the reference, loaded only when a check runs
    rng = np.random.default_rng()
    for what, grads, tol in _gradient_sets(rng):
        want = keys.safe_scales(grads, tol)
        call = f"safe_scales(<{what}>, max_underflow={tol})"
        try:
            got = fn([g.copy() for g in grads], tol)
        except NotImplementedError:
            raise
        except Exception as e:  # noqa: BLE001 - the student's function failing is a finding
            raise ExerciseError(f"{call} raised {type(e).__name__}: {e}") from e
        if want is None:
            if got is not None:
                raise ExerciseError(f"{call} returned {got!r}, but no scale is safe for these gradients (the window "
                                    "is empty: the scale that keeps the smallest ones keeps the largest from "
                                    "overflowing no more). Return None then.")
            continue
        if got is None:
            raise ExerciseError(f"{call} returned None, but the scales 2^{want[0]} to 2^{want[1]} are safe for these "
                                "gradients.\n  Hint: count only the NONZERO values that round to 0 (a value that is 0 "
                                "already is not lost), and compare with max_underflow times how many there are.")
        try:
            k_lo, k_hi = (int(v) for v in got)
        except (TypeError, ValueError):
            raise ExerciseError(f"{call} should return (k_lo, k_hi), two integer exponents, or None; got {got!r}") \
                from None
        if (k_lo, k_hi) == want:
            continue
        hint = ""
        if (k_lo, k_hi) == (2.0 ** want[0], 2.0 ** want[1]):
            hint = "those are the scales 2^k; the exercise asks for the exponents k"
        elif k_hi == want[1] - 1:
            hint = ("a scaled value overflows only when it ROUNDS to inf: float16's largest is 65504, but values up to "
                    "65520 (65504 plus half its gap) round down to it")
        elif k_hi != want[1]:
            hint = "k_hi: the largest k at which no value of any array, times 2^k and rounded to float16, is inf"
        elif k_lo != want[0]:
            hint = ("k_lo: the smallest k at which at most max_underflow of the NONZERO gradients round to 0 in "
                    "float16 (a value that is 0 already is not lost; the smallest subnormal is 2^-24, and values up to "
                    "2^-25 round to 0)")
        raise ExerciseError(f"{call} returned ({k_lo}, {k_hi}), expected {want}."
                            + (f"\n  Hint: {hint}." if hint else ""))
