"""The checks a numpy training step makes on its outputs, on outputs of every size.

A run looks at every output once (a dot product ``x . x`` or a ``min``, one pass, no
temporary), so these tests use outputs on both sides of the size where the reduction
changes, values whose squares overflow float32, and NaN or inf in one element only.
"""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at

ROWS, IN, OUT = 4, 200, 100    # the weight has 20,000 elements: a "large" output


def _linear_trainer(w0: np.ndarray) -> tuple[at.Trainer, at.Tensor]:
    with at.Graph(name="step_checks"):
        x = at.input("x", (ROWS, IN))
        w = at.parameter("w", (IN, OUT))
        loss = at.mean(x @ w)
    return at.Trainer(loss, at.optim.SGD(lr=0.5), initial={"w": w0}), x


def test_huge_finite_parameters_are_applied_not_taken_for_inf() -> None:
    """|w| ~ 1e30: w . w overflows float32, yet every value is finite, so the step is applied."""
    w0 = np.full((IN, OUT), 1e30, np.float32)
    w0[::2] *= -1
    tr, x = _linear_trainer(w0)
    xs = np.full((ROWS, IN), 1e-30, np.float32)
    tr.train_step({x: xs})
    assert tr.step == 1
    grad = xs.T @ np.full((ROWS, OUT), 1.0 / (ROWS * OUT), np.float32)
    np.testing.assert_array_equal(tr.params["w"], w0 - np.float32(0.5) * grad)
    assert np.isfinite(tr.params["w"]).all()


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan], ids=["inf", "-inf", "nan"])
def test_one_bad_element_in_the_batch_refuses_the_step(bad: float) -> None:
    """One inf or NaN in the batch makes the loss and the large weight's update non-finite: refused."""
    w0 = np.random.default_rng(0).standard_normal((IN, OUT)).astype(np.float32)
    tr, x = _linear_trainer(w0)
    xs = np.ones((ROWS, IN), np.float32)
    xs[2, 7] = bad
    with pytest.raises(at.NumericsError, match="not applied"):
        tr.train_step({x: xs})
    assert tr.step == 0
    np.testing.assert_array_equal(tr.params["w"], w0)
    xs[2, 7] = 1.0
    tr.train_step({x: xs})   # the next good batch trains as usual
    assert tr.step == 1


@pytest.mark.parametrize("size", [8, 16384, 16385, 70000])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_nan_in_any_one_element_of_an_output_is_found(size: int, dtype: type) -> None:
    """plan.run raises for a NaN anywhere in an output, small or large; huge finite values are no NaN."""
    with at.Graph(name="nan_check"):
        a = at.input("a", (size,))
        b = at.input("b", (size,))
        outs = [at.mul(a, 2.0), a * b]   # the NaN can only be in the second, the product
    plan = at.compile(outs)
    ones = np.ones(size, dtype)
    huge = np.full(size, np.finfo(dtype).max / 4, dtype)
    plan.run({a: huge, b: ones})   # x . x overflows to inf: still no NaN
    for where in (0, size // 2, size - 1):
        poisoned = ones.copy()
        poisoned[where] = np.inf
        zeros = np.zeros(size, dtype)
        with pytest.raises(at.NumericsError, match="NaN first appears in mul"):
            plan.run({a: zeros, b: poisoned})   # 0 * inf = NaN in one element of the product
        got = plan.run({a: zeros, b: poisoned}, on_nan="ignore")
        assert np.isnan(got[1]).sum() == 1 and np.isnan(got[1][where]) and not np.isnan(got[0]).any()
