"""The one sample builder: a small, ready-to-check graph around any registered op.

``asgteach check`` sweeps every op with it, and so do the tests (``tests/opcases.py`` adds
its broadcasting and axis variants on top, ``tests/explain_cases.py`` builds its inputs with
it). A sample's *output* node is the op, and its inputs sit at values chosen away from the
places where a derivative does not exist (relu and abs at 0, ties for max/maximum, log and
sqrt near 0): finite differences step across such points and disagree with any backward
rule, so a sample that sits on one would report a bug that is not there.

Where does a sample come from? The op says, in its spec: ``OpSpec(..., tools=Tools(sample=lambda b: ...))``
builds it from a :class:`SampleInputs` ``b``. An op that says nothing gets one derived from
its arity: one input of shape ``b.shape`` for a unary op, a broadcasting pair for a binary
op that broadcasts. So a student's new elementwise op is checked with no extra step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .graph import Graph
from .ops import leaves
from .ops.registry import REGISTRY, OpSpec, apply, spec
from .tensor import Tensor

__all__ = ["Sample", "SampleInputs", "sample", "build", "maker", "default_sample", "missing_samples"]


@dataclass
class Sample:
    """A built sample: ``y`` is the op's node, ``xs`` the float inputs to differentiate."""

    op: str
    graph: Graph
    y: Tensor
    xs: list[Tensor]
    feeds: dict[Tensor, np.ndarray] = field(repr=False)

    def feeds_as(self, dtype: Any) -> dict[Tensor, np.ndarray]:
        """The feeds with every float array cast to ``dtype`` (ints stay ints)."""
        return {k: (v.astype(dtype) if v.dtype.kind == "f" else v) for k, v in self.feeds.items()}


class SampleInputs:
    """Makes the leaves of one sample graph, with values you choose the range of.

    ``shape`` is the default shape of :meth:`x` (unary samples are written without one, so
    the tests can build them at several shapes). ``leaf`` is what the leaves are: "input"
    (fed, the default), "parameter" (fed too) or "constant" (stored in the graph).
    Every value is kept in ``values`` (a leaf -> its array); the fed ones also in ``feeds``.
    """

    def __init__(self, seed: int = 0, graph: Graph | None = None, shape: tuple = (2, 3),
                 leaf: str = "input") -> None:
        self.rng = np.random.default_rng(seed)
        self.graph = graph if graph is not None else Graph("sample")
        self.shape = tuple(shape)
        self.leaf = leaf
        self.xs: list[Tensor] = []
        self.feeds: dict[Tensor, np.ndarray] = {}
        self.values: dict[Tensor, np.ndarray] = {}

    def _leaf(self, value: np.ndarray, dtype: str) -> Tensor:
        k = len(self.values)
        if self.leaf == "constant":
            t = leaves.constant(value, graph=self.graph)
        elif self.leaf == "parameter" and dtype == "float":
            t = leaves.parameter(f"p{k}", value.shape, graph=self.graph)
        else:
            t = leaves.input(f"{'x' if dtype == 'float' else 'ids'}{k}", value.shape, dtype=dtype, graph=self.graph)
        self.values[t] = value
        if self.leaf != "constant":
            self.feeds[t] = value
        return t

    def x(self, shape: tuple | None = None, lo: float = -1.5, hi: float = 1.5, away: float = 0.0,
          value: Any = None, diff: bool = True) -> Tensor:
        """A float leaf: uniform in [lo, hi]; or |v| in [away, hi] with a random sign; or ``value``.

        ``diff=False`` leaves it out of the inputs a gradient check differentiates.
        """
        shape = self.shape if shape is None else tuple(shape)
        if value is None:
            if away:
                value = self.rng.choice([-1.0, 1.0], size=shape) * self.rng.uniform(away, hi, size=shape)
            else:
                value = self.rng.uniform(lo, hi, size=shape)
        t = self._leaf(np.asarray(value, dtype=np.float64).reshape(shape), "float")
        if diff:
            self.xs.append(t)
        return t

    def normal(self, shape: tuple | None = None, diff: bool = True) -> Tensor:
        """A float leaf of standard normal values."""
        shape = self.shape if shape is None else tuple(shape)
        return self.x(shape, value=self.rng.standard_normal(shape), diff=diff)

    def distinct(self, shape: tuple | None = None, gap: float = 0.25, diff: bool = True) -> Tensor:
        """A float leaf with no two values closer than 0.8 * ``gap``, in random order (no ties for max, pooling)."""
        shape = self.shape if shape is None else tuple(shape)
        n = int(np.prod(shape, dtype=np.int64))
        value = (self.rng.permutation(n) - n / 2) * gap + self.rng.uniform(0, 0.2 * gap, n)
        return self.x(shape, value=value, diff=diff)

    def pair(self, shape_a: tuple, shape_b: tuple) -> tuple[Tensor, Tensor]:
        """Two float leaves that differ by at least 0.15 everywhere (no ties for maximum, minimum, greater).

        a lives on the grid 0.5 k, b on the grid 0.5 k + 0.25, each with noise below 0.05.
        """
        a = 0.5 * self.rng.integers(-3, 4, size=shape_a) + self.rng.uniform(0, 0.05, size=shape_a)
        b = 0.5 * self.rng.integers(-3, 4, size=shape_b) + 0.25 + self.rng.uniform(0, 0.05, size=shape_b)
        return self.x(shape_a, value=a), self.x(shape_b, value=b)

    def ids(self, shape: tuple, value: Any) -> Tensor:
        """An integer leaf (row ids for embedding, a where-condition)."""
        return self._leaf(np.asarray(value, dtype=np.int64).reshape(shape), "int")


