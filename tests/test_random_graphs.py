"""Property-based: random small graphs of registry ops, autograd vs finite differences (float64).

Hypothesis draws the structure (which op, which operand, broadcastable shapes, axes,
keepdims, permutations, slices); a numpy generator seeded by hypothesis draws the values.
Every graph is checked by ``at.gradcheck`` in fast mode (random directions u^T J v), and
its inferred output shape against the shape the kernels really produce.

``derandomize=True`` makes the 500 examples the same on every run, so CI is deterministic.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import asgteach as at

MIN_OPS, MAX_OPS = 2, 6

UNARY = {
    "neg": at.neg, "exp": at.exp, "tanh": at.tanh, "sigmoid": at.sigmoid, "erf": at.erf, "gelu": at.gelu,
    "gelu_tanh": lambda t: at.gelu(t, approximate="tanh"), "silu": at.silu, "softplus": at.softplus,
    "relu": at.relu, "leaky_relu": lambda t: at.leaky_relu(t, 0.1), "abs": at.abs,
    "log": lambda t: at.log(t * t + 0.5), "sqrt": lambda t: at.sqrt(t * t + 0.5),
    "square": lambda t: t ** 2, "cube": lambda t: t ** 3,
}
BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (b * b + 0.5), "maximum": at.maximum, "minimum": at.minimum,
    "pow": lambda a, b: at.pow(a * a + 0.5, at.tanh(b)),
    "where": lambda a, b: at.where(a > 0.0, a, b),
}
KINDS = ["unary", "binary", "binary", "reduce", "matmul", "reshape", "transpose", "softmax", "layer_norm",
         "getitem", "concat", "broadcast_to"]


class _Build:
    def __init__(self, draw: Any, seed: int) -> None:
        self.draw = draw
        self.rng = np.random.default_rng(seed)
        self.graph = at.Graph("random")
        self.xs: list[at.Tensor] = []
        self.feeds: dict[at.Tensor, np.ndarray] = {}
        self.log: list[str] = []

    def new(self, shape: tuple) -> at.Tensor:
        t = at.input(f"x{len(self.xs)}", shape, graph=self.graph)
        self.xs.append(t)
        self.feeds[t] = self.rng.uniform(-1.0, 1.0, size=shape)
        return t

    def shape(self, min_rank: int = 0) -> tuple:
        rank = self.draw(st.integers(min_rank, 3))
        return tuple(self.draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank)))

    def partner_shape(self, s: tuple) -> tuple:
        """A shape that broadcasts with ``s``: drop leading axes, set some to 1, or add one in front."""
        how = self.draw(st.sampled_from(["same", "drop", "ones", "lead"]))
        if how == "drop":
            return s[self.draw(st.integers(0, len(s))):]
        if how == "ones":
            return tuple(1 if self.draw(st.booleans()) else d for d in s)
        if how == "lead" and len(s) < 3:
            return (self.draw(st.integers(1, 3)),) + tuple(1 if self.draw(st.booleans()) else d for d in s)
        return s


def _step(b: _Build, pool: list[at.Tensor]) -> at.Tensor:
    t = b.draw(st.sampled_from(pool))
    kind = b.draw(st.sampled_from(KINDS))
    nd = t.ndim
    if kind == "binary":
        name = b.draw(st.sampled_from(sorted(BINARY)))
        others = [p for p in pool if _broadcasts(p.shape, t.shape)]
        if others and b.draw(st.booleans()):
            o = b.draw(st.sampled_from(others))
        else:
            o = b.new(b.partner_shape(t.shape))
        a, c = (t, o) if b.draw(st.booleans()) else (o, t)
        b.log.append(f"{name}{a.shape}{c.shape}")
        return BINARY[name](a, c)
    if kind == "reduce":
        name = b.draw(st.sampled_from(["sum", "mean", "max", "var"]))
        keep = b.draw(st.booleans())
        if nd == 0 or b.draw(st.integers(0, 3)) == 0:
            axis: Any = None
        else:
            axes = b.draw(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True))
            axes = [a - nd if b.draw(st.booleans()) else a for a in axes]
            axis = axes[0] if len(axes) == 1 else tuple(axes)
        b.log.append(f"{name}{t.shape} axis={axis} keepdims={keep}")
        return getattr(at, name)(t, axis=axis, keepdims=keep)
    if kind == "matmul" and nd >= 1:
        d, k = t.shape[-1], b.draw(st.integers(1, 3))
        form = b.draw(st.sampled_from(["matrix", "vector", "batched", "left"]))
        batch = (2,) if nd <= 2 else (1,) * (nd - 2)  # (3, 2, 2) @ (2, d, k) would not broadcast
        shape = {"matrix": (d, k), "vector": (d,), "batched": batch + (d, k), "left": None}[form]
        if shape is None:  # w @ t with t's first-of-last-two axis as the inner one
            inner = t.shape[-2] if nd >= 2 else t.shape[0]
            w = b.new((k, inner))
            b.log.append(f"matmul{w.shape}{t.shape}")
            return w @ t
        w = b.new(shape)
        b.log.append(f"matmul{t.shape}{w.shape}")
        return t @ w
    if kind == "reshape" and nd >= 1:
        n = t.size
        shape = b.draw(st.sampled_from([(n,), (1, n), (n, 1), t.shape[::-1], (-1,)]))
        b.log.append(f"reshape{t.shape}->{shape}")
        out = at.reshape(t, shape)
        return out if out is not t else at.reshape(t, (1,) + t.shape)
    if kind == "transpose" and nd >= 2:
        perm = tuple(b.draw(st.permutations(range(nd))))
        b.log.append(f"transpose{t.shape}{perm}")
        return at.transpose(t, perm)
    if kind == "softmax" and nd >= 1:
        axis = b.draw(st.integers(-nd, nd - 1))
        fn = b.draw(st.sampled_from(["softmax", "log_softmax"]))
        b.log.append(f"{fn}{t.shape} axis={axis}")
        return getattr(at, fn)(t, axis=axis)
    if kind == "layer_norm" and nd >= 1 and t.shape[-1] >= 2:
        d = t.shape[-1]
        b.log.append(f"layer_norm{t.shape}")
        return at.layer_norm(t, b.new((d,)), b.new((d,)))
    if kind == "getitem" and nd >= 1:
        n0 = t.shape[0]
        options = [slice(None, None, -1), slice(None, None, 2), 0, -1, (Ellipsis, 0), (None, slice(None))]
        if n0 > 1:
            options += [slice(1, None), slice(-1, 0, -1)]
        index = b.draw(st.sampled_from(options))
        b.log.append(f"getitem{t.shape}[{index}]")
        return t[index]
    if kind == "concat" and nd >= 1:
        axis = b.draw(st.integers(0, nd - 1))
        shape = tuple(b.draw(st.integers(1, 2)) if i == axis else d for i, d in enumerate(t.shape))
        other = t * 2.0 if b.draw(st.booleans()) else b.new(shape)
        b.log.append(f"concat({t.shape},{other.shape}) axis={axis}")
        return at.concat([t, other], axis=axis)
    if kind == "broadcast_to" and nd <= 2:
        b.log.append(f"broadcast_to{t.shape}")
        return at.broadcast_to(t, (2,) + t.shape)
    name = b.draw(st.sampled_from(sorted(UNARY)))
    b.log.append(f"{name}{t.shape}")
    return UNARY[name](t)


def _broadcasts(a: tuple, b: tuple) -> bool:
    try:
        np.broadcast_shapes(a, b)
        return True
    except ValueError:
        return False


@st.composite
def random_graphs(draw: Any) -> _Build:
    b = _Build(draw, draw(st.integers(0, 2**32 - 1)))
    with b.graph:
        pool = [b.new(b.shape())]
        for _ in range(draw(st.integers(MIN_OPS, MAX_OPS))):
            pool.append(_step(b, pool))
        b.out = pool[-1]
    return b


@settings(max_examples=500, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(random_graphs())
def test_random_graphs_autograd_matches_finite_differences(b: _Build) -> None:
    out = b.out
    value = at.run(out, b.feeds)
    assert value.shape == out.shape, f"inferred {out.shape}, kernels made {value.shape}: {b.log}"
    assert value.dtype == np.float64
    rep = at.gradcheck(out, b.xs, b.feeds, fast=True, n_directions=2)
    assert rep.ok, f"{b.log}\n{rep.summary()}"
