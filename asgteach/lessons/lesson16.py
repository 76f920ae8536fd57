"""Lesson 16's checks (precision: bfloat16 rounding, rounding to any float format).

* :func:`bfloat16_check` runs the student's ``to_bfloat16(x)`` on fresh float32 bit patterns of every
  kind (ordinary values, ties with an even and an odd last kept bit, carries into the exponent,
  negatives, subnormals, zeros, infinities, values that round up to inf, NaNs with their payload in
  the bits that are dropped) and compares the result bit for bit with round-to-nearest-even on the
  bit pattern. A wrong result is named by its kind, with the input's and both results' bits, and a
  hint for that kind (truncation instead of rounding, a tie rounded the wrong way, a NaN that became
  inf...).
* :func:`round_to_format_check` runs the student's ``round_to_format(x, e, m)`` on formats the lesson never
  used (fp8's E4M3 and E5M2 in IEEE form, tiny and wide ones), and on float16 and float32 against numpy's own
  casts, with values of every kind (ordinary, ties, subnormals, the smallest subnormal's half, the overflow
  threshold and its tie, zeros of both signs, infinities, NaN), and compares bit for bit, naming the kind.

``RULES[1]`` (the rounding on the bits, with numpy: no other library's bfloat16) is read from the answer's
source. The lesson imports the check only; the ``_private`` helpers give the answers away: try the
lesson first.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..grading import rules
from ..grading.rules import STAND_INS, Rule
from ..grading.exercises import ExerciseError
from ..grading.keys import load as load_keys

__all__ = ["LESSON", "RULES", "bfloat16_check", "round_to_format_check", "FORMATS_CHECKED"]

LESSON = "16-precision-and-loss-scaling"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {
    1: Rule(why="write the rounding yourself on the bits, with numpy (no bfloat16 type of another library)",
            imports=STAND_INS | {"asgteach", "struct"}, names=frozenset({"at", "asgteach"})),
    2: Rule(why="write the rounding yourself, with numpy: no float format of another library",
            imports=STAND_INS | {"asgteach"}, names=frozenset({"at", "asgteach"})),
}

_LOW = np.uint32(0xFFFF)
_HIGH = np.uint32(0xFFFF0000)


# --- the exercise: bfloat16 rounding ---------------------------------------------------------------------

def _patterns(rng: np.random.Generator, n: int, sign: Any, exponent: Any, kept: Any, dropped: Any) -> np.ndarray:
    """n bit patterns from their fields: sign (1 bit), exponent (8), kept mantissa (7), dropped bits (16)."""
    def field(v: Any, bits: int) -> np.ndarray:
        return np.asarray(v(n) if callable(v) else np.broadcast_to(v, (n,)), dtype=np.uint64) & ((1 << bits) - 1)

    u = (field(sign, 1) << 31) | (field(exponent, 8) << 23) | (field(kept, 7) << 16) | field(dropped, 16)
    return u.astype(np.uint32)


def _bf16_cases(rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
    """Fresh float32 bit patterns of every kind, most basic first: (what they are, patterns)."""
    def ints(lo: int, hi: int) -> Callable[[int], np.ndarray]:
        return lambda n: rng.integers(lo, hi, n, endpoint=True)

    def even(n: int) -> np.ndarray:
        return rng.integers(0, 63, n, endpoint=True) * 2

    def odd(n: int) -> np.ndarray:
        return rng.integers(0, 63, n, endpoint=True) * 2 + 1

    near_half = lambda n: rng.choice([0x7FFF, 0x8001, 0x7FF0, 0x8010], n)  # noqa: E731
    ordinary = np.concatenate([_patterns(rng, 24, 0, ints(100, 154), ints(0, 127), ints(0, 0xFFFF)),
                               _patterns(rng, 8, 0, ints(1, 254), ints(0, 127), ints(0, 0xFFFF)),
                               _patterns(rng, 8, 0, ints(100, 154), ints(0, 126), near_half)])
    nan_payloads = np.concatenate([
        _patterns(rng, 6, ints(0, 1), 255, 0, ints(1, 0xFFFF)),          # payload only in the dropped bits
        _patterns(rng, 6, ints(0, 1), 255, ints(1, 127), ints(0, 0xFFFF)),
        np.array([0x7FFFFFFF, 0xFFFFFFFF, 0x7FC00000, 0x7F808000, 0xFF800001], dtype=np.uint32)])
    return [
        ("ordinary positive values", ordinary),
        ("ties with an even last kept bit (dropped bits exactly 0x8000)",
         _patterns(rng, 12, 0, ints(100, 154), even, 0x8000)),
        ("ties with an odd last kept bit (dropped bits exactly 0x8000)",
         _patterns(rng, 12, 0, ints(100, 154), odd, 0x8000)),
        ("values whose rounding carries into the exponent (1.99999 -> 2.0)",
         _patterns(rng, 10, 0, ints(1, 250), 127, ints(0x8000, 0xFFFF))),
        ("negative values", np.concatenate([_patterns(rng, 16, 1, ints(100, 154), ints(0, 127), ints(0, 0xFFFF)),
                                            _patterns(rng, 6, 1, ints(100, 154), ints(0, 127), 0x8000)])),
        ("subnormals (exponent bits 0, |x| < 2^-126)",
         np.concatenate([_patterns(rng, 12, ints(0, 1), 0, ints(0, 127), ints(1, 0xFFFF)),
                         _patterns(rng, 4, ints(0, 1), 0, ints(0, 127), 0x8000),
                         np.array([0x007FFFFF, 0x807FFFFF, 0x00000001, 0x80000001], dtype=np.uint32)])),
        ("zeros", np.array([0x00000000, 0x80000000], dtype=np.uint32)),
        ("infinities", np.array([0x7F800000, 0xFF800000], dtype=np.uint32)),
        ("finite values that round to inf (beyond bfloat16's largest, 3.39e38)",
         np.concatenate([_patterns(rng, 6, ints(0, 1), 254, 127, ints(0x8000, 0xFFFF)),
                         np.array([0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F8000], dtype=np.uint32)])),
        ("NaNs (some with their payload only in the low 16 bits)", nan_payloads),
    ]


def _show(bits: int) -> str:
    value = float(np.uint32(bits).view(np.float32))
    return f"{value:.9g} (bits 0x{bits:08X})"


def _is_nan_bits(u: np.ndarray) -> np.ndarray:
    return ((u >> 23) & 0xFF == 0xFF) & (u & 0x7FFFFF != 0)


_RULE = ("keep the upper 16 bits; add 1 to them when the dropped 16 bits are above 0x8000, or exactly 0x8000 "
         "with an odd last kept bit (bit 16)")

_TRUNCATION = ("every wrong result is x with its low 16 bits cut off: that is truncation (chop), which rounds "
               "every value toward zero and drifts, as section 2 measured. Round to nearest instead: " + _RULE + ".")


def _bf16_hint(kind: str, x: int, want: int, got: int) -> str:
    """What a wrong result on one value of ``kind`` most likely means."""
    kept, dropped = x >> 16, x & 0xFFFF
    if kind.startswith("NaN"):
        if _is_nan_bits(np.array([got], dtype=np.uint32))[0]:
            stored = _show(got & 0xFFFF0000)
            return (f"your result is a NaN, but its low 16 bits are not 0, so it is no bfloat16: kept as a real "
                    f"bfloat16 (its upper 16 bits) it reads {stored}. Return a quiet NaN there, 0x7FC00000 "
                    "(with x's sign bit if you like).")
        return ("x is a NaN whose payload sits (partly) in the 16 bits you drop. Cut or rounded like a number, "
                "its pattern turns into inf (a payload only in the dropped bits) or the carry runs past the "
                "exponent (0x7FFFFFFF + 1). Test for NaN first (np.isnan) and return a NaN there, e.g. the quiet "
                "NaN 0x7FC00000.")
    if kind.startswith("infinities"):
        return "inf must stay inf: its dropped bits are 0, so the rounding rule keeps it as it is."
    if kind.startswith("zeros"):
        return "+0 and -0 must stay as they are, sign bit included."
    if got == (x & 0xFFFF0000) and want != got:
        return _TRUNCATION
    if (got & 0xFFFF) != 0 and not _is_nan_bits(np.array([got], dtype=np.uint32))[0]:
        return ("your result is not a bfloat16 at all: its low 16 bits are not 0 (a bfloat16 kept in a float32 "
                "is the upper 16 bits followed by 16 zeros). " + _bf16_kind_hint(kind, kept, dropped))
    return _bf16_kind_hint(kind, kept, dropped)


def _bf16_kind_hint(kind: str, kept: int, dropped: int) -> str:
    """The hint for a wrong rounding of a value of ``kind`` (kept: its upper 16 bits, dropped: its lower 16)."""
    if kind.startswith("ties with an even"):
        return ("x is a tie: its dropped bits are exactly 0x8000, halfway between two bfloat16 values. Ties go to "
                f"the neighbour whose last kept bit is 0; here the last kept bit is already 0 ({kept:016b}), "
                "so round down (keep the upper bits).")
    if kind.startswith("ties with an odd"):
        return ("x is a tie: its dropped bits are exactly 0x8000, halfway between two bfloat16 values. Ties go to "
                f"the neighbour whose last kept bit is 0; here it is 1 ({kept:016b}), so round up: add 1 at bit 16.")
    if kind.startswith("values whose rounding carries"):
        return ("rounding up here adds 1 to a full mantissa (1111111): the carry must run into the exponent, as "
                "1.99999 rounds to 2.0. Add 1 at bit 16 of the whole 32-bit pattern and let the carry run; do not "
                "round the mantissa field on its own.")
    if kind.startswith("negative"):
        return ("the sign is a bit of its own, so the magnitude is rounded by the same rule on the bit pattern as "
                "for positive values: no special case for negatives (and no floor or ceil of the value).")
    if kind.startswith("subnormals"):
        return ("x is a subnormal float32 (exponent bits 0). bfloat16 has subnormals too, and the rule on the bit "
                "pattern handles them with no special case (the largest ones round up into the smallest normal "
                "number, by the same carry). A method working on the value (frexp, log2) usually gets these wrong.")
    if kind.startswith("finite values that round to inf"):
        return ("the nearest bfloat16 of x is beyond bfloat16's largest finite value, and IEEE round-to-nearest "
                "then gives inf. On the bit pattern this needs nothing special: the carry turns exponent 254 with a "
                "full mantissa into exponent 255 with mantissa 0, which is the pattern of inf.")
    direction = "up (add 1 at bit 16)" if dropped > 0x8000 else "down (keep the upper 16 bits)"
    return f"the dropped bits of x are 0x{dropped:04X}, so round {direction}. The rule: {_RULE}."


def _calls(fn: Any, name: str) -> bool:
    """Does ``fn``'s code (or code nested in it: a lambda, a comprehension, an inner def) name ``name``?"""
    todo = [getattr(fn, "__code__", None)]
    while todo:
        code = todo.pop()
        if code is None:
            continue
        if name in code.co_names or name in code.co_freevars:
            return True
        todo.extend(c for c in code.co_consts if hasattr(c, "co_names"))
    return False