def default_sample(op: OpSpec) -> Callable[[SampleInputs], Tensor] | None:
    """The sample of an op that declares none, from its arity (None when it cannot be guessed).

    One input of the builder's shape for a unary op (values |x| >= 0.2: clear of a kink at 0);
    for a binary op, a pair that never ties, shaped (2, 3) and (3,) when the op broadcasts.
    """
    if op.arity == 1:
        return lambda b: apply(op.name, b.x(away=0.2))
    if op.arity == 2:
        return lambda b: apply(op.name, *b.pair(b.shape, b.shape[-1:] if op.view.broadcasts else b.shape))
    return None


def maker(op: str) -> Callable[[SampleInputs], Tensor]:
    """The function that builds op ``op``'s sample from a builder: the op's own, else the derived one."""
    s = spec(op)
    make = s.tools.sample or default_sample(s)
    if make is None:
        raise KeyError(f"op {op!r} has no sample and none can be derived for arity {s.arity}: register it with "
                       f"tools=Tools(sample=lambda b: ...) (see asgteach.opsamples.SampleInputs)")
    return make


def build(op: str, b: SampleInputs) -> Tensor:
    """Build op ``op``'s sample with the builder ``b`` (inside ``b.graph``); return its output."""
    with b.graph:
        y = maker(op)(b)
    if not isinstance(y, Tensor) or y.op != op:
        raise AssertionError(f"the sample of {op!r} builds {getattr(y, 'op', y)!r}, not a {op!r} node")
    return y


def sample(op: str, seed: int = 0, shape: tuple = (2, 3)) -> Sample:
    """Build the sample graph of ``op`` (a fresh graph each call; the values depend on ``seed``)."""
    b = SampleInputs(seed, Graph(f"sample {op}"), shape)
    y = build(op, b)
    return Sample(op, b.graph, y, b.xs, b.feeds)


def missing_samples() -> list[str]:
    """Registry ops (leaves aside) that neither declare a sample nor get one by default."""
    return sorted(name for name, s in REGISTRY.items()
                  if not s.leaf and s.tools.sample is None and default_sample(s) is None)
