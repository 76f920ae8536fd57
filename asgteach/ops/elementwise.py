"""Elementwise ops: arithmetic, comparisons and activations — one block per op.

Each block is the whole op: its kernel, its derivative, the ``register`` call that makes it
known (with its GPU formula, ``gpu=GPU(expr=...)``, and what the view and the tools ask about:
``view=View(...)``, ``tools=Tools(...)``) and the public function. Nothing outside this file lists
these ops.

Binary ops broadcast like numpy. Their backward rules end with ``sum_to(..., shape)``:
if ``b`` of shape (3,) was broadcast against ``a`` of shape (4, 3), every one of b's
entries was used 4 times, so its gradient is the *sum* of the 4 contributions. This is
done in every binary rule, always — forgetting it is the classic autograd bug (RustyASG's
author spent longest on exactly this, in ``div``).

Unary ops are written as (kernel, local derivative f'(x)). The derivative is a small
graph, so the same expression serves the reverse rule (``g * f'(x)``) and the forward
rule (``t * f'(x)``): see :func:`_reverse` and :func:`_forward`.

All of them share one batching rule (``at.vmap``), :func:`batch_elementwise`: an elementwise op
works on a whole batch as it is, once the batch axis of every input lines up. A student's
elementwise op can use it too: ``OpSpec(..., batch=batch_elementwise)``.

At the end, three *composites*: activations made of the ops above (``hardtanh`` is
``minimum(maximum(x, lo), hi)``), registered by name so that ``nn.MLP`` finds them.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..shapes import broadcast_shapes
from ..tensor import Tensor
from . import shape as _shape
from . import special  # erf in numpy (no scipy): the kernel of erf and of the exact gelu
from .registry import GPU, BatchContext, Composite, OpSpec, Tools, View, VjpContext, apply, register

__all__ = [
    "add", "sub", "mul", "div", "neg", "pow", "exp", "log", "sqrt", "abs", "tanh", "sigmoid",
    "relu", "gelu", "silu", "leaky_relu", "softplus", "erf", "sign", "maximum", "minimum",
    "where", "greater", "equal", "hardtanh", "relu6",
]
# (batch_elementwise, the batching rule every op here shares, is exported by asgteach.ops, not as at.*)

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_GELU_TANH_C = math.sqrt(2.0 / math.pi)
_ZERO_GRAD = "piecewise constant: its derivative is 0 wherever it exists, so no gradient flows through it"


# --- shared pieces ------------------------------------------------------------------------
def _broadcast(a: tuple, b: tuple, **_: Any) -> tuple:
    """The shape rule of every binary op: numpy broadcasting."""
    return broadcast_shapes("?", a, b)


def _same_shape(s: tuple, **_: Any) -> tuple:
    """The shape rule of every unary op: the output has the input's shape."""
    return s


def _sum_to(t: Tensor, like: Tensor) -> Tensor:
    return _shape.sum_to(t, like.shape)


def _bcast(t: Tensor | None, shape: tuple) -> Tensor | None:
    return t if t is None or t.shape == shape else _shape.broadcast_to(t, shape)


def _reverse(deriv: Callable[[VjpContext], Tensor]) -> Callable:
    """The backward rule of a unary op from its local derivative: dL/dx = g * f'(x)."""
    return lambda c, g: (g * deriv(c),)


def _forward(deriv: Callable[[VjpContext], Tensor]) -> Callable:
    """The forward-mode rule from the same local derivative: dy = t * f'(x)."""
    return lambda c, t: None if t[0] is None else t[0] * deriv(c)


def _separated(b: Any) -> tuple[Tensor, Tensor]:
    """A sample pair (2, 3) and (3,) that differs by >= 0.2 everywhere: no ties, no kinks."""
    return b.pair(b.shape, b.shape[-1:])