def _run_bf16(fn: Callable[[np.ndarray], Any], x: np.ndarray, what: str) -> np.ndarray:
    """Call fn on a copy of x; the result's bits, after checking it is a float32 array of x's shape, x untouched."""
    given = x.copy()
    try:
        got = fn(given)
    except NotImplementedError:
        raise  # the stub of an unfinished exercise: check(n) says "not done yet"
    except Exception as e:  # noqa: BLE001 - the student's function failing is a finding, reported as such
        hint = ""
        if what.startswith("NaN"):
            hint = ("\n  Hint: a NaN's payload may sit in the dropped bits, or fill them (0xFFFFFFFF): rounded like a "
                    "number, its upper bits overflow. Test for NaN first (np.isnan) and return a quiet NaN there.")
        raise ExerciseError(f"to_bfloat16 raised {type(e).__name__} on {what}: {e}{hint}") from e
    if got is None:
        raise ExerciseError("to_bfloat16 returned None: did it forget to return the array?")
    if not np.array_equal(given.view(np.uint32), x.view(np.uint32)):
        raise ExerciseError("to_bfloat16 changed its input array: x.view(np.uint32) shares x's memory, so an in-place "
                            "operation on it (+=, &=) writes into x. Compute into a new array (u + ..., not u += ...).")
    arr = np.asarray(got)
    if arr.dtype != np.float32:
        raise ExerciseError(f"to_bfloat16 should return float32 values (a bfloat16 kept in a float32), got dtype "
                            f"{arr.dtype}: turn the rounded uint32 bit patterns back with .view(np.float32)")
    if arr.shape != x.shape:
        raise ExerciseError(f"to_bfloat16 should return an array of x's shape {x.shape}, got shape {arr.shape}")
    return arr.view(np.uint32)


