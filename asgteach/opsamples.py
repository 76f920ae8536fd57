"""One small, ready-to-check graph per registry op: what ``asgteach check`` sweeps over.

Each entry of :data:`SAMPLES` builds a fresh graph whose *output* node is that op, with
inputs at values chosen away from the places where a derivative does not exist (relu and
abs at 0, ties for max/maximum, log and sqrt near 0). Finite differences step across such
points and disagree with any backward rule, so a sample that sits on one would report a
bug that is not there.

The test suite has a richer set (``tests/opcases.py``: broadcasting shapes, every axis
variant); this module is the small one the installed package carries, so that a student
can run ``asgteach check`` on a machine without the tests. ``tests/test_cli.py`` checks
that every op in the registry has a sample here: add one when you add an op.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from . import ops
from .graph import Graph
from .ops import leaves
from .ops import registry as _registry
from .tensor import Tensor

__all__ = ["Sample", "SAMPLES", "sample", "missing_samples"]


@dataclass
class Sample:
    """A built sample: ``y`` is the op's node, ``xs`` the float inputs to differentiate."""

    op: str
    graph: Graph
    y: Tensor
    xs: list[Tensor]
    feeds: dict[Tensor, np.ndarray] = field(repr=False)


class _Inputs:
    """Makes named inputs with controlled values inside the sample's graph."""

    def __init__(self, graph: Graph, seed: int) -> None:
        self.graph, self.rng = graph, np.random.default_rng(seed)
        self.xs: list[Tensor] = []
        self.feeds: dict[Tensor, np.ndarray] = {}

    def x(self, shape: tuple, lo: float = -1.5, hi: float = 1.5, away: float = 0.0, value: Any = None,
          diff: bool = True) -> Tensor:
        """A float input: uniform in [lo, hi], or |v| in [away, hi] with a random sign, or ``value``."""
        if value is None:
            if away:
                value = self.rng.choice([-1.0, 1.0], size=shape) * self.rng.uniform(away, hi, size=shape)
            else:
                value = self.rng.uniform(lo, hi, size=shape)
        t = leaves.input(f"x{len(self.feeds)}", shape, graph=self.graph)
        self.feeds[t] = np.asarray(value, dtype=np.float64).reshape(shape)
        if diff:
            self.xs.append(t)
        return t

    def distinct(self, shape: tuple, diff: bool = True) -> Tensor:
        """A float input with no two values closer than 0.2 (no ties for max and pooling)."""
        n = int(np.prod(shape, dtype=np.int64))
        return self.x(shape, value=(self.rng.permutation(n) - n / 2) * 0.2, diff=diff)

    def pair(self, shape_a: tuple, shape_b: tuple) -> tuple[Tensor, Tensor]:
        """Two inputs that differ by at least 0.2 everywhere (no ties for maximum/minimum/greater)."""
        a = 0.5 * self.rng.integers(-3, 4, size=shape_a) + self.rng.uniform(0, 0.05, size=shape_a)
        b = 0.5 * self.rng.integers(-3, 4, size=shape_b) + 0.25 + self.rng.uniform(0, 0.05, size=shape_b)
        return self.x(shape_a, value=a), self.x(shape_b, value=b)

    def ids(self, shape: tuple, value: Any) -> Tensor:
        t = leaves.input(f"ids{len(self.feeds)}", shape, dtype="int", graph=self.graph)
        self.feeds[t] = np.asarray(value, dtype=np.int64).reshape(shape)
        return t


def _op(name: str, *args: Any, **attrs: Any) -> Tensor:
    """Ops with no public function (gradient ops) are built from the registry directly, with full attrs."""
    return _registry.apply(name, *args, **attrs)


_POOL3 = {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1)}
_CONV = {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 1), "groups": 1}

