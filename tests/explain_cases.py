"""The formulas of asgteach/explain/*.toml, written again as small numpy expressions.

Each op gets one or more :class:`Case`: how to build a one-op graph, random inputs, the
numpy expression of its ``formula`` and of its ``vjp``. ``tests/test_explain.py`` runs the
op's kernel (``at.run``) and its backward graph (``at.grad`` with a random seed) and
compares them with these expressions, so the text cannot drift from the code. The
expressions deliberately follow the LaTeX (max shift in softmax, sum_to as "sum the
broadcast axes", ties split...), not the kernels.

The inputs are made by the one sample builder (``asgteach.opsamples.SampleInputs``, as for
``asgteach check`` and tests/opcases.py): ``make(b)`` returns the leaves, and the formula gets
their arrays. A vjp expression receives the input arrays, then ``y`` (the forward output) and
``g`` (the seed, dL/dy), and returns one gradient per FLOAT input. ``NOT_DIFFERENTIABLE`` marks
ops whose gradient must raise NotDifferentiableError.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import asgteach as at
from asgteach.opsamples import SampleInputs
from asgteach.ops import apply

NOT_DIFFERENTIABLE = "not differentiable"
B = SampleInputs
_erf = np.vectorize(math.erf)   # the standard library's erf: an oracle apart from asgteach's own


@dataclass
class Case:
    """One numeric check of an op's formula and backward rule."""

    make: Callable[[B], list[at.Tensor]]
    build: Callable[..., at.Tensor]
    formula: Callable[..., np.ndarray]
    vjp: Callable[..., tuple] | str
    leaf: str = "input"  # how the arrays enter the graph: "input", "parameter" or "constant"
    label: str = ""


# --- helpers that spell out the notation of the texts --------------------------------------
def sum_to(x: np.ndarray, s: tuple) -> np.ndarray:
    """sum over A = {a < n - m} ∪ {a : s_{a-n+m} = 1 < x.shape_a}, then shape s."""
    n, m = x.ndim, len(s)
    axes = tuple(a for a in range(n) if a < n - m or s[a - n + m] == 1 < x.shape[a])
    return np.sum(x, axis=axes).reshape(s)


def bcast(v: np.ndarray, x: np.ndarray, axis: tuple, keepdims: bool) -> np.ndarray:
    """Put reduced axes back as size 1 (s_keep) and broadcast to x's shape."""
    keep = v if keepdims else np.expand_dims(v, axis)
    return np.broadcast_to(keep, x.shape)


def normal(*shape: int) -> Callable[[B], at.Tensor]:
    return lambda b: b.normal(shape)


def positive(*shape: int) -> Callable[[B], at.Tensor]:
    return lambda b: b.x(shape, lo=0.5, hi=2.0)


def given(value: Callable[[np.random.Generator], np.ndarray]) -> Callable[[B], at.Tensor]:
    """A float leaf holding ``value(rng)`` (values a case needs exactly: ties, zeros, a constant row)."""
    def make(b: B) -> at.Tensor:
        v = np.asarray(value(b.rng), dtype=np.float64)
        return b.x(v.shape, value=v)

    return make


def ties(*shape: int) -> Callable[[B], at.Tensor]:
    """Small integers as floats: plenty of exact ties (and exact zeros)."""
    return given(lambda r: r.integers(-2, 3, shape).astype(np.float64))


def inputs(*makers: Callable[[B], at.Tensor]) -> Callable[[B], list[at.Tensor]]:
    return lambda b: [m(b) for m in makers]


def unary(fn: Callable, dfn: Callable, maker: Callable = normal(3, 4), label: str = "", **attrs: Any) -> Case:
    """y = fn(x); dL/dx = g * dfn(x, y)."""
    return Case(inputs(maker), lambda x: apply(label or fn.__name__, x, **attrs), lambda x: fn(x),
                lambda x, y, g: (g * dfn(x, y),), label=label)


CASES: dict[str, list[Case]] = {}


