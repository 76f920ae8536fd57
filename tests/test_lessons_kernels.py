"""asgteach.lessons.kernels: the WGSL a node would run, read without a GPU (lesson 11)."""

from __future__ import annotations

import pytest

import asgteach as at
from asgteach.lessons.kernels import dispatches_for, wgsl_for, wgsl_functions


def _broadcast_mul():
    with at.Graph(name="broadcast mul") as g:
        a = at.input("a", (3, 5))
        s = at.input("s", (1, 5))
        prod = a * s
    return g, a, s, prod


def test_dispatch_of_a_broadcast_mul_reads_the_broadcast_axis_with_stride_0() -> None:
    _, a, s, prod = _broadcast_mul()
    (d,) = dispatches_for(prod)
    assert d.entry == "main2" and d.groups == (1, 1, 1)
    assert d.params[0] == 15 and d.params[1] == 2
    assert d.params[8:10].tolist() == [3, 5]
    assert d.params[24:26].tolist() == [0, 1]
    assert d.binds[1] == a.node_id and d.binds[2] == s.node_id


def test_wgsl_functions_cuts_out_whole_functions_with_their_attributes() -> None:
    *_, prod = _broadcast_mul()
    text = wgsl_functions(wgsl_for(prod), ["op", "main2"])
    assert text.startswith("fn op(") and "return a * b;" in text
    assert "@compute @workgroup_size(256)\nfn main2(" in text
    assert text.rstrip().endswith("}") and "fn main1(" not in text
    with pytest.raises(KeyError, match="no WGSL function 'nope'"):
        wgsl_functions(wgsl_for(prod), ["nope"])


def test_leaves_have_no_kernel() -> None:
    _, a, *_ = _broadcast_mul()
    with pytest.raises(ValueError, match="leaves are uploaded"):
        dispatches_for(a)


@pytest.mark.gpu
def test_the_plan_runs_the_kernel_that_lowering_shows() -> None:
    *_, prod = _broadcast_mul()
    plan = at.compile([prod], backend="wgpu")
    assert plan.shader_for(prod) == wgsl_for(prod)