def bfloat16_check(fn: Callable[[np.ndarray], Any], trials: int = 2) -> None:
    """``fn(x)``: float32 array -> float32 array, each value rounded to bfloat16 (nearest, ties to even).

    Runs ``fn`` on fresh bit patterns of every kind and compares bit for bit; the message names the
    kind of value, the first wrong one with its bits, and a hint for that kind.
    """
    rules.enforce(fn, RULES[1], "to_bfloat16")
    keys = load_keys()   # the references, loaded only when a check runs
    if not callable(fn):
        raise ExerciseError(f"to_bfloat16 should be a function, got {type(fn).__name__}")
    if isinstance(fn, np.vectorize) or _calls(fn, "bf16_round"):
        raise ExerciseError("to_bfloat16 hands the work to the lesson's bf16_round, one value at a time (a Python "
                            "loop): the exercise asks for the rule on the whole array at once, with numpy's integer "
                            "operations on x.view(np.uint32), right for every float32 (NaN included)")
    rng = np.random.default_rng()
    for _ in range(trials):
        cases = _bf16_cases(rng)
        wrong_kinds = []
        for kind, u in cases:
            got = _run_bf16(fn, u.view(np.float32), f"{kind}, e.g. x = {_show(int(u[0]))}")
            want = keys.bf16_bits(u)
            nan = _is_nan_bits(want)
            ok = np.where(nan, _is_nan_bits(got) & (got & _LOW == 0), got == want)
            if not ok.all():
                wrong_kinds.append((kind, u, want, got, ok))
        if wrong_kinds:
            kind, u, want, got, ok = wrong_kinds[0]
            k = int(np.argmin(ok))
            x, w, g = int(u[k]), int(want[k]), int(got[k])
            finite = [(uu, gg) for _, uu, _, gg, _ in wrong_kinds if not _is_nan_bits(uu).any()]
            chopped_everywhere = bool(finite) and all(
                np.all((gg == (uu & _HIGH)) | (keys.bf16_bits(uu) == gg)) for uu, gg in finite)
            hint = _TRUNCATION if chopped_everywhere and g == (x & 0xFFFF0000) else _bf16_hint(kind, x, w, g)
            also = [kd for kd, *_ in wrong_kinds[1:]]
            should = "a NaN with its low 16 bits 0" if _is_nan_bits(np.array([w], np.uint32))[0] else _show(w)
            raise ExerciseError(
                f"to_bfloat16 is wrong on {kind}: {int((~ok).sum())} of {len(u)} such values. The first: x = "
                f"{_show(x)} should give {should}, got {_show(g)}."
                + (f"\n  Also wrong on: {'; '.join(also)}." if also else "")
                + f"\n  Hint: {hint}")
    x2 = rng.standard_normal((3, 4)).astype(np.float32)
    got2 = _run_bf16(fn, x2, "a 3 x 4 array")
    want2 = keys.bf16_bits(x2.view(np.uint32))
    if not np.array_equal(got2, want2):
        k = np.unravel_index(int(np.argmax(got2 != want2)), x2.shape)
        raise ExerciseError(f"to_bfloat16 is wrong on a 3 x 4 array at {tuple(int(i) for i in k)}: x = "
                            f"{_show(int(x2.view(np.uint32)[k]))} should give {_show(int(want2[k]))}, got "
                            f"{_show(int(got2[k]))}. Does it work on arrays of any shape?")
    _no_loop(fn, keys.bf16_bits, rng)


