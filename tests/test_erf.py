"""erf in numpy (asgteach/ops/special.py): where its table comes from, how accurate it is, what it returns.

The table is checked against its recipe, computed here again in exact arithmetic: erf to 90
digits by its Taylor series in ``decimal``, interpolation at Chebyshev points solved in
``fractions``. ``python tests/test_erf.py`` prints the table the recipe gives.

Accuracy (float64), measured when the table was made: at most 0.83 ulp from the exact value on
168,400 points, at most 1 ulp from ``math.erf`` (glibc). The tests below allow 0.9 ulp from the
exact value and 2 ulps from ``math.erf`` (another platform's libm has its own error on top of ours).
"""

from __future__ import annotations

import math
import subprocess
import sys
from decimal import Decimal, localcontext
from fractions import Fraction
from functools import lru_cache

import numpy as np
import pytest

import asgteach as at
from asgteach.ops import spec
from asgteach.ops import special

DIGITS = 100  # working precision; erf's series at |x| = 6 cancels about 16 digits (terms up to e^36)


# --- the recipe ------------------------------------------------------------------------------------

@lru_cache(maxsize=None)
def _pi() -> Decimal:
    """pi to DIGITS digits (Machin: pi = 16 atan(1/5) - 4 atan(1/239))."""
    with localcontext() as ctx:
        ctx.prec = DIGITS + 5

        def atan_inv(n: int) -> Decimal:
            x = Decimal(1) / n
            term, total, k = x, x, 1
            while True:
                term *= -x * x
                k += 2
                if abs(term / k) < Decimal(10) ** -(DIGITS + 5):
                    return total
                total += term / k

        return 16 * atan_inv(5) - 4 * atan_inv(239)


def erf_exact(x: Decimal | float) -> Decimal:
    """erf(x) = 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1)), to about 80 significant digits for |x| <= 6."""
    with localcontext() as ctx:
        ctx.prec = DIGITS
        x = Decimal(x)
        z, term, total, n = x * x, x, x, 0
        while True:
            n += 1
            term = -term * z / n
            total += term / (2 * n + 1)
            if abs(term / (2 * n + 1)) <= Decimal(10) ** -(DIGITS - 5) * abs(total):
                return 2 / _pi().sqrt() * total


def _interpolate(f, lo: float, hi: float, degree: int) -> list[float]:
    """Coefficients (powers of v, rounded to float64) of the polynomial equal to f at degree + 1 Chebyshev points."""
    n = degree + 1
    nodes = [Fraction((lo + hi) / 2 + (hi - lo) / 2 * math.cos(math.pi * (k + 0.5) / n)) for k in range(n)]
    rows = [[v ** j for j in range(n)] + [Fraction(f(Decimal(v.numerator) / v.denominator))] for v in nodes]
    for i in range(n):  # Gaussian elimination, exact
        pivot = max(range(i, n), key=lambda r: abs(rows[r][i]))
        rows[i], rows[pivot] = rows[pivot], rows[i]
        for r in range(i + 1, n):
            q = rows[r][i] / rows[i][i]
            rows[r] = [a - q * b for a, b in zip(rows[r], rows[i])]
    c = [Fraction(0)] * n
    for i in reversed(range(n)):
        c[i] = (rows[i][n] - sum(rows[i][j] * c[j] for j in range(i + 1, n))) / rows[i][i]
    return [float(v) for v in c]


def recipe() -> tuple[float, list[list[float]]]:
    """erf(1) in float64 and the table: piece 0 P(z) = erf(sqrt z)/sqrt z - 1, piece 1 erf(1 + s) - erf(1),
    pieces 2.. G(c + s) = exp((c + s)^2) * (1 - erf(c + s))."""
    b, c, deg = special.BREAKS, special.CENTERS, special.DEGREE
    with localcontext() as ctx:
        ctx.prec = DIGITS
        erf_1 = float(erf_exact(Decimal(1)))
        rows = [_interpolate(lambda z: erf_exact(z.sqrt()) / z.sqrt() - 1, 0.0, b[0] ** 2, deg),
                _interpolate(lambda s: erf_exact(1 + s) - Decimal(erf_1), b[0] - 1, b[1] - 1, deg)]
        for lo, hi, centre in zip(b[1:], b[2:], c[2:]):
            x0 = Decimal(centre)
            rows.append(_interpolate(lambda s: (1 - erf_exact(x0 + s)) * ((x0 + s) ** 2).exp(), lo - centre,
                                     hi - centre, deg))
    return erf_1, rows