def batch_elementwise(c: BatchContext, args: tuple, dims: tuple) -> tuple[Tensor, int]:
    """The batching rule of every elementwise op (``at.vmap``): line the batch axes up, then run the op once.

    An elementwise op computes each output element from the elements at the same place, so on a
    batch it is the very same op, as long as every batched input has its batch axis in the same
    place, and broadcasting lines the per-example axes up as it did for one example:

    * one input (``exp``, ``relu``): nothing to line up, the output's batch axis is the input's;
    * otherwise each batched input gets its batch axis first, and, if it has fewer per-example axes
      than the output, size-1 axes after it. For one example, a (3,) and a (4, 3) broadcast to
      (4, 3); for a batch of B, a (B, 3) and a (B, 4, 3) would not broadcast at all (3 against
      4), so the first becomes (B, 1, 3). An input that is not batched is left as it is: numpy pads
      it on the left and it lines up with the per-example axes by itself.

    The op runs once with its own attributes (``negative_slope``, ``beta``): no per-example copy.
    """
    if len(args) == 1:
        return apply(c.op, args[0], **c.attrs), dims[0]
    rank = len(c.out_shape)
    return apply(c.op, *(c.aligned(x, d, rank) for x, d in zip(args, dims)), **c.attrs), 0


# --- add ----------------------------------------------------------------------------------
def _add_vjp(c: VjpContext, g: Tensor):
    a, b = c.inputs
    return (_sum_to(g, a) if c.needs[0] else None, _sum_to(g, b) if c.needs[1] else None)


def _add_jvp(c: VjpContext, t):
    ta, tb = (_bcast(x, c.out.shape) for x in t)
    return ta if tb is None else tb if ta is None else ta + tb


register(OpSpec(
    name="add", category="arithmetic", arity=2, infer=_broadcast, numpy=np.add, vjp=_add_vjp, jvp=_add_jvp,
    batch=batch_elementwise,
    doc="a + b, broadcasting",
    gpu=GPU(expr="a + b"), view=View(broadcasts=True),
    tools=Tools(nan_hint="inf + (-inf) is NaN; an earlier value overflowed"),
))


def add(a: Any, b: Any) -> Tensor:
    """a + b with numpy broadcasting."""
    return apply("add", a, b)


# --- sub ----------------------------------------------------------------------------------
def _sub_vjp(c: VjpContext, g: Tensor):
    a, b = c.inputs
    return (_sum_to(g, a) if c.needs[0] else None, _sum_to(neg(g), b) if c.needs[1] else None)


def _sub_jvp(c: VjpContext, t):
    ta, tb = (_bcast(x, c.out.shape) for x in t)
    return (neg(tb) if tb is not None else None) if ta is None else ta if tb is None else ta - tb


register(OpSpec(
    name="sub", category="arithmetic", arity=2, infer=_broadcast, numpy=np.subtract, vjp=_sub_vjp, jvp=_sub_jvp,
    batch=batch_elementwise,
    doc="a - b, broadcasting",
    gpu=GPU(expr="a - b"), view=View(broadcasts=True),
    tools=Tools(nan_hint="inf - inf is NaN; an earlier value overflowed"),
))


def sub(a: Any, b: Any) -> Tensor:
    """a - b with numpy broadcasting."""
    return apply("sub", a, b)


# --- mul ----------------------------------------------------------------------------------
def _mul_vjp(c: VjpContext, g: Tensor):
    a, b = c.inputs
    return (_sum_to(g * b, a) if c.needs[0] else None, _sum_to(g * a, b) if c.needs[1] else None)


register(OpSpec(
    name="mul", category="arithmetic", arity=2, infer=_broadcast, numpy=np.multiply, vjp=_mul_vjp,
    batch=batch_elementwise,
    doc="a * b, elementwise, broadcasting",
    gpu=GPU(expr="a * b"), view=View(broadcasts=True),
    tools=Tools(nan_hint="0 * inf is NaN; an earlier value overflowed"),
))


def mul(a: Any, b: Any) -> Tensor:
    """a * b elementwise, with numpy broadcasting."""
    return apply("mul", a, b)