#: how many times slower than the vectorised reference, timed in the same run, an answer may be (a numpy answer
#: is 1-5x; a Python loop over the values, or np.vectorize/np.frompyfunc, is hundreds of times slower)
LOOP_FACTOR = 40.0


def _no_loop(fn: Callable[[np.ndarray], Any], reference: Callable[[np.ndarray], Any],
             rng: np.random.Generator, n: int = 1 << 16) -> None:
    """The text's "no Python loop": ``fn`` on n values against the vectorised reference on the same values.

    Both are timed here, in the same run (best of 3; a slow first call of ``fn`` is timed twice more
    before it fails, so one hiccup of the machine does not decide).
    """
    import time

    x = rng.standard_normal(n).astype(np.float32)
    u = x.view(np.uint32)

    def timed(call: Callable[[], Any]) -> float:
        start = time.perf_counter()
        call()
        return time.perf_counter() - start

    ref = min(timed(lambda: reference(u)) for _ in range(3))
    mine = timed(lambda: fn(x.copy()))
    if mine > LOOP_FACTOR * ref and mine > 0.02:
        mine = min(mine, *(timed(lambda: fn(x.copy())) for _ in range(2)))
    if mine > LOOP_FACTOR * ref and mine > 0.02:
        raise ExerciseError(f"to_bfloat16 took {mine:.3f} s on {n:,} values, {mine / ref:.0f} times the vectorised "
                            f"rule timed just now ({ref * 1e3:.2f} ms): that is a Python loop over the values (or "
                            "np.vectorize). The exercise asks for whole-array integer operations on x.view(np.uint32), "
                            "no Python loop")