def case(op: str, *cases: Case) -> None:
    for c in cases:
        c.label = c.label or op
    CASES.setdefault(op, []).extend(cases)


# --- leaves: y = the fed / stored value; the gradient is the sum over consumers -------------
for _leaf in ("input", "parameter", "constant"):
    case(
        _leaf,
        Case(inputs(normal(3, 2)), lambda x: x, lambda x: x, lambda x, y, g: (g,), leaf=_leaf),
        # two consumers (the two halves of a concat): the leaf's gradient is their sum
        Case(inputs(normal(3, 2)), lambda x: at.concat([x, x], axis=0), lambda x: np.concatenate([x, x]),
             lambda x, y, g: (g[:3] + g[3:],), leaf=_leaf, label=f"{_leaf} used twice"),
    )

# --- shape ops ----------------------------------------------------------------------------------
case("reshape", Case(inputs(normal(2, 6)), lambda x: at.reshape(x, (3, 4)), lambda x: x.ravel().reshape(3, 4),
                     lambda x, y, g: (g.reshape(x.shape),)))


def _transpose_formula(x: np.ndarray, p: tuple) -> np.ndarray:
    out = np.empty(tuple(x.shape[a] for a in p))
    for i in np.ndindex(*out.shape):
        j = [0] * x.ndim
        for k, pk in enumerate(p):
            j[pk] = i[k]
        out[i] = x[tuple(j)]
    return out


case("transpose",
     Case(inputs(normal(2, 3, 4)), lambda x: at.transpose(x, (1, 2, 0)), lambda x: _transpose_formula(x, (1, 2, 0)),
          lambda x, y, g: (np.transpose(g, np.argsort((1, 2, 0))),)),
     Case(inputs(normal(2, 3, 4)), lambda x: x.T, lambda x: _transpose_formula(x, (2, 1, 0)),
          lambda x, y, g: (np.transpose(g, np.argsort((2, 1, 0))),), label="transpose .T reverses all axes"))


def _broadcast_formula(x: np.ndarray, shape: tuple) -> np.ndarray:
    n, m = len(shape), x.ndim
    out = np.empty(shape)
    for i in np.ndindex(*shape):
        out[i] = x[tuple(i[k + n - m] * (x.shape[k] > 1) for k in range(m))]
    return out


case("broadcast_to",
     Case(inputs(normal(3, 1)), lambda x: at.broadcast_to(x, (2, 3, 4)), lambda x: _broadcast_formula(x, (2, 3, 4)),
          lambda x, y, g: (sum_to(g, x.shape),)))
case("sum_to",
     Case(inputs(normal(2, 3, 4)), lambda x: at.sum_to(x, (3, 1)),
          lambda x: x.sum(axis=(0, 2)).reshape(3, 1),  # leading axis 0, and axis 2 where the target has 1
          lambda x, y, g: (np.broadcast_to(g, x.shape),)),
     Case(inputs(normal(4, 3)), lambda x: at.sum_to(x, (3,)), lambda x: x.sum(axis=0),
          lambda x, y, g: (np.broadcast_to(g, x.shape),), label="sum_to drops leading axes"))


def _getitem_grad(g: np.ndarray, shape: tuple, idx: tuple) -> np.ndarray:
    d = np.zeros(shape)
    d[idx] = g
    return d


_IDX = (slice(1, 4), slice(None, None, -2), None, 0)
case("getitem",
     Case(inputs(normal(5, 6, 2)), lambda x: x[1:4, ::-2, None, 0], lambda x: x[_IDX],
          lambda x, y, g: (_getitem_grad(g, x.shape, _IDX),)))
_IDX2 = (slice(1, 4), slice(None, None, 2))
_ENC2 = (("s", 1, 4, None), ("s", None, None, 2))
case("getitem_grad",
     Case(inputs(normal(3, 3)), lambda g: apply("getitem_grad", g, shape=(5, 6), index=_ENC2),
          lambda g: _getitem_grad(g, (5, 6), _IDX2), lambda g, y, gd: (gd[_IDX2],)))


