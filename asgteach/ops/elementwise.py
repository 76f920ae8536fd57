"""Elementwise ops: arithmetic, activations and comparisons.

Binary ops broadcast like numpy. Their backward rules end with ``sum_to(..., shape)``:
if ``b`` of shape (3,) was broadcast against ``a`` of shape (4, 3), every one of b's
entries was used 4 times, so its gradient is the *sum* of the 4 contributions. This is
done in every binary rule, always — forgetting it is the classic autograd bug (RustyASG's
author spent longest on exactly this, in ``div``).

Unary ops are written once as (kernel, local derivative). The derivative is a small
graph, so the same expression serves the reverse rule (``g * f'(x)``) and the forward
rule (``t * f'(x)``).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from scipy import special

from ..shapes import broadcast_shapes
from ..tensor import Tensor
from . import shape as _shape
from .registry import OpSpec, VjpContext, apply, register

__all__ = [
    "add", "sub", "mul", "div", "neg", "pow", "exp", "log", "sqrt", "abs", "tanh", "sigmoid",
    "relu", "gelu", "silu", "leaky_relu", "softplus", "erf", "sign", "maximum", "minimum",
    "where", "greater", "equal",
]

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_GELU_TANH_C = math.sqrt(2.0 / math.pi)


def _sum_to(t: Tensor, like: Tensor) -> Tensor:
    return _shape.sum_to(t, like.shape)


def _binary_infer(a: tuple, b: tuple, **_: Any) -> tuple:
    return broadcast_shapes("?", a, b)


def _binary(
    name: str, category: str, kernel: Callable, vjp: Callable, jvp: Callable | None, doc: str, **kw: Any
) -> None:
    register(OpSpec(name, category, 2, _binary_infer, kernel, vjp=vjp, jvp=jvp, doc=doc, wgsl="elementwise", **kw))


def _bcast(t: Tensor | None, shape: tuple) -> Tensor | None:
    return t if t is None or t.shape == shape else _shape.broadcast_to(t, shape)


# --- binary arithmetic ----------------------------------------------------------------
def _add_vjp(c: VjpContext, g: Tensor):
    a, b = c.inputs
    return (_sum_to(g, a) if c.needs[0] else None, _sum_to(g, b) if c.needs[1] else None)


def _add_jvp(c: VjpContext, t):
    ta, tb = (_bcast(x, c.out.shape) for x in t)
    return ta if tb is None else tb if ta is None else ta + tb


def _sub_vjp(c: VjpContext, g: Tensor):
    a, b = c.inputs
    return (_sum_to(g, a) if c.needs[0] else None, _sum_to(neg(g), b) if c.needs[1] else None)


def _sub_jvp(c: VjpContext, t):
    ta, tb = (_bcast(x, c.out.shape) for x in t)
    return (neg(tb) if tb is not None else None) if ta is None else ta if tb is None else ta - tb


def _mul_vjp(c: VjpContext, g: Tensor):
    a, b = c.inputs
    return (_sum_to(g * b, a) if c.needs[0] else None, _sum_to(g * a, b) if c.needs[1] else None)


def _div_vjp(c: VjpContext, g: Tensor):
    # out = a / b;  d/da = 1/b;  d/db = -a/b^2 = -out/b
    a, b = c.inputs
    da = _sum_to(g / b, a) if c.needs[0] else None
    db = _sum_to(neg(g) * c.out / b, b) if c.needs[1] else None
    return da, db


def _pow_vjp(c: VjpContext, g: Tensor):
    """out = a^b;  d/da = b a^(b-1);  d/db = a^b log(a).

    The textbook formulas are right everywhere except at a = 0, where they multiply a zero
    by an infinity and would hand back NaN for derivatives that are plainly 0:

    * d/da a^0: a^0 is the constant 1, so the slope is 0. The formula gives 0 * 0^-1 = 0 * inf.
      Fix: where b = 0 (and a = 0), use the exponent 0 instead of b - 1; then the term is
      b * a^0 = 0 * 1 = 0, finite.
    * d/db a^b at a = 0, b >= 0: 0^b is 0 (or 1 for b = 0) for every such b, so the slope
      is 0. The formula gives 0 * log 0 = 0 * -inf. Fix: take log(1) = 0 there instead.

    Both fixes replace the *input* of the dangerous op (the "double where" trick), not
    only its output: a ``where`` after a NaN would still leak the NaN into the next
    derivative (its backward rule multiplies the unused branch by 0, and 0 * NaN is NaN).
    They use only graph ops (equal, greater, where), so this rule can be differentiated
    again and runs on every backend.
    """
    a, b = c.inputs
    da = db = None
    if c.needs[0]:
        if b.op == "constant":  # fold b - 1 now, so x**2 differentiates to g * 2 * x
            from .leaves import constant

            value = b.graph.constants[b.node_id]
            # where b = 0 the coefficient b is 0: any finite power works, a^0 = 1 is the simplest
            folded = np.where(value == 0, 0, value - 1)
            power = a if np.all(folded == 1) else pow(a, constant(folded, graph=b.graph))
        else:
            both_zero = equal(b, 0.0) * equal(a, 0.0)  # exactly where 0 * 0^-1 would appear
            power = pow(a, b - 1.0 + both_zero)
        da = _sum_to(g * b * power, a)
    if c.needs[1]:
        base_zero = equal(a, 0.0) * (1.0 - greater(0.0, b))  # a = 0 and b >= 0: 0^b is constant in b
        db = _sum_to(g * c.out * log(where(base_zero, 1.0, a)), b)
    return da, db


_binary("add", "arithmetic", np.add, _add_vjp, _add_jvp, "a + b, broadcasting")
_binary("sub", "arithmetic", np.subtract, _sub_vjp, _sub_jvp, "a - b, broadcasting")
_binary("mul", "arithmetic", np.multiply, _mul_vjp, None, "a * b, elementwise, broadcasting")
_binary("div", "arithmetic", np.divide, _div_vjp, None, "a / b, elementwise, broadcasting")
_binary("pow", "arithmetic", np.power, _pow_vjp, None, "a ** b, elementwise; the exponent may be a tensor")


def _max_mask(a: Tensor, b: Tensor) -> Tensor:
    # 1 where a wins, 0 where b wins, 1/2 at ties (the subgradient PyTorch uses)
    return greater(a, b) + 0.5 * equal(a, b)


def _maximum_vjp(c: VjpContext, g: Tensor):
    a, b = c.inputs
    m = _max_mask(a, b)
    return (_sum_to(g * m, a) if c.needs[0] else None, _sum_to(g * (1.0 - m), b) if c.needs[1] else None)


def _minimum_vjp(c: VjpContext, g: Tensor):
    a, b = c.inputs
    m = _max_mask(b, a)
    return (_sum_to(g * m, a) if c.needs[0] else None, _sum_to(g * (1.0 - m), b) if c.needs[1] else None)


_binary("maximum", "arithmetic", np.maximum, _maximum_vjp, None, "elementwise larger of a and b")
_binary("minimum", "arithmetic", np.minimum, _minimum_vjp, None, "elementwise smaller of a and b")


def _compare_kernel(fn: Callable) -> Callable:
    def kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return fn(a, b).astype(np.result_type(a, b))

    return kernel


_ZERO_GRAD = "piecewise constant: its derivative is 0 wherever it exists, so no gradient flows through it"
for _name, _fn, _doc in (
    ("greater", np.greater, "1.0 where a > b, else 0.0 (a float mask)"),
    ("equal", np.equal, "1.0 where a == b, else 0.0 (a float mask)"),
):
    register(OpSpec(
        _name, "comparison", 2, _binary_infer, _compare_kernel(_fn), vjp=lambda c, g: (None, None),
        zero_gradient=_ZERO_GRAD, doc=_doc, wgsl="elementwise",
    ))


def _where_infer(c: tuple, a: tuple, b: tuple, **_: Any) -> tuple:
    return broadcast_shapes("?", c, a, b)


def _where_vjp(c: VjpContext, g: Tensor):
    cond, a, b = c.inputs
    zero = 0.0
    da = _sum_to(where(cond, g, zero), a) if c.needs[1] else None
    db = _sum_to(where(cond, zero, g), b) if c.needs[2] else None
    return None, da, db


def _where_kernel(cond: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(cond != 0, a, b).astype(np.result_type(a, b), copy=False)


register(OpSpec(
    "where", "arithmetic", 3, _where_infer, _where_kernel, vjp=_where_vjp,
    diff_inputs=(False, True, True), input_kinds=("any", "float", "float"), wgsl="elementwise",
    doc="picks a where cond is nonzero, else b; the condition gets no gradient",
))


# --- unary ops: kernel + local derivative ----------------------------------------------
def _unary(name: str, category: str, kernel: Callable, deriv: Callable | None, doc: str,
           attrs: dict | None = None, **kw: Any) -> None:
    """Register a unary op from its kernel and its local derivative f'(x) as a graph."""

    def vjp(c: VjpContext, g: Tensor):
        return (g * deriv(c),)

    def jvp(c: VjpContext, t):
        return None if t[0] is None else t[0] * deriv(c)

    register(OpSpec(
        name, category, 1, lambda s, **_: s, kernel, vjp=vjp if deriv else kw.pop("vjp"),
        jvp=jvp if deriv else kw.pop("jvp", None), attrs=attrs or {}, doc=doc, wgsl="elementwise", **kw,
    ))


