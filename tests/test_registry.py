"""The registry contract: every op is complete, and every op has test cases.

These tests iterate ``asgteach.ops.REGISTRY``, so registering a new op makes them check it.
"""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at
from asgteach.ops import REGISTRY

from opcases import cases_for

NON_LEAF = sorted(name for name, s in REGISTRY.items() if not s.leaf)
LEAVES = sorted(name for name, s in REGISTRY.items() if s.leaf)


def test_registry_has_the_issue_ops() -> None:
    wanted = ("add sub mul div neg pow exp log sqrt abs tanh sigmoid relu gelu silu leaky_relu softplus maximum "
              "minimum where sum mean max var softmax log_softmax matmul transpose reshape broadcast_to sum_to "
              "getitem concat embedding layer_norm").split()
    missing = [w for w in wanted if w not in REGISTRY]
    assert not missing, f"ops missing from the registry: {missing}"
    assert LEAVES == ["constant", "input", "parameter"]


@pytest.mark.parametrize("name", NON_LEAF)
def test_every_op_has_a_test_case(name: str) -> None:
    assert cases_for(name), f"add a case for op {name} to tests/opcases.py"


@pytest.mark.parametrize("name", NON_LEAF)
def test_op_contract(name: str) -> None:
    """What register() does not check itself (a unique name, a known category, a numpy kernel and a vjp or
    a not_differentiable mark are its job: test_register_refuses_incomplete_specs)."""
    s = REGISTRY[name]
    assert callable(s.infer), f"{name} has no shape rule"
    if s.not_differentiable is not None:
        assert isinstance(s.not_differentiable, str) and s.not_differentiable.strip()
    if s.zero_gradient is not None:
        assert isinstance(s.zero_gradient, str) and s.zero_gradient.strip()
    assert isinstance(s.gpu.kernel, str) and s.gpu.kernel, f"{name}: gpu=GPU(kernel=...) must name a kernel"
    if s.arity is not None and s.diff_inputs is not None:
        assert len(s.diff_inputs) == s.arity
    if s.arity is not None and not isinstance(s.input_kinds, str):
        assert len(s.input_kinds) == s.arity
    assert s.doc, f"{name}: a one-line doc is part of the spec"


@pytest.mark.parametrize("name", NON_LEAF)
def test_every_op_has_a_batching_rule_or_a_mark(name: str) -> None:
    """at.vmap batches a node by its op's rule (OpSpec.batch, beside the vjp); an op that cannot have one says why."""
    s = REGISTRY[name]
    if s.not_batchable is not None:
        assert isinstance(s.not_batchable, str) and s.not_batchable.strip()
        assert s.batch is None
    else:
        assert callable(s.batch), (f"{name}: give its OpSpec a batching rule for at.vmap, batch=... (an elementwise "
                                   f"op: batch=batch_elementwise), or not_batchable='why' (docs/adding-an-op.md)")


@pytest.mark.parametrize("name", LEAVES)
def test_leaves_have_no_kernel(name: str) -> None:
    s = REGISTRY[name]
    assert s.numpy is None and s.category == name


def test_register_refuses_incomplete_specs() -> None:
    from asgteach.ops.registry import OpSpec, register

    with pytest.raises(ValueError, match="registered twice"):
        register(OpSpec("add", "arithmetic", 2, lambda a, b: a, np.add, vjp=lambda c, g: (g, g)))
    with pytest.raises(ValueError, match="unknown category"):
        register(OpSpec("zz_op", "nonsense", 1, lambda a: a, np.negative, vjp=lambda c, g: (g,)))
    with pytest.raises(ValueError, match="not_differentiable"):
        register(OpSpec("zz_op", "arithmetic", 1, lambda a: a, np.negative))
    with pytest.raises(ValueError, match="needs a numpy kernel"):
        register(OpSpec("zz_op", "arithmetic", 1, lambda a: a, None, vjp=lambda c, g: (g,)))
    with pytest.raises(ValueError, match="a batching rule is a function"):
        register(OpSpec("zz_op", "arithmetic", 1, lambda a: a, np.negative, vjp=lambda c, g: (g,), batch="elementwise"))
    with pytest.raises(ValueError, match="a batching rule and a not_batchable mark"):
        register(OpSpec("zz_op", "arithmetic", 1, lambda a: a, np.negative, vjp=lambda c, g: (g,),
                        batch=lambda c, args, dims: (args[0], dims[0]), not_batchable="why"))
    assert "zz_op" not in REGISTRY


def test_patched_restores_the_spec() -> None:
    original = REGISTRY["div"]
    with at.ops.patched("div", doc="temporary") as s:
        assert REGISTRY["div"] is s and s.doc == "temporary"
    assert REGISTRY["div"] is original
    with pytest.raises(RuntimeError):
        with at.ops.patched("div", doc="x"):
            raise RuntimeError("boom")
    assert REGISTRY["div"] is original


def test_unknown_op_suggests_close_names() -> None:
    with pytest.raises(KeyError, match="Did you mean.*softmax"):
        at.ops.spec("sotfmax")


def test_nodes_built_with_apply_and_negative_axes_match_the_public_functions():
    """at.sum & co. normalise axes; a node made with apply() directly must infer, run and
    differentiate the same way (on every backend)."""
    from asgteach.ops.registry import apply

    rng = np.random.default_rng(0)
    X = rng.standard_normal((3, 4, 5))
    with at.Graph():
        x = at.input("x", (3, 4, 5))
        raw = [apply("softmax", x, axis=-1), apply("sum", x, axis=(-1,), keepdims=False),
               apply("max", x, axis=(-3, -1), keepdims=True), apply("argmax", x, axis=-1, keepdims=False),
               apply("var", x, axis=(-2,), keepdims=False)]
        public = [at.softmax(x, -1), at.sum(x, axis=-1), at.max(x, axis=(0, 2), keepdims=True), at.argmax(x, -1),
                  at.var(x, axis=1)]
        y = at.sum(raw[1] * raw[1]) + at.sum(raw[4])
        (dx,) = at.grad(y, [x])
    assert [t.shape for t in raw] == [t.shape for t in public]
    backends = ["numpy"] + (["wgpu"] if "wgpu" in at.available() else [])
    want = at.run(public, {x: X})
    for backend in backends:
        got = at.run(raw, {x: X.astype(np.float32)}, backend=backend)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=backend)
    assert at.gradcheck(y, [x], {x: X}).ok
    assert dx.shape == x.shape