# --- the table is the recipe's ---------------------------------------------------------------------

def test_the_table_is_what_the_recipe_gives() -> None:
    erf_1, rows = recipe()
    assert special.ERF_1 == erf_1
    assert len(special.COEFFICIENTS) == len(rows) == len(special.BREAKS)
    for k, (mine, theirs) in enumerate(zip(special.COEFFICIENTS, rows)):
        # equal to the last bits where cos() gives the same nodes; 1e-9 leaves room for another libm's cos
        np.testing.assert_allclose(mine, theirs, rtol=1e-9, atol=1e-25, err_msg=f"piece {k}")
    # the first coefficients are erf's own Taylor coefficients: 2/sqrt(pi) - 1 and -2/(3 sqrt(pi))
    assert special.COEFFICIENTS[0][0] == pytest.approx(2 / math.sqrt(math.pi) - 1, rel=1e-15)
    assert special.COEFFICIENTS[0][1] == pytest.approx(-2 / (3 * math.sqrt(math.pi)), rel=1e-13)


# --- accuracy ----------------------------------------------------------------------------------------

def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    return np.abs(got - want) / np.spacing(np.abs(want))


def _around_breaks(k: int = 8) -> np.ndarray:
    """Each breakpoint and its k float64 neighbours on either side."""
    out = []
    for b in (*special.BREAKS, 0.5, 1.0, 5.9):
        lo = hi = np.float64(b)
        for _ in range(k):
            lo, hi = np.nextafter(lo, 0.0), np.nextafter(hi, np.inf)
            out += [lo, hi]
        out.append(b)
    return np.array(out)


def _float64_points(rng: np.random.Generator, n: int) -> np.ndarray:
    pieces = [rng.uniform(lo, hi, n) for lo, hi in zip((0.0, *special.BREAKS[:-1]), special.BREAKS)]
    tiny = 10.0 ** rng.uniform(-323.5, -1, n)  # down into the subnormals (below 2.2e-308)
    huge = 10.0 ** rng.uniform(0.8, 308, n // 4)
    x = np.concatenate([*pieces, tiny, huge, _around_breaks(), [5e-324, 2.2250738585072014e-308, 1e-300, 6.0, 1e308,
                                                                np.finfo(np.float64).max]])
    return np.concatenate([x, -x])


def test_float64_within_a_ulp_of_the_exact_value() -> None:
    x = _float64_points(np.random.default_rng(0), 150)
    got = special.erf(x)
    far = np.abs(x) > 6  # erf rounds to +-1 there (erfc(6) = 2e-17 < 2^-54, half the gap below 1)
    np.testing.assert_array_equal(got[far], np.sign(x[far]))
    x, got = x[~far], got[~far]
    exact = [erf_exact(float(v)) for v in x]
    worst = max(abs((Decimal(float(g)) - e) / Decimal(float(np.spacing(abs(float(e)))))) for g, e in zip(got, exact))
    assert worst <= Decimal("0.9"), f"max error {float(worst):.3f} ulp (measured when made: 0.83)"


def test_float64_over_the_whole_range_against_math_erf() -> None:
    x = _float64_points(np.random.default_rng(1), 20_000)
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # no warning, even for 1e308 and NaN
        got = special.erf(x)
    want = np.array([math.erf(v) for v in x])
    ulps = _ulps(got, want)
    assert ulps.max() <= 2, f"{ulps.max()} ulps at x = {x[ulps.argmax()]!r}"
    assert np.mean(got == want) > 0.8  # mostly the very same float


def test_special_values() -> None:
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 6.0, -6.0, 1e308])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        got = special.erf(x)
    np.testing.assert_array_equal(got, [0.0, -0.0, 1.0, -1.0, np.nan, 5e-324, -5e-324, 1.0, -1.0, 1.0])
    assert np.signbit(got[1]) and not np.signbit(got[0])  # erf is odd: -0.0 stays -0.0
    # erf(x) = 2x/sqrt(pi) for tiny x, subnormal included
    assert special.erf(np.array([1e-310]))[0] == math.erf(1e-310) == pytest.approx(1e-310 * 2 / math.sqrt(math.pi))
    # float64 saturates to 1 from erfc(x) < 2^-54 on (about 5.92), float32 long before
    assert special.erf(np.array([5.8]))[0] < 1.0 and special.erf(np.array([5.95]))[0] == 1.0


