"""``backend="reference"``: the reference interpreter is a backend like the others (issue 23, item 1).

Lesson 11 tells students to read ``backends/reference.py`` first; now what they read is also what
``at.run(..., backend="reference")`` runs. It gives numpy's numbers bit for bit, and numpy's errors.
"""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at
from asgteach.backends import common, reference


def _graph():
    with at.Graph() as g:
        x = at.input("x", (3, 4))
        w = at.parameter("w", (4, 2))
        y = at.sum(at.tanh(x @ w) ** 2 + at.exp(-x @ w))
        dx, dw = at.grad(y, [x, w])
    rng = np.random.default_rng(3)
    return g, x, w, [y, dx, dw], {x: rng.standard_normal((3, 4)), w: rng.standard_normal((4, 2))}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_at_run_accepts_the_reference_backend_and_numpy_agrees_bit_for_bit(dtype) -> None:
    g, x, w, outs, feeds = _graph()
    feeds = {k: v.astype(dtype) for k, v in feeds.items()}
    plan = at.compile(outs, backend="reference")
    assert isinstance(plan, common.Plan) and plan.backend == "reference"
    want = at.run(outs, feeds, backend="reference")
    got = at.run(outs, feeds, backend="numpy")
    for a, b in zip(got, want):
        assert a.dtype == b.dtype == dtype
        np.testing.assert_array_equal(a, b)


def test_the_reference_backend_reports_a_nan_and_a_missing_feed_as_numpy_does() -> None:
    with at.Graph():
        x = at.input("x", (3,))
        y = at.log(x) * 2.0
    bad = {x: np.array([1.0, -1.0, 2.0])}
    errors = []
    for backend in ("numpy", "reference"):
        with pytest.raises(at.NumericsError) as e:
            at.run(y, bad, backend=backend)
        errors.append(str(e.value))
        with pytest.raises(at.FeedError, match="missing feed for input 'x'"):
            at.run(y, {}, backend=backend)
        assert np.isnan(at.run(y, bad, backend=backend, on_nan="ignore")[1])
    assert errors[0] == errors[1] and "NaN first appears in log" in errors[0]


def test_its_outputs_are_the_callers_own() -> None:
    with at.Graph():
        x = at.input("x", (2,))
        y = at.reshape(x, (2, 1))
    X = np.array([1.0, 2.0])
    out = at.run([x, y], {x: X}, backend="reference")
    out[0][0] = 99.0
    out[1][0, 0] = 99.0
    assert X[0] == 1.0


def test_the_interpreter_stays_a_dozen_lines() -> None:
    import inspect

    body = inspect.getsource(reference.interpret).split('"""')[-1]
    lines = [ln for ln in body.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    assert len(lines) <= 20, "\n".join(lines)
