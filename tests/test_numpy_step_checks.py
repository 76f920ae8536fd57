"""The checks a numpy training step makes on its outputs, on outputs of every size.

A run looks at every float output once (a dot product ``x . x``, one pass, no temporary;
the check is written out for each output's declared rank), so these tests use outputs small
and large, of every rank and layout, values whose squares overflow float32, and NaN or inf in
one element only.
"""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at
from asgteach.ops import OpSpec, apply, registered

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


def test_outputs_of_every_rank_and_layout_are_checked_and_integers_skipped() -> None:
    """The check is written for each output's declared kind and shape: a 0-d loss, a vector, a matrix, a
    transposed (non-contiguous) 3-d value and an integer output. A NaN that the run makes in any one
    element of any float output is found; the integer output has no line of its own in the check."""
    shapes = {"s": (5,), "v": (5,), "m": (3, 4), "t": (2, 3, 4)}
    with at.Graph(name="ranks"):
        a = {k: at.input(f"a_{k}", s) for k, s in shapes.items()}
        b = {k: at.input(f"b_{k}", s) for k, s in shapes.items()}
        outs = [at.sum(a["s"] * b["s"]), a["v"] * b["v"], a["m"] * b["m"],
                at.transpose(a["t"] * b["t"], (2, 0, 1)), at.argmax(b["m"], axis=1)]
    plan = at.compile(outs)
    check = plan.source.split("def nan_check(outs):")[1]
    assert check.count("return True") == 4, check   # one test per float output, none for argmax's ids
    zeros = {a[k]: np.zeros(s) for k, s in shapes.items()}
    ones = {b[k]: np.ones(s) for k, s in shapes.items()}
    got = plan.run({**zeros, **ones})
    assert got[3].shape == (4, 2, 3) and not got[3].flags.c_contiguous   # (a view: reshape(-1) copies it)
    for j, k in enumerate(shapes):
        where = tuple(n - 1 for n in shapes[k])   # the last element: 0 * inf = NaN there only
        poisoned = {**ones, b[k]: ones[b[k]].copy()}
        poisoned[b[k]][where] = np.inf
        with pytest.raises(at.NumericsError, match="NaN first appears in mul"):
            plan.run({**zeros, **poisoned})
        got = plan.run({**zeros, **poisoned}, on_nan="ignore")
        assert np.isnan(got[j]).sum() == 1 and all(not np.isnan(o).any() for i, o in enumerate(got[:4]) if i != j)


def test_a_nan_in_a_zero_d_output_made_by_the_run_names_its_op() -> None:
    with at.Graph(name="scalar_nan"):
        x = at.input("x", (3,))
        loss = at.sum(at.log(x))   # log(-1) = NaN: the loss is NaN
    with pytest.raises(at.NumericsError, match="NaN first appears in log"):
        at.run(loss, {x: np.array([1.0, -1.0, 2.0])})
    assert np.isnan(at.run(loss, {x: np.array([1.0, -1.0, 2.0])}, on_nan="ignore"))
    assert at.run(loss, {x: np.array([1.0, np.inf, 2.0])}) == np.inf   # inf is a value, not an error


def test_a_kernel_that_returns_another_shape_than_declared_still_has_its_nan_found() -> None:
    """The written-out check trusts the declared shapes; a user's op whose kernel breaks them (declares a
    scalar, returns a vector) makes it fail, and then every output is looked at as it is."""
    spec = OpSpec(name="sloppy_sum", category="reduction", arity=1, infer=lambda s, **_: (),
                  numpy=lambda x: x * 1.0,   # a bug: declares (), returns x's shape
                  not_differentiable="a test op")
    with registered(spec):
        with at.Graph(name="sloppy"):
            x = at.input("x", (3,))
            y = apply("sloppy_sum", at.log(x))
        plan = at.compile([y])
        assert plan.run({x: np.ones(3)})[0].shape == (3,)   # (wrong, but no NaN: returned as it is)
        with pytest.raises(at.NumericsError, match="NaN first appears in log"):
            plan.run({x: np.array([1.0, -1.0, 2.0])})