# --- div ----------------------------------------------------------------------------------
def _div_vjp(c: VjpContext, g: Tensor):
    # out = a / b;  d/da = 1/b;  d/db = -a/b^2 = -out/b
    a, b = c.inputs
    da = _sum_to(g / b, a) if c.needs[0] else None
    db = _sum_to(neg(g) * c.out / b, b) if c.needs[1] else None
    return da, db


register(OpSpec(
    name="div", category="arithmetic", arity=2, infer=_broadcast, numpy=np.divide, vjp=_div_vjp,
    batch=batch_elementwise,
    doc="a / b, elementwise, broadcasting",
    gpu=GPU(expr="a / b"), view=View(broadcasts=True),
    tools=Tools(nan_hint="0/0 and inf/inf are NaN; check for a zero denominator"),
))


def div(a: Any, b: Any) -> Tensor:
    """a / b elementwise, with numpy broadcasting."""
    return apply("div", a, b)


# --- pow ----------------------------------------------------------------------------------
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


register(OpSpec(
    name="pow", category="arithmetic", arity=2, infer=_broadcast, numpy=np.power, vjp=_pow_vjp,
    batch=batch_elementwise,
    doc="a ** b, elementwise; the exponent may be a tensor",
    gpu=GPU(expr="f_pow(a, b)"), view=View(broadcasts=True),
    tools=Tools(sample=lambda b: pow(b.x(lo=0.5, hi=2.0), b.x(b.shape[-1:])),   # a > 0: log(a) in d/db exists
                nan_hint="a negative base to a fractional power is NaN"),
))


def pow(a: Any, b: Any) -> Tensor:  # noqa: A001 - numpy's name
    """a ** b elementwise; ``b`` may be a scalar or a tensor (then d/db = a^b log a)."""
    return apply("pow", a, b)


# --- maximum / minimum: the gradient goes to the winner, ties split it -----------------------
def _max_mask(a: Tensor, b: Tensor) -> Tensor:
    # 1 where a wins, 0 where b wins, 1/2 at ties (the subgradient PyTorch uses)
    return greater(a, b) + 0.5 * equal(a, b)


def _maximum_vjp(c: VjpContext, g: Tensor):
    a, b = c.inputs
    m = _max_mask(a, b)
    return (_sum_to(g * m, a) if c.needs[0] else None, _sum_to(g * (1.0 - m), b) if c.needs[1] else None)


register(OpSpec(
    name="maximum", category="arithmetic", arity=2, infer=_broadcast, numpy=np.maximum, vjp=_maximum_vjp,
    batch=batch_elementwise,
    doc="elementwise larger of a and b",
    gpu=GPU(expr="f_max(a, b)"), view=View(broadcasts=True), tools=Tools(sample=lambda b: maximum(*_separated(b))),
))


def maximum(a: Any, b: Any) -> Tensor:
    """Elementwise max of two tensors (ties split the gradient in half)."""
    return apply("maximum", a, b)


def _minimum_vjp(c: VjpContext, g: Tensor):
    a, b = c.inputs
    m = _max_mask(b, a)
    return (_sum_to(g * m, a) if c.needs[0] else None, _sum_to(g * (1.0 - m), b) if c.needs[1] else None)


register(OpSpec(
    name="minimum", category="arithmetic", arity=2, infer=_broadcast, numpy=np.minimum, vjp=_minimum_vjp,
    batch=batch_elementwise,
    doc="elementwise smaller of a and b",
    gpu=GPU(expr="f_min(a, b)"), view=View(broadcasts=True), tools=Tools(sample=lambda b: minimum(*_separated(b))),
))


def minimum(a: Any, b: Any) -> Tensor:
    """Elementwise min of two tensors (ties split the gradient in half)."""
    return apply("minimum", a, b)


# --- comparisons: float masks, no gradient by design -------------------------------------------
def _compare_kernel(fn: Callable) -> Callable:
    def kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return fn(a, b).astype(np.result_type(a, b))

    return kernel


register(OpSpec(
    name="greater", category="comparison", arity=2, infer=_broadcast, numpy=_compare_kernel(np.greater),
    vjp=lambda c, g: (None, None), zero_gradient=_ZERO_GRAD,
    batch=batch_elementwise,
    doc="1.0 where a > b, else 0.0 (a float mask)",
    gpu=GPU(expr="select(0.0, 1.0, a > b)"), view=View(broadcasts=True),
    tools=Tools(sample=lambda b: greater(*_separated(b))),
))


