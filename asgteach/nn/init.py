"""Initialisers: where a parameter's first values come from.

A parameter node only *names* its initialiser (``node.meta["init"]``); the numbers are
drawn when a Trainer (or you, with :func:`initial_values`) asks for them, from a seeded
generator so runs repeat exactly.

Why not just small random numbers? Each layer multiplies by its weight matrix; if the
weights are too large the activations explode layer after layer, too small and they
vanish. Xavier/Glorot (for tanh/sigmoid) and Kaiming/He (for relu) pick the spread from
the layer's fan-in/fan-out so the variance of the signal stays about constant.

Shapes follow asgteach's conventions: a Linear weight is (in, out) because layers
compute ``x @ w``; a Conv2d kernel is (out_channels, in_channels/groups, kh, kw).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from ..graph import Graph, Node
from ..tensor import Tensor

__all__ = [
    "fans", "zeros", "ones", "normal", "uniform", "xavier_uniform", "xavier_normal", "glorot_uniform",
    "glorot_normal", "kaiming_uniform", "kaiming_normal", "INITIALISERS", "initial_values", "init_value",
]


def fans(shape: tuple[int, ...]) -> tuple[int, int]:
    """(fan_in, fan_out): how many inputs feed one output, and how many outputs one input feeds."""
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]  # (in, out) for x @ w
    receptive = int(np.prod(shape[2:]))
    return shape[1] * receptive, shape[0] * receptive  # conv kernels: (out, in, kh, kw)


def zeros(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """All zeros (biases, LayerNorm beta)."""
    return np.zeros(shape)


def ones(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """All ones (LayerNorm gamma: start as the identity scale)."""
    return np.ones(shape)


def normal(shape: tuple[int, ...], rng: np.random.Generator, mean: float = 0.0, std: float = 1.0) -> np.ndarray:
    """N(mean, std^2) (embeddings often use std=0.02)."""
    return rng.normal(mean, std, shape)


def uniform(shape: tuple[int, ...], rng: np.random.Generator, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """U(low, high) (PyTorch's nn.init.uniform_ default range)."""
    return rng.uniform(low, high, shape)


def xavier_uniform(shape: tuple[int, ...], rng: np.random.Generator, gain: float = 1.0) -> np.ndarray:
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio, 2010)."""
    fan_in, fan_out = fans(shape)
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-a, a, shape)


def xavier_normal(shape: tuple[int, ...], rng: np.random.Generator, gain: float = 1.0) -> np.ndarray:
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = fans(shape)
    return rng.normal(0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), shape)


def kaiming_uniform(shape: tuple[int, ...], rng: np.random.Generator, a: float = 0.0,
                    mode: str = "fan_in") -> np.ndarray:
    """U(-b, b) with b = gain * sqrt(3 / fan), gain = sqrt(2 / (1 + a^2)) (He et al., 2015, for relu)."""
    fan = fans(shape)[0 if mode == "fan_in" else 1]
    bound = math.sqrt(2.0 / (1 + a * a)) * math.sqrt(3.0 / fan)
    return rng.uniform(-bound, bound, shape)


def kaiming_normal(shape: tuple[int, ...], rng: np.random.Generator, a: float = 0.0,
                   mode: str = "fan_in") -> np.ndarray:
    """N(0, std^2) with std = sqrt(2 / (1 + a^2)) / sqrt(fan)."""
    fan = fans(shape)[0 if mode == "fan_in" else 1]
    return rng.normal(0.0, math.sqrt(2.0 / (1 + a * a)) / math.sqrt(fan), shape)


glorot_uniform = xavier_uniform
glorot_normal = xavier_normal

#: name -> initialiser; the names a parameter's ``init`` metadata may hold.
INITIALISERS: dict[str, Callable[..., np.ndarray]] = {
    "zeros": zeros, "ones": ones, "normal": normal, "uniform": uniform,
    "xavier_uniform": xavier_uniform, "xavier_normal": xavier_normal,
    "glorot_uniform": glorot_uniform, "glorot_normal": glorot_normal,
    "kaiming_uniform": kaiming_uniform, "kaiming_normal": kaiming_normal,
}


def init_value(node: Node, rng: np.random.Generator) -> np.ndarray:
    """Draw the first value of one parameter node from its ``init`` metadata (float64)."""
    name = node.meta.get("init", "xavier_uniform")
    try:
        fn = INITIALISERS[name]
    except KeyError:
        raise ValueError(f"parameter {node.name!r}: unknown init {name!r}; known: {', '.join(INITIALISERS)}") from None
    return np.asarray(fn(node.shape, rng, **(node.meta.get("init_args") or {})), dtype=np.float64)


def initial_values(params: Graph | list[Tensor], seed: int = 0,
                   overrides: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
    """{name: first value} for every parameter (of a graph, or a list of parameter Tensors).

    Parameters are drawn in node order from one generator seeded with ``seed``, so the
    same graph and seed always give the same numbers.
    """
    nodes = params.parameters() if isinstance(params, Graph) else [p.node for p in params]
    rng = np.random.default_rng(seed)
    out = {n.name: init_value(n, rng) for n in nodes}
    for k, v in (overrides or {}).items():
        out[k] = np.asarray(v, dtype=np.float64)
    return out
