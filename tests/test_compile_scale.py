"""Compiling (and differentiating) is linear in the graph's size (issue 11, section 5).

Speed goals do not belong in timed tests (a shared machine makes them flaky), so this test
counts WORK instead: the number of Python lines of asgteach executed (``sys.settrace`` line
events) while ``at.grad`` appends the backward graph, and while the numpy backend compiles
the plan. A linear algorithm does about twice the work on a graph twice as large; the old
in-place planner, which rescanned every value living in a buffer at every step, did about
four times (a chain's gradient flows through ONE buffer, so that list grew with the chain).
``bench/compile_scale.py`` prints the times.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

import numpy as np
import pytest

import asgteach as at
from asgteach.backends import numpy_backend, numpy_codegen

PACKAGE = os.path.dirname(os.path.abspath(at.__file__))


def _lines_executed(fn: Callable[[], Any]) -> tuple[int, Any]:
    """(how many lines of asgteach's own code ran during ``fn()``, what it returned)."""
    count = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return local

    def global_(frame, event, arg):
        # trace line by line only inside the package (numpy and the stdlib run untraced)
        return local if frame.f_code.co_filename.startswith(PACKAGE) else None

    old = sys.gettrace()
    sys.settrace(global_)
    try:
        result = fn()
    finally:
        sys.settrace(old)
    return count, result


def _chain(n: int, step: Callable[[at.Tensor], at.Tensor]) -> dict[str, int]:
    """Lines executed by at.grad and by compile for a chain of ``n`` steps, plus the program's size."""
    with at.Graph() as g:
        x = at.input("x", (4, 4))
        h = x
        for _ in range(n):
            h = step(h)
        y = at.sum(h)
        grad_work, dx = _lines_executed(lambda: at.grad(y, x))
    compile_work, plan = _lines_executed(lambda: numpy_backend.compile(g, [y.node_id, dx.node_id]))
    plan.run({x: np.full((4, 4), 0.1)})   # and it runs
    return {"grad": grad_work, "compile": compile_work, "source": len(plan.source), "steps": len(plan.steps)}


CHAINS = {
    # the case: N tanh, whose gradient is written in place, step after step, into one buffer
    "tanh": lambda h: at.tanh(h),
    # variants it did not name: views (transpose, reshape) between the ufuncs, and a residual
    # block with a matmul (a generalised ufunc) and a reduction broadcast back
    "views": lambda h: at.reshape(at.transpose(at.tanh(h) * 0.5), (4, 4)),
    "residual": lambda h: h + at.tanh(h @ at.constant(np.eye(4) * 0.5)) - at.mean(h, axis=1, keepdims=True),
    # a kernel that may return a view (concat), fed by views: what it may alias grows with the chain,
    # so tracking the SET of buffers each value may share would be quadratic
    "concat": lambda h: at.concat([h[:, :2], at.tanh(h[:, 2:])], axis=1),
}


@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_grad_and_compile_do_linear_work(chain: str) -> None:
    _chain(20, CHAINS[chain])               # warm-up: first-use caches (op registry, kernels) filled
    small = _chain(300, CHAINS[chain])
    large = _chain(600, CHAINS[chain])
    assert large["steps"] >= 1.9 * small["steps"]
    for what in ("grad", "compile", "source"):
        ratio = large[what] / small[what]
        assert ratio <= 2.2, (f"{chain}: {what} did {ratio:.2f}x the work for 2x the nodes "
                              f"({small[what]} -> {large[what]}): not linear")


def test_the_counter_sees_quadratic_work() -> None:
    """The yardstick itself: a loop that rescans a growing list is caught (ratio ~4)."""
    def quadratic(n: int) -> int:
        seen: list[int] = []
        for i in range(n):
            numpy_codegen.literal(tuple(v for v in seen if v >= 0))   # traced: a line per element
            seen.append(i)
        return len(seen)

    small, _ = _lines_executed(lambda: quadratic(100))
    large, _ = _lines_executed(lambda: quadratic(200))
    assert large / small > 3.0