def test_float32_inputs() -> None:
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.standard_normal(20_000) * 2, 10.0 ** rng.uniform(-45, 1, 5000)]).astype(np.float32)
    x = np.concatenate([x, -x, np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 3.9, 4.0])])
    got = special.erf(x)
    assert got.dtype == np.float32 and got.shape == x.shape
    want = np.array([math.erf(float(v)) for v in x]).astype(np.float32)  # the float32 nearest math.erf
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    ulps = _ulps(got[ok].astype(np.float64), want[ok].astype(np.float64))
    assert ulps.max() <= 1, ulps.max()
    assert np.mean(got[ok] == want[ok]) > 0.999


def test_dtypes_and_shapes() -> None:
    for dtype in (np.float16, np.float32, np.float64):
        y = special.erf(np.linspace(-3, 3, 12, dtype=dtype).reshape(3, 4))
        assert y.dtype == dtype and y.shape == (3, 4)
    assert special.erf(np.arange(3)).dtype == np.float64  # integers: float64, as np.exp does
    assert special.erf(np.array([True])).dtype == np.float64
    assert np.ndim(special.erf(np.float32(0.5))) == 0 and special.erf(0.5) == pytest.approx(math.erf(0.5), rel=1e-16)
    assert special.erf(np.zeros((0, 3))).shape == (0, 3)
    big = np.random.default_rng(3).standard_normal((2, special.BLOCK // 40, 25)) * 3  # more than one block
    one_by_one = np.reshape([special.erf(v) for v in big.ravel()], big.shape)
    np.testing.assert_array_equal(special.erf(big), one_by_one)
    with pytest.raises(TypeError, match="erf: needs real numbers"):
        special.erf(np.array([1j]))


def test_the_op_kernels_keep_float32() -> None:
    # the numpy kernels of erf and of the exact gelu (the reference backend is dtype-preserving)
    x = np.linspace(-4, 4, 33, dtype=np.float32)
    for name, attrs in (("erf", {}), ("gelu", {"approximate": "none"})):
        for dtype in (np.float32, np.float64):
            assert spec(name).numpy(x.astype(dtype), **attrs).dtype == dtype, (name, dtype)
    gelu = spec("gelu").numpy(x.astype(np.float64), approximate="none")
    np.testing.assert_allclose(gelu, [0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64)],
                               rtol=1e-15, atol=1e-15)  # (1 + erf) cancels for x < 0: absolute error
    with at.Graph():
        t = at.input("t", (33,))
        y = at.erf(t)
    np.testing.assert_array_equal(at.run(y, {t: x}), special.erf(x))


@pytest.mark.slow
def test_asgteach_runs_erf_and_gelu_without_scipy() -> None:
    script = ("import sys\n"
              "sys.modules['scipy'] = None  # any `import scipy` now fails\n"
              "import numpy as np, asgteach as at\n"
              "from asgteach.opcheck import check_op\n"
              "for op in ('erf', 'gelu'):\n"
              "    r = check_op(op)\n"
              "    assert all(ok for ok, _ in r.results.values()), r\n"
              "x = at.input('x', (3,))\n"
              "print(at.run(at.gelu(x), {x: np.float32([-1, 0, 1])}))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[-0.15865526  0.          0.8413447 ]" in proc.stdout, proc.stdout


if __name__ == "__main__":
    e1, table = recipe()
    print(f"ERF_1 = {e1!r}")
    for row in table:
        print(f"    ({', '.join(repr(v) for v in row)}),")