def _concat_formula(*xs: np.ndarray) -> np.ndarray:
    out = np.empty((xs[0].shape[0], sum(x.shape[1] for x in xs)))
    o = 0
    for x in xs:
        out[:, o:o + x.shape[1]] = x
        o += x.shape[1]
    return out


case("concat",
     Case(inputs(normal(2, 3), normal(2, 1), normal(2, 4)), lambda a, b, c: at.concat([a, b, c], axis=1),
          _concat_formula, lambda a, b, c, y, g: (g[:, 0:3], g[:, 3:4], g[:, 4:8])))


def _ids(b: B) -> at.Tensor:
    return b.ids((2, 3), [[0, 3, 3], [1, 0, 3]])  # repeated ids: their gradients must add up; row 2, 4 unused


def _scatter_add(ids: np.ndarray, g: np.ndarray, n: int) -> np.ndarray:
    return np.stack([g[ids == r].sum(axis=0) for r in range(n)])  # D[r] = sum over k with ids_k = r


case("embedding",
     Case(inputs(_ids, normal(5, 4)), lambda ids, w: at.embedding(ids, w), lambda ids, w: w[ids],
          lambda ids, w, y, g: (_scatter_add(ids, g, 5),)))
case("embedding_grad",
     Case(inputs(_ids, normal(2, 3, 4)), lambda ids, g: apply("embedding_grad", ids, g, num_embeddings=5),
          lambda ids, g: _scatter_add(ids, g, 5), lambda ids, g, y, gd: (gd[ids],)))

# --- binary arithmetic (always with broadcasting, so sum_to matters) --------------------------
_AB = inputs(normal(4, 3), normal(3))
_AB_COL = inputs(normal(4, 1), normal(2, 1, 3))
for _name, _fn, _da, _db in (
    ("add", np.add, lambda a, b, y, g: g, lambda a, b, y, g: g),
    ("sub", np.subtract, lambda a, b, y, g: g, lambda a, b, y, g: -g),
    ("mul", np.multiply, lambda a, b, y, g: g * b, lambda a, b, y, g: g * a),
):
    for _make in (_AB, _AB_COL):
        case(_name, Case(_make, lambda a, b, _n=_name: apply(_n, a, b), _fn,
                         lambda a, b, y, g, _da=_da, _db=_db: (sum_to(_da(a, b, y, g), a.shape),
                                                              sum_to(_db(a, b, y, g), b.shape))))
case("div", Case(inputs(normal(4, 3), positive(3)), lambda a, b: a / b, lambda a, b: a / b,
                 lambda a, b, y, g: (sum_to(g / b, a.shape), sum_to(-g * y / b, b.shape))))
case("pow",
     Case(inputs(positive(4, 3), normal(3)), lambda a, b: a ** b, lambda a, b: a ** b,
          lambda a, b, y, g: (sum_to(g * b * a ** (b - 1), a.shape), sum_to(g * y * np.log(a), b.shape))),
     Case(inputs(normal(4, 3)), lambda a: a ** 2, lambda a: a ** 2, lambda a, y, g: (g * 2 * a,),
          label="pow with a constant exponent"))


def _max_mask(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a > b) + 0.5 * (a == b)


case("maximum", Case(inputs(ties(4, 3), ties(3)), at.maximum, np.maximum,
                     lambda a, b, y, g: (sum_to(g * _max_mask(a, b), a.shape),
                                         sum_to(g * (1 - _max_mask(a, b)), b.shape))))
case("minimum", Case(inputs(ties(4, 3), ties(3)), at.minimum, np.minimum,
                     lambda a, b, y, g: (sum_to(g * _max_mask(b, a), a.shape),
                                         sum_to(g * (1 - _max_mask(b, a)), b.shape))))
for _name, _fn in (("greater", np.greater), ("equal", np.equal)):
    case(_name, Case(inputs(ties(4, 3), ties(3)), lambda a, b, _n=_name: apply(_n, a, b),
                     lambda a, b, _f=_fn: _f(a, b).astype(np.float64),
                     lambda a, b, y, g: (np.zeros_like(a), np.zeros_like(b))))
