"""Compiling (and differentiating) is linear in the graph's size (issue 11, section 5).

Speed goals do not belong in timed tests (a shared machine makes them flaky), so this test
counts WORK instead: the number of Python lines of asgteach executed (``sys.settrace`` line
events) while ``at.grad`` appends the backward graph, and while the numpy backend compiles
the plan. A linear algorithm does about twice the work on a graph twice as large; the old
in-place planner, which rescanned every value living in a buffer at every step, did about
four times (a chain's gradient flows through ONE buffer, so that list grew with the chain).
``bench/compile_scale.py`` prints the times.

Issue 22 added three more, each of which did about four times the work (or more) for twice the size:
forward mode through ops with no JVP rule of their own, the wgpu compile of a chain and its gradient
(the fusion planner regrouped the whole chain for every member it split off), and a Trainer over many
parameters. The counter sees Python lines only: a scan done inside one line (``x in a_list``, a set
union) is invisible to it; the bench prints those times.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any, Callable

import numpy as np
import pytest

import asgteach as at
from asgteach.backends import numpy_backend, numpy_codegen
from asgteach.ops import apply, registered, spec

from wgpu_helpers import assert_close, f32_feeds, need_gpu, reference

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


def _ratio(small: int, large: int, what: str) -> None:
    ratio = large / small
    assert ratio <= 2.2, f"{what} did {ratio:.2f}x the work for 2x the nodes ({small} -> {large}): not linear"


def test_jvp_through_ops_without_a_rule_does_linear_work() -> None:
    """``at.jvp`` derives the tangent of an op with no JVP rule from its VJP rule, running ``grad`` over the
    rule's few nodes. That ``grad`` first walked every ancestor of the model, once per node: 200 -> 400
    ``mul`` did 3.4x the work."""
    # mul's own spec without a JVP rule: the derived path, whatever rules the registry gains
    derived = dataclasses.replace(spec("mul"), name="mul_without_jvp", jvp=None)

    def work(n: int) -> int:
        with at.Graph():
            x = at.input("x", (3,))
            h = x
            for _ in range(n):
                h = apply("mul_without_jvp", h, x)   # h = x^(n+1)
            count, t = _lines_executed(lambda: at.jvp(h, x, np.ones(3)))
        (got,) = at.run([t], {x: np.array([1.0, -1.0, 0.5])}, backend="numpy")
        want = (n + 1) * np.array([1.0, -1.0, 0.5]) ** n   # d x^(n+1) = (n+1) x^n
        np.testing.assert_allclose(got, want, rtol=1e-12)
        return count

    with registered(derived):
        work(10)   # warm-up
        _ratio(work(200), work(400), "jvp through a chain of mul")


@pytest.mark.gpu
def test_wgpu_compile_of_a_chain_and_its_gradient_does_linear_work() -> None:
    """The GPU plan of ``sum(tanh(...tanh(x)))`` and its gradient: the backward is one candidate chain too wide
    for one kernel, and the fusion planner cut it down a member at a time, regrouping and laying out the
    whole chain after each cut (60 -> 120 tanh: 6.0x the work). (The numpy side: ``CHAINS["tanh"]`` above.)"""
    from asgteach.backends import wgpu_backend

    def work(n: int) -> tuple[int, Any, list[at.Tensor], at.Tensor]:
        with at.Graph() as g:
            x = at.input("x", (4,))
            h = x
            for _ in range(n):
                h = at.tanh(h)
            y = at.sum(h)
            dx = at.grad(y, x)
        count, plan = _lines_executed(lambda: wgpu_backend.compile(g, [y.node_id, dx.node_id]))
        return count, plan, [y, dx], x

    work(20)   # warm-up: the device, first-use caches
    small, _, _, _ = work(60)
    large, plan, outs, x = work(120)
    _ratio(small, large, "the wgpu compile of a tanh chain and its gradient")
    feeds = {x: np.array([0.5, -1.0, 2.0, 0.1])}
    for got, want in zip(plan.run(f32_feeds(feeds)), reference(outs, feeds)):
        assert_close(got, want, "tanh chain on wgpu")


@pytest.mark.parametrize("backend", ["numpy", "wgpu"])
def test_a_trainer_over_many_parameters_builds_in_linear_work(backend: str) -> None:
    """A Trainer over N tiny parameters, ``loss = sum_i sum(p_i * x)``: its graph, backward, optimizer and
    plan are all a few nodes per parameter. On wgpu the gradient flows through one long chain of adds,
    which the fusion planner cut down a member at a time (100 -> 200 parameters: 4.1x the work)."""
    if backend == "wgpu":
        need_gpu()
    X = np.ones((3, 2), np.float32)

    def work(n: int) -> tuple[int, float]:
        with at.Graph():
            x = at.input("x", (3, 2))
            total = None
            for i in range(n):
                term = at.sum(at.parameter(f"p{i}", (2,), init="zeros") * x)
                total = term if total is None else total + term
        count, tr = _lines_executed(lambda: at.Trainer(total, optimizer=at.optim.Adam(lr=0.01), backend=backend,
                                                       seed=0))
        tr.train_step({x: X})
        return count, tr.train_step({x: X})

    work(10)   # warm-up
    (small, _), (large, loss) = work(100), work(200)
    _ratio(small, large, f"building a {backend} Trainer over many parameters")
    # from zeros, Adam's first step moves every weight by -lr (the gradient, 3 per weight, is positive)
    np.testing.assert_allclose(loss, 200 * 3 * 2 * -0.01, rtol=1e-4)


def _chains_for_chain_cost() -> list[tuple[Any, list[int], set[int], tuple[int, ...]]]:
    """Long elementwise chains, each too wide for one kernel in its own way: (graph, members in graph order, the
    requested outputs among them, device limits on storage bindings to try)."""
    cases = []
    with at.Graph() as g:   # uniform words: a scalar constant per mul, an attribute per leaky_relu; one buffer
        h = at.input("x", (2, 3, 4))
        for k in range(90):
            h = at.leaky_relu(h, negative_slope=0.01 * k) if k % 4 == 0 else h * (1.0 - 0.01 * k)
    cases.append((g, [], set(), (8,)))
    with at.Graph() as g:   # buffers read through broadcast strides (the index walk's words), constants of a few
        x = at.input("x", (2, 3, 4))   # elements (buffers, not uniform words), leaves read by several members
        leaves = [at.input("r4", (4,)), at.input("r31", (3, 1)), at.input("r211", (2, 1, 1)), at.input("s", ())]
        h = x
        for k in range(48):
            h = h + leaves[k % 4] if k % 3 else h * at.constant(np.full(4, 1.0 + k)) + 0.5
    cases.append((g, [], set(), (8, 64)))
    with at.Graph() as g:   # stored outputs (a binding each) and inputs of the chain's shape
        h, outs = at.input("x", (3, 4)), set()
        for k in range(40):
            h = h * at.input(f"w{k}", (3, 4)) if k % 4 == 0 else at.tanh(h) + 0.1 * k
            if k % 6 == 0:
                outs.add(h.node_id)
    cases.append((g, [], outs, (3, 5, 8)))
    for g, members, _, _ in cases:
        shape = g.nodes[-1].shape
        members += [n.id for n in g.nodes if n.shape == shape and n.inputs]
    return cases


def test_chain_cost_counts_what_fits_measures() -> None:
    """``wgpu_passes.chains.ChainCost`` keeps what ``wgpu_chain.fits`` measures (storage bindings, uniform words) as
    running counts while a chain too wide for one kernel sheds members. On every suffix of long chains with
    scalar constants, attributes, inputs read through broadcast strides and stored outputs, fresh or after
    shedding members one by one, its estimate must be fits' verdict (both verdicts occur). No device needed."""
    from asgteach.backends.wgpu_chain import Chain, fits
    from asgteach.backends.wgpu_passes.chains import ChainCost

    for g, members, outs, limits in _chains_for_chain_cost():
        inside = set(members)
        into = {i: m for m in members for i in g.nodes[m].inputs if i in inside}   # member -> its reader
        root = members[-1]
        for max_buffers in limits:
            seen = set()
            shedding = ChainCost(g, root, members, outs, into, max_buffers)
            for k in range(len(members) - 1):
                suffix = members[k:]
                want = fits(g, Chain(root, tuple(suffix), tuple(m for m in suffix if m in outs and m != root)),
                            max_buffers)
                where = (g.nodes[root].shape, max_buffers, k)
                assert ChainCost(g, root, suffix, outs, into, max_buffers).estimate() == want, where
                assert shedding.estimate() == want, where
                assert shedding.fits() == want, where
                shedding.remove([shedding.first()])
                seen.add(want)
            assert seen == {True, False}, (g.nodes[root].shape, max_buffers)