#: op name -> how to build its sample from an :class:`_Inputs`. Public functions (``ops.softmax``) where they
#: exist: they normalise arguments (negative axes, int kernel sizes) the way a user's call does.
SAMPLES: dict[str, Callable[[_Inputs], Tensor]] = {
    # shape and layout
    "reshape": lambda b: ops.reshape(b.x((2, 3)), (3, 2)),
    "transpose": lambda b: ops.transpose(b.x((2, 3, 4)), (1, 2, 0)),
    "broadcast_to": lambda b: ops.broadcast_to(b.x((3,)), (2, 3)),
    "sum_to": lambda b: ops.sum_to(b.x((2, 4, 3)), (4, 1)),
    "getitem": lambda b: b.x((4, 5))[1:3, ::2],
    "getitem_grad": lambda b: _op("getitem_grad", b.x((2, 3)), shape=(4, 5),
                                  index=(("s", 1, 3, None), ("s", None, None, 2))),
    "concat": lambda b: ops.concat([b.x((2, 3)), b.x((1, 3))], axis=0),
    # arithmetic, with broadcasting: (2, 3) against (3,)
    "add": lambda b: b.x((2, 3)) + b.x((3,)),
    "sub": lambda b: b.x((2, 3)) - b.x((3,)),
    "mul": lambda b: b.x((2, 3)) * b.x((3,)),
    "div": lambda b: b.x((2, 3)) / b.x((3,), away=0.5),
    "pow": lambda b: _op("pow", b.x((2, 3), lo=0.5, hi=2.0), b.x((3,))),
    "maximum": lambda b: _op("maximum", *b.pair((2, 3), (3,))),
    "minimum": lambda b: _op("minimum", *b.pair((2, 3), (3,))),
    "greater": lambda b: _op("greater", *b.pair((2, 3), (3,))),
    "equal": lambda b: _op("equal", b.x((3,), value=[1.0, 2.0, 3.0]), b.x((3,), value=[1.0, 0.5, 3.0])),
    "where": lambda b: _op("where", b.ids((2, 3), [[1, 0, 1], [0, 0, 1]]), b.x((2, 3)), b.x((3,))),
    # unary elementwise
    "neg": lambda b: _op("neg", b.x((2, 3))),
    "exp": lambda b: _op("exp", b.x((2, 3))),
    "log": lambda b: _op("log", b.x((2, 3), lo=0.3, hi=3.0)),
    "sqrt": lambda b: _op("sqrt", b.x((2, 3), lo=0.3, hi=3.0)),
    "abs": lambda b: _op("abs", b.x((2, 3), away=0.2)),
    "erf": lambda b: _op("erf", b.x((2, 3))),
    "tanh": lambda b: _op("tanh", b.x((2, 3))),
    "sigmoid": lambda b: _op("sigmoid", b.x((2, 3), lo=-4.0, hi=4.0)),
    "relu": lambda b: _op("relu", b.x((2, 3), away=0.2)),
    "gelu": lambda b: _op("gelu", b.x((2, 3), lo=-3.0, hi=3.0)),
    "silu": lambda b: _op("silu", b.x((2, 3), lo=-3.0, hi=3.0)),
    "leaky_relu": lambda b: _op("leaky_relu", b.x((2, 3), away=0.2), negative_slope=0.2),
    "softplus": lambda b: _op("softplus", b.x((2, 3), lo=-3.0, hi=3.0)),
    "sign": lambda b: _op("sign", b.x((2, 3), away=0.2)),
    # reductions
    "sum": lambda b: ops.sum(b.x((2, 3, 4)), axis=1),
    "mean": lambda b: ops.mean(b.x((2, 3, 4)), axis=(0, 2), keepdims=True),
    "max": lambda b: ops.max(b.distinct((2, 3, 4)), axis=1),
    "var": lambda b: ops.var(b.x((2, 3, 4)), axis=-1),
    "argmax": lambda b: ops.argmax(b.distinct((3, 4)), axis=-1),
    # linear algebra and normalisation
    "matmul": lambda b: b.x((2, 2, 3)) @ b.x((3, 4)),
    "softmax": lambda b: ops.softmax(b.x((2, 4), lo=-3.0, hi=3.0), axis=-1),
    "log_softmax": lambda b: ops.log_softmax(b.x((2, 3, 4), lo=-3.0, hi=3.0), axis=1),
    "layer_norm": lambda b: ops.layer_norm(b.x((2, 4)), b.x((4,)), b.x((4,))),
    # lookups
    "embedding": lambda b: ops.embedding(b.ids((2, 3), [[0, 2, 0], [4, 2, 2]]), b.x((5, 3))),
    "embedding_grad": lambda b: _op("embedding_grad", b.ids((2, 3), [[0, 2, 0], [4, 2, 2]]), b.x((2, 3, 2)),
                                    num_embeddings=5),
    # convolution and pooling (NCHW)
    "conv2d": lambda b: ops.conv2d(b.x((1, 2, 5, 5)), b.x((3, 2, 3, 3)), padding=1),
    "conv2d_grad_input": lambda b: _op("conv2d_grad_input", b.x((2, 3, 3, 3)), b.x((3, 2, 3, 3)),
                                       x_shape=(2, 2, 5, 5), **_CONV),
    "conv2d_grad_weight": lambda b: _op("conv2d_grad_weight", b.x((2, 2, 5, 5)), b.x((2, 3, 3, 3)),
                                        w_shape=(3, 2, 3, 3), **_CONV),
    "max_pool2d": lambda b: ops.max_pool2d(b.distinct((1, 2, 4, 4)), 2),
    "max_pool2d_grad": lambda b: _op("max_pool2d_grad", b.distinct((1, 2, 5, 5), diff=False), b.x((1, 2, 3, 3)),
                                     **_POOL3),
    "max_pool2d_gather": lambda b: _op("max_pool2d_gather", b.distinct((1, 2, 5, 5), diff=False),
                                       b.x((1, 2, 5, 5)), **_POOL3),
    "avg_pool2d": lambda b: ops.avg_pool2d(b.x((1, 2, 4, 4)), 2),
    "avg_pool2d_grad": lambda b: _op("avg_pool2d_grad", b.x((1, 2, 3, 3)), x_shape=(1, 2, 5, 5), **_POOL3),
}


def sample(op: str, seed: int = 0) -> Sample:
    """Build the sample graph of ``op`` (a fresh graph each call; the values depend on ``seed``)."""
    if op not in SAMPLES:
        raise KeyError(f"no sample for op {op!r} in asgteach/opsamples.py; add one to SAMPLES")
    graph = Graph(f"sample {op}")
    b = _Inputs(graph, seed)
    with graph:
        y = SAMPLES[op](b)
    if y.op != op:
        raise AssertionError(f"the sample for {op!r} builds a {y.op!r} node instead")
    return Sample(op, graph, y, b.xs, b.feeds)


def missing_samples() -> list[str]:
    """Registry ops (leaves aside) that have no sample here."""
    return sorted(name for name, s in _registry.REGISTRY.items() if not s.leaf and name not in SAMPLES)