case("where", Case(inputs(given(lambda r: r.choice([0.0, 1.0, -2.5], (4, 3))), normal(4, 3), normal(3)), at.where,
                   lambda c, a, b: (c != 0) * a + (c == 0) * b,
                   lambda c, a, b, y, g: (np.zeros_like(c), sum_to((c != 0) * g, a.shape),
                                          sum_to((c == 0) * g, b.shape))))

# --- unary arithmetic ----------------------------------------------------------------------
_SQ2PI = math.sqrt(2 * math.pi)
case("neg", unary(np.negative, lambda x, y: -1.0, label="neg"))
case("exp", unary(np.exp, lambda x, y: y, label="exp"))
case("log", unary(np.log, lambda x, y: 1 / x, positive(3, 4), label="log"))
case("sqrt", unary(np.sqrt, lambda x, y: 1 / (2 * y), positive(3, 4), label="sqrt"))
case("abs", unary(np.abs, lambda x, y: np.sign(x), ties(3, 4), label="abs"))  # includes x = 0
case("erf", unary(_erf, lambda x, y: 2 / math.sqrt(math.pi) * np.exp(-x**2), label="erf"))
case("sign", unary(np.sign, lambda x, y: 0.0, ties(3, 4), label="sign"))

# --- activations ------------------------------------------------------------------------------
def _sigma(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def _phi_cdf(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1 + _erf(x / math.sqrt(2)))


_C = math.sqrt(2 / math.pi)


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return x / 2 * (1 + np.tanh(_C * (x + 0.044715 * x**3)))


def _gelu_tanh_d(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    t = np.tanh(_C * (x + 0.044715 * x**3))
    return (1 + t) / 2 + x / 2 * (1 - t**2) * _C * (1 + 3 * 0.044715 * x**2)


case("tanh", unary(lambda x: (np.exp(x) - np.exp(-x)) / (np.exp(x) + np.exp(-x)), lambda x, y: 1 - y**2,
                   label="tanh"))
case("sigmoid", unary(lambda x: 1 / (1 + np.exp(-x)), lambda x, y: y * (1 - y), label="sigmoid"))
case("relu", unary(lambda x: np.maximum(x, 0), lambda x, y: (x > 0) * 1.0, ties(3, 4), label="relu"))
case("gelu",
     unary(lambda x: x * _phi_cdf(x), lambda x, y: _phi_cdf(x) + x * np.exp(-x**2 / 2) / _SQ2PI, label="gelu"),
     Case(inputs(normal(3, 4)), lambda x: at.gelu(x, approximate="tanh"), _gelu_tanh,
          lambda x, y, g: (g * _gelu_tanh_d(x, y),), label="gelu approximate='tanh'"))
case("silu", unary(lambda x: x * _sigma(x), lambda x, y: _sigma(x) * (1 + x * (1 - _sigma(x))), label="silu"))
case("leaky_relu",
     unary(lambda x: x * (x > 0) + 0.01 * x * (x <= 0), lambda x, y: 0.01 + 0.99 * (x > 0), ties(3, 4),
           label="leaky_relu"),
     Case(inputs(ties(3, 4)), lambda x: at.leaky_relu(x, 0.2), lambda x: x * (x > 0) + 0.2 * x * (x <= 0),
          lambda x, y, g: (g * (0.2 + 0.8 * (x > 0)),), label="leaky_relu slope 0.2"))
case("softplus",
     unary(lambda x: np.log(1 + np.exp(x)), lambda x, y: _sigma(x), label="softplus"),
     Case(inputs(normal(3, 4)), lambda x: at.softplus(x, beta=2.0), lambda x: np.log(1 + np.exp(2 * x)) / 2,
          lambda x, y, g: (g * _sigma(2 * x),), label="softplus beta 2"))

# --- reductions -----------------------------------------------------------------------------------
for _keep in (False, True):
    case("sum", Case(inputs(normal(2, 3, 4)), lambda x, k=_keep: at.sum(x, axis=(0, 2), keepdims=k),
                     lambda x, k=_keep: np.add.reduce(np.add.reduce(x, 2, keepdims=k), 0, keepdims=k),
                     lambda x, y, g, k=_keep: (bcast(g, x, (0, 2), k),), label=f"sum keepdims={_keep}"))
    case("mean", Case(inputs(normal(2, 3, 4)), lambda x, k=_keep: at.mean(x, axis=1, keepdims=k),
                      lambda x, k=_keep: np.add.reduce(x, 1, keepdims=k) / 3,
                      lambda x, y, g, k=_keep: (bcast(g, x, (1,), k) / 3,), label=f"mean keepdims={_keep}"))
case("sum", Case(inputs(normal(2, 3)), lambda x: at.sum(x), lambda x: np.add.reduce(x.ravel()),
                 lambda x, y, g: (np.broadcast_to(g, x.shape),), label="sum of everything"))
case("mean", Case(inputs(normal(2, 3)), at.mean, lambda x: np.add.reduce(x.ravel()) / 6,
                  lambda x, y, g: (np.broadcast_to(g, x.shape) / 6,), label="mean of everything"))


def _max_vjp(x: np.ndarray, y: np.ndarray, g: np.ndarray, axis: tuple, keep: bool) -> tuple:
    w = (x == bcast(y, x, axis, keep)) * 1.0
    return (bcast(g, x, axis, keep) * w / bcast(np.sum(w, axis=axis, keepdims=keep), x, axis, keep),)


case("max",
     Case(inputs(ties(3, 5)), lambda x: at.max(x, axis=1), lambda x: np.maximum.reduce(x, axis=1),
          lambda x, y, g: _max_vjp(x, y, g, (1,), False), label="max with ties"),
     Case(inputs(ties(3, 5)), lambda x: at.max(x, axis=0, keepdims=True),
          lambda x: np.maximum.reduce(x, axis=0, keepdims=True),
          lambda x, y, g: _max_vjp(x, y, g, (0,), True), label="max keepdims with ties"))


def _var(x: np.ndarray, axis: int) -> np.ndarray:
    n = x.shape[axis]
    mu = np.add.reduce(x, axis, keepdims=True) / n
    return np.add.reduce((x - mu) ** 2, axis) / n  # divides by N: population variance


case("var", Case(inputs(normal(3, 5)), lambda x: at.var(x, axis=1), lambda x: _var(x, 1),
                 lambda x, y, g: (bcast(g, x, (1,), False) * 2 / 5 * (x - x.mean(1, keepdims=True)),)))
case("argmax",
     Case(inputs(ties(4, 5)), lambda x: at.argmax(x), lambda x: np.array([list(r).index(max(r)) for r in x]),
          NOT_DIFFERENTIABLE, label="argmax, first of ties"))

# --- linear algebra ---------------------------------------------------------------------------------
def _swap(t: np.ndarray) -> np.ndarray:
    return np.swapaxes(t, -1, -2)


case("matmul",
     Case(inputs(normal(2, 3, 4), normal(4, 5)), at.matmul, lambda a, b: np.einsum("bik,kj->bij", a, b),
          lambda a, b, y, g: (sum_to(g @ _swap(b), a.shape), sum_to(_swap(a) @ g, b.shape)),
          label="matmul, batch-broadcast weight"),
     Case(inputs(normal(4), normal(4, 5)), at.matmul, lambda a, b: np.einsum("k,kj->j", a, b),
          lambda a, b, y, g: ((g[None] @ b.T)[0], a[:, None] @ g[None]), label="matmul, 1-D row vector"))

# --- neural-network ops -------------------------------------------------------------------------------
def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


for _axis in (-1, 0):
    case("softmax", Case(inputs(normal(3, 4)), lambda x, a=_axis: at.softmax(x, axis=a),
                         lambda x, a=_axis: _softmax(x, a),
                         lambda x, y, g, a=_axis: (y * (g - (g * y).sum(a, keepdims=True)),),
                         label=f"softmax axis={_axis}"))
    case("log_softmax", Case(inputs(normal(3, 4)), lambda x, a=_axis: at.log_softmax(x, axis=a),
                             lambda x, a=_axis: x - x.max(a, keepdims=True)
                             - np.log(np.exp(x - x.max(a, keepdims=True)).sum(a, keepdims=True)),
                             lambda x, y, g, a=_axis: (g - np.exp(y) * g.sum(a, keepdims=True),),
                             label=f"log_softmax axis={_axis}"))


def _ln_parts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = x.shape[-1]
    mu = x.sum(-1, keepdims=True) / n
    var = ((x - mu) ** 2).sum(-1, keepdims=True) / n  # population variance
    return (x - mu) / np.sqrt(var + 1e-5), np.sqrt(var + 1e-5)


def _ln_vjp(x: np.ndarray, w: np.ndarray, b: np.ndarray, y: np.ndarray, g: np.ndarray) -> tuple:
    xhat, sd = _ln_parts(x)
    gh = g * w
    dx = (gh - gh.mean(-1, keepdims=True) - xhat * (gh * xhat).mean(-1, keepdims=True)) / sd
    return dx, sum_to(g * xhat, w.shape), sum_to(g, b.shape)


case("layer_norm",
     Case(inputs(normal(2, 3, 5), normal(5), normal(5)), at.layer_norm,
          lambda x, w, b: w * _ln_parts(x)[0] + b, _ln_vjp),
     Case(inputs(given(lambda r: np.ones((2, 4)) * 3.0), normal(4), normal(4)), at.layer_norm,
          lambda x, w, b: w * _ln_parts(x)[0] + b, _ln_vjp, label="layer_norm of a constant row is beta"))


def _mean(t: np.ndarray) -> np.ndarray:
    return t.mean(-1, keepdims=True)   # the bar of the texts: the mean over the last axis


def _ln_dx(g: np.ndarray, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    xhat, sd = _ln_parts(x)
    a = g * w
    return (a - _mean(a) - xhat * _mean(a * xhat)) / sd


def _ln_dx_vjp(g: np.ndarray, x: np.ndarray, w: np.ndarray, y: np.ndarray, yb: np.ndarray) -> tuple:
    xhat, sd = _ln_parts(x)
    r, a = 1.0 / sd, g * w
    ab = r * (yb - _mean(yb) - xhat * _mean(yb * xhat))
    xhb = -r * (_mean(a * xhat) * yb + a * _mean(yb * xhat))
    dx = r * (xhb - _mean(xhb) - xhat * _mean(xhb * xhat)) - r * _mean(yb * y) * xhat
    return ab * w, dx, sum_to(ab * g, w.shape)


case("layer_norm_dx",
     Case(inputs(normal(2, 3, 5), normal(2, 3, 5), normal(5)), lambda g, x, w: apply("layer_norm_dx", g, x, w),
          _ln_dx, _ln_dx_vjp))


# --- convolution and pooling (asgteach/ops/conv.py), written as plain loops over the formulas ---------
_S, _P, _D, _G = (2, 1), (1, 1), (1, 2), 2  # stride, padding, dilation, groups: every option in play
_CONV = {"stride": _S, "padding": _P, "dilation": _D, "groups": _G}


def _pad4(x: np.ndarray, p: tuple, value: float = 0.0) -> np.ndarray:
    return np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])), constant_values=value)