def greater(a: Any, b: Any) -> Tensor:
    """1.0 where a > b else 0.0. Also ``a > b``."""
    return apply("greater", a, b)


register(OpSpec(
    name="equal", category="comparison", arity=2, infer=_broadcast, numpy=_compare_kernel(np.equal),
    vjp=lambda c, g: (None, None), zero_gradient=_ZERO_GRAD,
    batch=batch_elementwise,
    doc="1.0 where a == b, else 0.0 (a float mask)",
    gpu=GPU(expr="select(0.0, 1.0, a == b)"), view=View(broadcasts=True),
    tools=Tools(sample=lambda b: equal(b.x((3,), value=[1.0, 2.0, 3.0]), b.x((3,), value=[1.0, 0.5, 3.0]))),  # ties
))


def equal(a: Any, b: Any) -> Tensor:
    """1.0 where a == b else 0.0 (``==`` on Tensors compares identity, not values)."""
    return apply("equal", a, b)


# --- where: pick by a condition ---------------------------------------------------------------
def _where_infer(c: tuple, a: tuple, b: tuple, **_: Any) -> tuple:
    return broadcast_shapes("?", c, a, b)


def _where_kernel(cond: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(cond != 0, a, b).astype(np.result_type(a, b), copy=False)


def _where_vjp(c: VjpContext, g: Tensor):
    cond, a, b = c.inputs
    zero = 0.0
    da = _sum_to(where(cond, g, zero), a) if c.needs[1] else None
    db = _sum_to(where(cond, zero, g), b) if c.needs[2] else None
    return None, da, db


register(OpSpec(
    name="where", category="arithmetic", arity=3, infer=_where_infer, numpy=_where_kernel, vjp=_where_vjp,
    batch=batch_elementwise,
    diff_inputs=(False, True, True), input_kinds=("any", "float", "float"),
    doc="picks a where cond is nonzero, else b; the condition gets no gradient",
    # inputs cond, a, b are a, b, c in the formula; f_nonzero judges the condition like numpy (-0.0 is false)
    gpu=GPU(expr="select(c, b, f_nonzero(a))"), view=View(broadcasts=True),
    tools=Tools(sample=lambda b: where(b.ids((2, 3), [[1, 0, 1], [0, 0, 1]]), b.x((2, 3)), b.x((3,)))),
))


def where(cond: Any, a: Any, b: Any) -> Tensor:
    """``a`` where ``cond`` is nonzero, else ``b`` (all three broadcast)."""
    return apply("where", cond, a, b)


# --- neg ----------------------------------------------------------------------------------------
register(OpSpec(
    name="neg", category="arithmetic", arity=1, infer=_same_shape, numpy=np.negative,
    vjp=lambda c, g: (neg(g),), jvp=lambda c, t: None if t[0] is None else neg(t[0]),
    batch=batch_elementwise,
    doc="-x",
    gpu=GPU(expr="-x"),
))


def neg(x: Any) -> Tensor:
    """-x."""
    return apply("neg", x)


# --- exp: its own derivative ----------------------------------------------------------------------
def _exp_deriv(c: VjpContext) -> Tensor:
    return c.out  # d/dx e^x = e^x: reuse the forward value


register(OpSpec(
    name="exp", category="arithmetic", arity=1, infer=_same_shape, numpy=np.exp,
    vjp=_reverse(_exp_deriv), jvp=_forward(_exp_deriv), doc="e^x",
    batch=batch_elementwise,
    gpu=GPU(expr="exp(x)"),
))


def exp(x: Any) -> Tensor:
    """e ** x."""
    return apply("exp", x)


# --- log ------------------------------------------------------------------------------------------
def _log_deriv(c: VjpContext) -> Tensor:
    return 1.0 / c.inputs[0]


register(OpSpec(
    name="log", category="arithmetic", arity=1, infer=_same_shape, numpy=np.log,
    vjp=_reverse(_log_deriv), jvp=_forward(_log_deriv),
    batch=batch_elementwise,
    doc="natural logarithm",
    gpu=GPU(expr="f_log(x)"),
    tools=Tools(sample=lambda b: log(b.x(lo=0.3, hi=3.0)),
                nan_hint="log of a negative number is NaN (and log(0) = -inf); clamp the input or add a small epsilon"),
))


def log(x: Any) -> Tensor:
    """Natural logarithm."""
    return apply("log", x)


# --- sqrt -----------------------------------------------------------------------------------------
def _sqrt_deriv(c: VjpContext) -> Tensor:
    return 0.5 / c.out  # d/dx sqrt(x) = 1 / (2 sqrt(x))


register(OpSpec(
    name="sqrt", category="arithmetic", arity=1, infer=_same_shape, numpy=np.sqrt,
    vjp=_reverse(_sqrt_deriv), jvp=_forward(_sqrt_deriv),
    batch=batch_elementwise,
    doc="square root",
    gpu=GPU(expr="f_sqrt(x)"),
    tools=Tools(sample=lambda b: sqrt(b.x(lo=0.3, hi=3.0)),
                nan_hint="sqrt of a negative number is NaN; check the input is >= 0 (e.g. a variance plus eps)"),
))


def sqrt(x: Any) -> Tensor:
    """Square root."""
    return apply("sqrt", x)


# --- abs ------------------------------------------------------------------------------------------
def _abs_deriv(c: VjpContext) -> Tensor:
    return sign(c.inputs[0])


register(OpSpec(
    name="abs", category="arithmetic", arity=1, infer=_same_shape, numpy=np.abs,
    vjp=_reverse(_abs_deriv), jvp=_forward(_abs_deriv),
    batch=batch_elementwise,
    doc="|x|; derivative sign(x) (0 at 0)",
    gpu=GPU(expr="abs(x)"),
))


def abs(x: Any) -> Tensor:  # noqa: A001 - numpy's name
    """|x|."""
    return apply("abs", x)


# --- sign -----------------------------------------------------------------------------------------
register(OpSpec(
    name="sign", category="arithmetic", arity=1, infer=_same_shape, numpy=np.sign,
    vjp=lambda c, g: (None,), zero_gradient=_ZERO_GRAD, doc="-1, 0 or +1 by the sign of x",
    batch=batch_elementwise,
    gpu=GPU(expr="f_sign(x)"),
))


def sign(x: Any) -> Tensor:
    """-1, 0 or 1 (no gradient flows: it is piecewise constant)."""
    return apply("sign", x)


# --- erf ------------------------------------------------------------------------------------------
def _erf_deriv(c: VjpContext) -> Tensor:
    x = c.inputs[0]
    return _TWO_OVER_SQRT_PI * exp(neg(x * x))


register(OpSpec(
    name="erf", category="arithmetic", arity=1, infer=_same_shape, numpy=special.erf,
    vjp=_reverse(_erf_deriv), jvp=_forward(_erf_deriv), doc="the Gauss error function",
    batch=batch_elementwise,
    gpu=GPU(expr="f_erf(x)"),
))


def erf(x: Any) -> Tensor:
    """The error function (used by exact GELU)."""
    return apply("erf", x)


# --- tanh -----------------------------------------------------------------------------------------
def _tanh_deriv(c: VjpContext) -> Tensor:
    return 1.0 - c.out * c.out


register(OpSpec(
    name="tanh", category="activation", arity=1, infer=_same_shape, numpy=np.tanh,
    vjp=_reverse(_tanh_deriv), jvp=_forward(_tanh_deriv), doc="hyperbolic tangent",
    batch=batch_elementwise,
    gpu=GPU(expr="f_tanh(x)"),
))


def tanh(x: Any) -> Tensor:
    """Hyperbolic tangent."""
    return apply("tanh", x)


# --- sigmoid --------------------------------------------------------------------------------------
def _sigmoid_kernel(x: np.ndarray) -> np.ndarray:
    # two branches so exp never overflows: 1/(1+e^-x) for x >= 0, e^x/(1+e^x) otherwise
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _sigmoid_deriv(c: VjpContext) -> Tensor:
    return c.out * (1.0 - c.out)


register(OpSpec(
    name="sigmoid", category="activation", arity=1, infer=_same_shape, numpy=_sigmoid_kernel,
    vjp=_reverse(_sigmoid_deriv), jvp=_forward(_sigmoid_deriv), doc="1 / (1 + e^-x)",
    batch=batch_elementwise,
    gpu=GPU(expr="f_sigmoid(x)"),
))


def sigmoid(x: Any) -> Tensor:
    """1 / (1 + exp(-x)), computed without overflow."""
    return apply("sigmoid", x)


# --- relu -----------------------------------------------------------------------------------------
def _relu_deriv(c: VjpContext) -> Tensor:
    return greater(c.inputs[0], 0.0)


_ZEROS: dict[tuple[tuple[int, ...], np.dtype], np.ndarray] = {}   # (shape, dtype) -> read-only zeros, for relu


def _relu_kernel(x: np.ndarray) -> np.ndarray:
    """``np.maximum(x, 0)``: for a C-ordered float array, against an array of zeros of its shape.

    The same numbers, bit for bit (NaN stays NaN with its sign, -0.0 becomes +0.0 either way;
    tests/test_relu_bits.py compares them), the same dtype and the same C order, but about three
    times faster on the activations of a small MLP: numpy's maximum has a SIMD loop for two
    arrays, not for an array and a scalar (64 x 128 float32, numpy 2.4: 0.9 us against 3.3 us).
    The zeros are made once per shape and dtype and shared (read-only) by every call and thread;
    an array of more than 65,536 elements, or any other (a view in another order, integers),
    takes the scalar as before, so that the zeros never cost much memory.
    """
    if type(x) is np.ndarray and x.dtype.kind == "f" and x.size <= 65536 and x.flags.c_contiguous:
        key = (x.shape, x.dtype)
        zeros = _ZEROS.get(key)
        if zeros is None:
            if len(_ZEROS) >= 64:
                _ZEROS.clear()
            zeros = np.zeros(x.shape, x.dtype)
            zeros.setflags(write=False)
            _ZEROS[key] = zeros
        return np.maximum(x, zeros)
    return np.maximum(x, 0)


register(OpSpec(
    name="relu", category="activation", arity=1, infer=_same_shape, numpy=_relu_kernel,
    vjp=_reverse(_relu_deriv), jvp=_forward(_relu_deriv),
    batch=batch_elementwise,
    doc="max(x, 0)",
    gpu=GPU(expr="f_relu(x)"), tools=Tools(weight_init="kaiming_uniform"),
))


def relu(x: Any) -> Tensor:
    """max(x, 0)."""
    return apply("relu", x)


# --- gelu: exact, or the tanh approximation ---------------------------------------------------------
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


def _gelu_wgsl(approximate: str = "none", **_: Any) -> str:
    """The formula depends on a text attribute, so it is chosen per node (each choice is its own kernel)."""
    if approximate == "tanh":
        return "0.5 * x * (1.0 + f_tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))"
    return "0.5 * x * (1.0 + f_erf(x * 0.7071067811865476))"


register(OpSpec(
    name="gelu", category="activation", arity=1, infer=_same_shape, numpy=_gelu_kernel,
    vjp=_reverse(_gelu_deriv), jvp=_forward(_gelu_deriv), attrs={"approximate": "none"},
    batch=batch_elementwise,
    doc="x * Phi(x) (exact erf, or approximate='tanh')",
    gpu=GPU(expr=_gelu_wgsl),
))


def gelu(x: Any, approximate: str = "none") -> Tensor:
    """GELU, x * Phi(x): exact (erf) by default, ``approximate="tanh"`` as in GPT-2."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return apply("gelu", x, approximate=approximate)


# --- silu -----------------------------------------------------------------------------------------
def _silu_deriv(c: VjpContext) -> Tensor:
    (x,) = c.inputs
    s = sigmoid(x)
    return s * (1.0 + x * (1.0 - s))


register(OpSpec(
    name="silu", category="activation", arity=1, infer=_same_shape, numpy=lambda x: x * _sigmoid_kernel(x),
    vjp=_reverse(_silu_deriv), jvp=_forward(_silu_deriv),
    batch=batch_elementwise,
    doc="x * sigmoid(x) (a.k.a. swish)",
    gpu=GPU(expr="x * f_sigmoid(x)"),
))


def silu(x: Any) -> Tensor:
    """x * sigmoid(x)."""
    return apply("silu", x)


# --- leaky_relu: one number attribute, read by the GPU formula by its name ---------------------------
def _leaky_relu_deriv(c: VjpContext) -> Tensor:
    slope = c.attrs["negative_slope"]
    return slope + (1.0 - slope) * greater(c.inputs[0], 0.0)


register(OpSpec(
    name="leaky_relu", category="activation", arity=1, infer=_same_shape,
    numpy=lambda x, negative_slope=0.01: np.where(x > 0, x, x * negative_slope),
    vjp=_reverse(_leaky_relu_deriv), jvp=_forward(_leaky_relu_deriv), attrs={"negative_slope": 0.01},
    batch=batch_elementwise,
    doc="x for x > 0, slope * x otherwise",
    gpu=GPU(expr="select(x * negative_slope, x, x > 0.0)"), tools=Tools(weight_init="kaiming_uniform"),
))


def leaky_relu(x: Any, negative_slope: float = 0.01) -> Tensor:
    """x if x > 0 else negative_slope * x (PyTorch's default slope 0.01)."""
    return apply("leaky_relu", x, negative_slope=float(negative_slope))


# --- softplus ---------------------------------------------------------------------------------------
def _softplus_deriv(c: VjpContext) -> Tensor:
    return sigmoid(c.attrs["beta"] * c.inputs[0])


register(OpSpec(
    name="softplus", category="activation", arity=1, infer=_same_shape,
    numpy=lambda x, beta=1.0: np.logaddexp(0, beta * x) / beta,
    vjp=_reverse(_softplus_deriv), jvp=_forward(_softplus_deriv), attrs={"beta": 1.0},
    batch=batch_elementwise,
    doc="log(1 + e^(beta x)) / beta, a smooth relu",
    gpu=GPU(expr="f_softplus(x, beta)"),
))


def softplus(x: Any, beta: float = 1.0) -> Tensor:
    """log(1 + exp(beta * x)) / beta, computed stably."""
    return apply("softplus", x, beta=float(beta))


# --- composites: activations made of the ops above (no node, kernel or rule of their own) -------------
def hardtanh(x: Any, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """x clipped to [min_val, max_val]: ``minimum(maximum(x, min_val), max_val)`` (tinygrad's ``clip``).

    A composite: the graph shows a maximum and a minimum node, and the gradient is theirs —
    1 inside the interval, 0 outside, and 1/2 exactly at min_val or max_val (ties split;
    PyTorch's hardtanh gives 0 there).
    """
    if not min_val < max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) must be smaller than max_val ({max_val})")
    return minimum(maximum(x, float(min_val)), float(max_val))


def relu6(x: Any) -> Tensor:
    """min(max(x, 0), 6): ``hardtanh(x, 0, 6)``, a composite (MobileNet's activation)."""
    return hardtanh(x, 0.0, 6.0)


register(Composite(name="hardtanh", category="activation", build=hardtanh,
                   doc="x clipped to [min_val, max_val]: minimum(maximum(x, min_val), max_val)"))
register(Composite(name="relu6", category="activation", build=relu6, doc="min(max(x, 0), 6): hardtanh(x, 0, 6)",
                   tools=Tools(weight_init="kaiming_uniform")))
register(Composite(name="gelu_tanh", category="activation", build=lambda x: gelu(x, approximate="tanh"),
                   doc="gelu(x, approximate='tanh'), the GPT-2 form, by one name"))