def _sigmoid_kernel(x: np.ndarray) -> np.ndarray:
    # two branches so exp never overflows: 1/(1+e^-x) for x >= 0, e^x/(1+e^x) otherwise
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _gelu_kernel(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(_GELU_TANH_C * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + special.erf(x * _SQRT_HALF))


def _gelu_deriv(c: VjpContext) -> Tensor:
    (x,) = c.inputs
    if c.attrs["approximate"] == "tanh":
        inner = _GELU_TANH_C * (x + 0.044715 * x**3)
        th = tanh(inner)
        return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * _GELU_TANH_C * (1.0 + 3 * 0.044715 * x * x)
    # d/dx [x * Phi(x)] = Phi(x) + x * phi(x)
    return 0.5 * (1.0 + erf(x * _SQRT_HALF)) + x * _INV_SQRT_2PI * exp(-0.5 * x * x)


def _silu_deriv(c: VjpContext) -> Tensor:
    (x,) = c.inputs
    s = sigmoid(x)
    return s * (1.0 + x * (1.0 - s))


def _neg_vjp(c: VjpContext, g: Tensor):
    return (neg(g),)


def _neg_jvp(c: VjpContext, t):
    return None if t[0] is None else neg(t[0])


_unary("neg", "arithmetic", np.negative, None, "-x", vjp=_neg_vjp, jvp=_neg_jvp)
_unary("exp", "arithmetic", np.exp, lambda c: c.out, "e^x")
_unary("log", "arithmetic", np.log, lambda c: 1.0 / c.inputs[0], "natural logarithm")
_unary("sqrt", "arithmetic", np.sqrt, lambda c: 0.5 / c.out, "square root")
_unary("abs", "arithmetic", np.abs, lambda c: sign(c.inputs[0]), "|x|; derivative sign(x) (0 at 0)")
_unary("erf", "arithmetic", special.erf,
       lambda c: _TWO_OVER_SQRT_PI * exp(neg(c.inputs[0] * c.inputs[0])), "the Gauss error function")
_unary("tanh", "activation", np.tanh, lambda c: 1.0 - c.out * c.out, "hyperbolic tangent")
_unary("sigmoid", "activation", _sigmoid_kernel, lambda c: c.out * (1.0 - c.out), "1 / (1 + e^-x)")
_unary("relu", "activation", lambda x: np.maximum(x, 0), lambda c: greater(c.inputs[0], 0.0), "max(x, 0)")
_unary("gelu", "activation", _gelu_kernel, _gelu_deriv, "x * Phi(x) (exact erf, or approximate='tanh')",
       attrs={"approximate": "none"})
_unary("silu", "activation", lambda x: x * _sigmoid_kernel(x), _silu_deriv, "x * sigmoid(x) (a.k.a. swish)")
_unary("leaky_relu", "activation", lambda x, negative_slope=0.01: np.where(x > 0, x, x * negative_slope),
       lambda c: c.attrs["negative_slope"] + (1.0 - c.attrs["negative_slope"]) * greater(c.inputs[0], 0.0),
       "x for x > 0, slope * x otherwise", attrs={"negative_slope": 0.01})
_unary("softplus", "activation", lambda x, beta=1.0: np.logaddexp(0, beta * x) / beta,
       lambda c: sigmoid(c.attrs["beta"] * c.inputs[0]), "log(1 + e^(beta x)) / beta, a smooth relu",
       attrs={"beta": 1.0})
register(OpSpec(
    "sign", "arithmetic", 1, lambda s, **_: s, np.sign, vjp=lambda c, g: (None,), zero_gradient=_ZERO_GRAD,
    doc="-1, 0 or +1 by the sign of x", wgsl="elementwise",
))


# --- public functions (numpy / PyTorch names and defaults) -----------------------------
def add(a: Any, b: Any) -> Tensor:
    """a + b with numpy broadcasting."""
    return apply("add", a, b)


def sub(a: Any, b: Any) -> Tensor:
    """a - b with numpy broadcasting."""
    return apply("sub", a, b)


def mul(a: Any, b: Any) -> Tensor:
    """a * b elementwise, with numpy broadcasting."""
    return apply("mul", a, b)


def div(a: Any, b: Any) -> Tensor:
    """a / b elementwise, with numpy broadcasting."""
    return apply("div", a, b)


def pow(a: Any, b: Any) -> Tensor:  # noqa: A001 - numpy's name
    """a ** b elementwise; ``b`` may be a scalar or a tensor (then d/db = a^b log a)."""
    return apply("pow", a, b)


def maximum(a: Any, b: Any) -> Tensor:
    """Elementwise max of two tensors (ties split the gradient in half)."""
    return apply("maximum", a, b)


def minimum(a: Any, b: Any) -> Tensor:
    """Elementwise min of two tensors (ties split the gradient in half)."""
    return apply("minimum", a, b)


def greater(a: Any, b: Any) -> Tensor:
    """1.0 where a > b else 0.0. Also ``a > b``."""
    return apply("greater", a, b)


def equal(a: Any, b: Any) -> Tensor:
    """1.0 where a == b else 0.0 (``==`` on Tensors compares identity, not values)."""
    return apply("equal", a, b)


def where(cond: Any, a: Any, b: Any) -> Tensor:
    """``a`` where ``cond`` is nonzero, else ``b`` (all three broadcast)."""
    return apply("where", cond, a, b)


def neg(x: Any) -> Tensor:
    """-x."""
    return apply("neg", x)


def exp(x: Any) -> Tensor:
    """e ** x."""
    return apply("exp", x)


def log(x: Any) -> Tensor:
    """Natural logarithm."""
    return apply("log", x)


def sqrt(x: Any) -> Tensor:
    """Square root."""
    return apply("sqrt", x)


def abs(x: Any) -> Tensor:  # noqa: A001 - numpy's name
    """|x|."""
    return apply("abs", x)


def sign(x: Any) -> Tensor:
    """-1, 0 or 1 (no gradient flows: it is piecewise constant)."""
    return apply("sign", x)


def erf(x: Any) -> Tensor:
    """The error function (used by exact GELU)."""
    return apply("erf", x)


def tanh(x: Any) -> Tensor:
    """Hyperbolic tangent."""
    return apply("tanh", x)


def sigmoid(x: Any) -> Tensor:
    """1 / (1 + exp(-x)), computed without overflow."""
    return apply("sigmoid", x)


def relu(x: Any) -> Tensor:
    """max(x, 0)."""
    return apply("relu", x)


def gelu(x: Any, approximate: str = "none") -> Tensor:
    """GELU, x * Phi(x): exact (erf) by default, ``approximate="tanh"`` as in GPT-2."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return apply("gelu", x, approximate=approximate)


def silu(x: Any) -> Tensor:
    """x * sigmoid(x)."""
    return apply("silu", x)


def leaky_relu(x: Any, negative_slope: float = 0.01) -> Tensor:
    """x if x > 0 else negative_slope * x (PyTorch's default slope 0.01)."""
    return apply("leaky_relu", x, negative_slope=float(negative_slope))


def softplus(x: Any, beta: float = 1.0) -> Tensor:
    """log(1 + exp(beta * x)) / beta, computed stably."""
    return apply("softplus", x, beta=float(beta))