def _conv_taps(x_shape: tuple, w_shape: tuple):
    """Every (n, o, i, j, channel of x, c, a, b, row, col of x~) the conv formula sums over."""
    n_, _, h, wd = x_shape
    o_, cg, kh, kw = w_shape
    oh = (h + 2 * _P[0] - _D[0] * (kh - 1) - 1) // _S[0] + 1
    ow = (wd + 2 * _P[1] - _D[1] * (kw - 1) - 1) // _S[1] + 1
    for n, o, i, j, c, a, b in np.ndindex(n_, o_, oh, ow, cg, kh, kw):
        yield n, o, i, j, (o // (o_ // _G)) * cg + c, c, a, b, _S[0] * i + _D[0] * a, _S[1] * j + _D[1] * b


def _conv_out(x_shape: tuple, w_shape: tuple) -> tuple:
    taps = list(_conv_taps(x_shape, w_shape))
    return (x_shape[0], w_shape[0], max(t[2] for t in taps) + 1, max(t[3] for t in taps) + 1)


def conv_ref(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    xp, y = _pad4(x, _P), np.zeros(_conv_out(x.shape, w.shape))
    for n, o, i, j, cx, c, a, b, p, q in _conv_taps(x.shape, w.shape):
        y[n, o, i, j] += xp[n, cx, p, q] * w[o, c, a, b]
    return y


def conv_grad_input_ref(g: np.ndarray, w: np.ndarray, x_shape: tuple) -> np.ndarray:
    d = _pad4(np.zeros(x_shape), _P)
    for n, o, i, j, cx, c, a, b, p, q in _conv_taps(x_shape, w.shape):
        d[n, cx, p, q] += g[n, o, i, j] * w[o, c, a, b]
    return d[:, :, _P[0]:_P[0] + x_shape[2], _P[1]:_P[1] + x_shape[3]]


def conv_grad_weight_ref(x: np.ndarray, g: np.ndarray, w_shape: tuple) -> np.ndarray:
    xp, dw = _pad4(x, _P), np.zeros(w_shape)
    for n, o, i, j, cx, c, a, b, p, q in _conv_taps(x.shape, w_shape):
        dw[o, c, a, b] += g[n, o, i, j] * xp[n, cx, p, q]
    return dw


_XS, _WS = (2, 4, 5, 6), (6, 2, 3, 2)
_YS = _conv_out(_XS, _WS)
case("conv2d", Case(inputs(normal(*_XS), normal(*_WS)), lambda x, w: apply("conv2d", x, w, **_CONV), conv_ref,
                    lambda x, w, y, g: (conv_grad_input_ref(g, w, x.shape), conv_grad_weight_ref(x, g, w.shape))))
case("conv2d_grad_input", Case(
    inputs(normal(*_YS), normal(*_WS)), lambda g, w: apply("conv2d_grad_input", g, w, x_shape=_XS, **_CONV),
    lambda g, w: conv_grad_input_ref(g, w, _XS),
    lambda g, w, y, u: (conv_ref(u, w), conv_grad_weight_ref(u, g, w.shape))))
case("conv2d_grad_weight", Case(
    inputs(normal(*_XS), normal(*_YS)), lambda x, g: apply("conv2d_grad_weight", x, g, w_shape=_WS, **_CONV),
    lambda x, g: conv_grad_weight_ref(x, g, _WS),
    lambda x, g, y, u: (conv_grad_input_ref(g, u, x.shape), conv_ref(x, u))))

_K, _PS, _PP = (3, 2), (2, 1), (1, 1)  # overlapping windows, padding
_POOL = {"kernel_size": _K, "stride": _PS, "padding": _PP}


def _windows(x_shape: tuple):
    """Every output cell and the cells (a, b, row, col of x~) of its window, in row-major order."""
    n_, c_, h, w = x_shape
    oh, ow = (h + 2 * _PP[0] - _K[0]) // _PS[0] + 1, (w + 2 * _PP[1] - _K[1]) // _PS[1] + 1
    for n, c, i, j in np.ndindex(n_, c_, oh, ow):
        yield (n, c, i, j), [(_PS[0] * i + a, _PS[1] * j + b) for a in range(_K[0]) for b in range(_K[1])]


def _winner(xp: np.ndarray, n: int, c: int, cells: list) -> tuple:
    values = [xp[n, c, p, q] for p, q in cells]
    return cells[values.index(max(values))]  # the FIRST maximum of the window


def _pool_shape(x_shape: tuple) -> tuple:
    last = list(_windows(x_shape))[-1][0]
    return (x_shape[0], x_shape[1], last[2] + 1, last[3] + 1)


def max_pool_ref(x: np.ndarray) -> np.ndarray:
    xp, y = _pad4(x, _PP, -np.inf), np.zeros(_pool_shape(x.shape))
    for (n, c, i, j), cells in _windows(x.shape):
        y[n, c, i, j] = max(xp[n, c, p, q] for p, q in cells)
    return y


def _crop(d: np.ndarray, x_shape: tuple) -> np.ndarray:
    return d[:, :, _PP[0]:_PP[0] + x_shape[2], _PP[1]:_PP[1] + x_shape[3]]


def max_pool_grad_ref(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    xp = _pad4(x, _PP, -np.inf)
    d = np.zeros(xp.shape)
    for (n, c, i, j), cells in _windows(x.shape):
        p, q = _winner(xp, n, c, cells)
        d[n, c, p, q] += g[n, c, i, j]
    return _crop(d, x.shape)


def max_pool_gather_ref(x: np.ndarray, u: np.ndarray) -> np.ndarray:
    xp, up, y = _pad4(x, _PP, -np.inf), _pad4(u, _PP), np.zeros(_pool_shape(x.shape))
    for (n, c, i, j), cells in _windows(x.shape):
        p, q = _winner(xp, n, c, cells)
        y[n, c, i, j] = up[n, c, p, q]
    return y


def avg_pool_ref(x: np.ndarray) -> np.ndarray:
    xp, y = _pad4(x, _PP), np.zeros(_pool_shape(x.shape))
    for (n, c, i, j), cells in _windows(x.shape):
        y[n, c, i, j] = sum(xp[n, c, p, q] for p, q in cells) / (_K[0] * _K[1])  # zero padding counts
    return y


def avg_pool_grad_ref(g: np.ndarray, x_shape: tuple) -> np.ndarray:
    d = _pad4(np.zeros(x_shape), _PP)
    for (n, c, i, j), cells in _windows(x_shape):
        for p, q in cells:
            d[n, c, p, q] += g[n, c, i, j] / (_K[0] * _K[1])
    return _crop(d, x_shape)


_PX = (2, 3, 5, 4)
_PY = _pool_shape(_PX)
case("max_pool2d",
     Case(inputs(normal(*_PX)), lambda x: apply("max_pool2d", x, **_POOL), max_pool_ref,
          lambda x, y, g: (max_pool_grad_ref(x, g),)),
     Case(inputs(ties(*_PX)), lambda x: apply("max_pool2d", x, **_POOL), max_pool_ref,
          lambda x, y, g: (max_pool_grad_ref(x, g),), label="max_pool2d with ties: the first maximum wins"))
case("max_pool2d_grad", Case(inputs(ties(*_PX), normal(*_PY)), lambda x, g: apply("max_pool2d_grad", x, g, **_POOL),
                             max_pool_grad_ref, lambda x, g, y, u: (np.zeros_like(x), max_pool_gather_ref(x, u))))
case("max_pool2d_gather", Case(inputs(ties(*_PX), normal(*_PX)),
                               lambda x, u: apply("max_pool2d_gather", x, u, **_POOL), max_pool_gather_ref,
                               lambda x, u, y, g: (np.zeros_like(x), max_pool_grad_ref(x, g))))
case("avg_pool2d", Case(inputs(normal(*_PX)), lambda x: apply("avg_pool2d", x, **_POOL), avg_pool_ref,
                        lambda x, y, g: (avg_pool_grad_ref(g, x.shape),)))
case("avg_pool2d_grad", Case(inputs(normal(*_PY)), lambda g: apply("avg_pool2d_grad", g, x_shape=_PX, **_POOL),
                             lambda g: avg_pool_grad_ref(g, _PX), lambda g, y, u: (avg_pool_ref(u),)))

# --- gradient control: the identity forward, a wall backward (a zero-gradient op: its vjp text says 0) --------
case("stop_gradient", unary(lambda x: x, lambda x, y: 0.0, label="stop_gradient"))