# --- exercise 2: rounding to any format -------------------------------------------------------------------

#: (exponent bits, mantissa bits) the check rounds to: fp8 E4M3 and E5M2 (IEEE-like), a tiny and a wide format,
#: float16 and float32 (compared with numpy's own casts, which the reference matches bit for bit)
FORMATS_CHECKED = ((4, 3), (5, 2), (3, 2), (6, 9), (5, 10), (8, 23))


def _format_cases(rng: np.random.Generator, e: int, m: int) -> list[tuple[str, np.ndarray]]:
    """Values of every kind for the (e, m) format: (what they are, float64 values)."""
    bias = 2 ** (e - 1) - 1
    largest = (2 - 2.0 ** -m) * 2.0 ** bias
    tiny = 2.0 ** (1 - bias - m)            # the smallest subnormal
    normal = 2.0 ** (1 - bias)

    def representable(n: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        exps = rng.integers(lo, hi, n, endpoint=True)
        mant = rng.integers(0, 2 ** m, n)
        return (1 + mant / 2.0 ** m) * 2.0 ** exps, 2.0 ** (exps - m)

    v, q = representable(24, 1 - bias, bias)
    ties = v + q / 2                         # halfway to the next number up: ties to the even mantissa
    sub = rng.integers(1, 2 ** m, 12) * tiny
    return [
        ("ordinary values", np.concatenate([
            v * (1 + rng.uniform(-0.3, 0.3, 24) / 2.0 ** m),
            rng.choice([-1.0, 1.0], 24) * 2.0 ** rng.uniform(2 - bias, bias - 0.5, 24)])),
        ("ties (exactly halfway between two neighbours)", ties),
        ("negative values and negative ties", -np.concatenate([v[:8] * 1.3, ties[:8]])),
        ("subnormals (below the smallest normal number, 2^(1-bias))",
         np.concatenate([sub, sub + tiny / 2, sub * 1.1, rng.uniform(0, normal, 8)])),
        ("values around the smallest subnormal's half (tiny/2 rounds to 0, just above it to tiny)",
         np.array([tiny / 2, tiny / 2 * (1 + 2.0 ** -20), tiny * 0.4, -tiny / 2, tiny * 0.75, tiny * 1.5])),
        ("values around the overflow threshold (largest + half a gap rounds to inf)",
         np.array([largest, largest * (1 + 2.0 ** -(m + 3)), largest + 2.0 ** (bias - m - 1),
                   largest + 2.0 ** (bias - m - 1) * 0.999, -largest - 2.0 ** (bias - m), largest * 4])),
        ("zeros", np.array([0.0, -0.0])),
        ("infinities and NaN", np.array([np.inf, -np.inf, np.nan])),
    ]


def _format_hint(kind: str, x: float, want: float, got: float, e: int, m: int) -> str:
    bias = 2 ** (e - 1) - 1
    if np.isfinite(x) and np.isinf(want) != np.isinf(got):      # (any kind: a tie above the largest is one too)
        kind = "values around the overflow threshold"
    elif 0 < abs(x) < 2.0 ** (1 - bias) and not kind.startswith("values around the smallest"):
        kind = "subnormals"                                       # (an ordinary value may fall just below the normals)
    if kind.startswith("ties") or kind.startswith("negative"):
        if abs(got) > abs(want) or abs(got) < abs(want):
            return ("x lies exactly halfway between two neighbours: ties go to the one whose last mantissa bit is 0 "
                    "(np.rint rounds half to even; floor(y + 0.5) and round-half-up do not)")
    if kind.startswith("subnormals") or kind.startswith("values around the smallest"):
        return (f"below the smallest normal number 2^(1-bias) = 2^{1 - bias} the exponent stops falling: the gap stays "
                f"2^(1-bias-m) = 2^{1 - bias - m} all the way down to 0 (subnormals), so round to multiples of it "
                "there (and tiny/2, a tie between 0 and tiny, goes to 0)")
    if kind.startswith("values around the overflow"):
        return ("a value at or beyond the largest finite number plus half a gap rounds to inf (the largest's last "
                "mantissa bit is 1, so the tie goes up too); below that it rounds to the largest. Do not clip to the "
                "largest: a float format overflows to inf")
    if kind == "zeros":
        return "-0.0 must stay -0.0: keep the sign of x (np.copysign)"
    if kind.startswith("infinities"):
        return "inf stays inf and NaN stays NaN: they are not numbers to round"
    return ("the gap at x is 2^(E - m), E = floor(log2|x|) (np.frexp gives it without log2's rounding); round |x| "
            "to a multiple of it, to nearest")


def round_to_format_check(fn: Callable[..., Any]) -> None:
    """``fn(x, e, m)`` -> x rounded to the (e, m) format, float64, bit for bit with the reference on every kind."""
    rules.enforce(fn, RULES[2], "round_to_format")
    keys = load_keys()   # the reference, loaded only when a check runs
    rng = np.random.default_rng()
    for e, m in FORMATS_CHECKED:
        for kind, x in _format_cases(rng, e, m):
            want = keys.round_to_format(x, e, m)
            call = f"round_to_format(<{kind}>, e={e}, m={m})"
            try:
                got = fn(x.copy(), e, m)
            except NotImplementedError:
                raise
            except Exception as err:  # noqa: BLE001 - the student's function failing is a finding
                raise ExerciseError(f"{call} raised {type(err).__name__}: {err}") from err
            arr = np.asarray(got)
            if arr.shape != x.shape:
                raise ExerciseError(f"{call} returned shape {arr.shape}; the values have shape {x.shape}")
            arr = arr.astype(np.float64)
            same = (arr.view(np.uint64) == want.view(np.uint64)) | (np.isnan(arr) & np.isnan(want))
            if same.all():
                continue
            k = int(np.argmin(same))
            hint = _format_hint(kind, float(x[k]), float(want[k]), float(arr[k]), e, m)
            raise ExerciseError(f"{call}: x = {x[k]!r} should round to {want[k]!r}, got {arr[k]!r} "
                                f"(format with {e} exponent and {m} mantissa bits).\n  Hint: {hint}.")
