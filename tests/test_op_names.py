"""Op names (issue 22): a name ``register`` accepts computes the same on every backend; others are refused.

The numpy backend writes a plan out as Python source and calls each kernel by its op's
name (``v1 = softsign(v0)``). An op called ``not`` used to be registered happily and then
computed ``not(v0)``, Python's operator (one bool for the whole array); ``lambda`` or
``class`` gave a SyntaxError when the plan compiled. Now ``register`` refuses every name
that Python would not read back as that same name, and names Python allows but that
mean something already (``print``, ``np``) or that the generated code uses itself (``env``,
``v0``) compute exactly what the reference interpreter computes, on numpy and on the GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at
from asgteach.backends import reference
from asgteach.ops import GPU, REGISTRY, Composite, OpSpec, apply, register, registered

from wgpu_helpers import run_both

X = np.array([[0.75, -1.5, 2.0], [0.0, 3.25, -0.5]])


def _op(name: str, c: float) -> OpSpec:
    """An elementwise op ``x * 0.5 + c``: each name gets its own ``c``, so a mixed-up kernel shows."""
    return OpSpec(name=name, category="activation", arity=1, infer=lambda s, **_: s,
                  numpy=lambda x: x * 0.5 + c, vjp=lambda ctx, g: (g * 0.5,), gpu=GPU(expr=f"x * 0.5 + {c!r}"))


def _chain(names: list[str]) -> tuple[at.Graph, at.Tensor, list[at.Tensor]]:
    """x -> names[0] -> names[1] -> ...; every intermediate value is an output."""
    with at.Graph() as g:
        x = at.input("x", X.shape)
        outs, h = [], x
        for name in names:
            h = apply(name, h)
            outs.append(h)
    return g, x, outs


# --- refused names --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, why", [
    ("not", "keyword"), ("lambda", "keyword"), ("class", "keyword"), ("None", "keyword"), ("True", "keyword"),
    ("await", "keyword"), ("def", "keyword"),
    ("my-op", "not an identifier"), ("2x", "not an identifier"), ("", "not an identifier"),
    ("my op", "not an identifier"), ("nn.elu", "not an identifier"), ("elu\n", "not an identifier"),
    ("$\\href{javascript:alert(4)}{op}$", "not an identifier"),
    ("\ufb01", "reads as 'fi'"),            # the ligature: Python looks it up as "fi"
    ("\uff4e\uff4f\uff54", "reads as 'not'"),   # full-width "not": a keyword once folded
])
def test_register_refuses_keywords_and_non_identifiers(name: str, why: str) -> None:
    with pytest.raises(ValueError) as info:
        register(_op(name, 1.0))
    msg = str(info.value)
    assert repr(name) in msg, f"the message names the bad name: {msg}"
    assert why in msg and "Python identifiers" in msg and "not Python keywords" in msg, msg
    assert name not in REGISTRY
    with pytest.raises(ValueError, match="composite name"):   # one rule for every name the registry knows
        register(Composite(name=name, category="activation", build=at.relu))
    assert name not in at.ops.COMPOSITES


def test_register_refuses_a_name_that_is_not_text() -> None:
    with pytest.raises(TypeError, match="op name must be text, got int: 3"):
        register(_op(3, 1.0))  # type: ignore[arg-type]
    assert 3 not in REGISTRY


def test_a_refused_keyword_says_what_to_write_instead() -> None:
    with pytest.raises(ValueError, match=r"'not' is a Python keyword.*Pick another name \(not_ or my_not\)"):
        register(_op("not", 1.0))


# --- awkward but legal names: the same numbers as the reference interpreter ------------------------------
AWKWARD = [
    "print", "sum_", "np", "max_", "len",           # builtins and the module name numpy usually goes by
    "env", "k_env", "v0", "v1", "o0", "k_v0",       # what the generated program calls its own values
    "program", "part_0", "part_1", "_copy", "_own", "_writable",   # the generated functions and helpers
    "__builtins__", "__name__",                     # the generated program's globals
    "match", "case", "type", "_",                   # soft keywords: keywords only at a statement's start
    "σ", "сигмоида",                                # identifiers in NFKC form, in other scripts
]


@pytest.mark.gpu
def test_awkward_but_legal_names_compute_what_the_reference_interpreter_computes() -> None:
    ops = [_op(name, 0.125 * (k + 1)) for k, name in enumerate(AWKWARD)]
    with registered(*ops):
        g, x, outs = _chain(AWKWARD)
        want = reference.interpret(g, [t.node_id for t in outs], {x: X})
        got = at.run(outs, {x: X}, backend="numpy")
        for name, a, b in zip(AWKWARD, got, want):
            np.testing.assert_array_equal(a, b, err_msg=f"op {name!r}: numpy plan != reference interpreter")
        # the reference itself is the formula, step by step (a kernel called by another's name would differ)
        h = X
        for k, (name, b) in enumerate(zip(AWKWARD, want)):
            h = h * 0.5 + 0.125 * (k + 1)
            np.testing.assert_allclose(b, h, rtol=1e-12, err_msg=name)
        run_both(outs, {x: X}, "awkward op names on wgpu")
    assert not set(AWKWARD) & set(REGISTRY), "registered() leaves the registry clean"


def test_each_awkward_name_alone_and_read_twice() -> None:
    """One op per program, its kernel called on two lines (the generated program names it once)."""
    for k, name in enumerate(AWKWARD):
        with registered(_op(name, 1.0 + k)):
            g, x, outs = _chain([name, name])
            want = reference.interpret(g, [t.node_id for t in outs], {x: X})
            for a, b in zip(at.run(outs, {x: X}, backend="numpy"), want):
                np.testing.assert_array_equal(a, b, err_msg=f"op {name!r}")


def test_a_name_shaped_like_a_generated_attribute_name_still_computes() -> None:
    clip = OpSpec(name="clip_hi", category="activation", arity=1, infer=lambda s, **_: s,
                  numpy=lambda x, hi=1.0: np.minimum(x, hi), vjp=lambda ctx, g: (g,), attrs={"hi": 1.0},
                  gpu=GPU(expr="min(x, hi)"))
    with registered(_op("a1_hi", 0.25), _op("a2_hi", 0.5), clip):
        with at.Graph() as g:
            x = at.input("x", X.shape)
            h = apply("a1_hi", x)
            h = apply("clip_hi", h, hi=float("inf"))   # inf is no Python literal: the plan binds it to a name
            h = apply("clip_hi", h, hi=float("inf"))
            y = apply("a2_hi", apply("a1_hi", h))
        want = reference.interpret(g, [y.node_id], {x: X})[0]
        np.testing.assert_array_equal(at.run(y, {x: X}, backend="numpy"), want)
