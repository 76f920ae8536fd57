"""Attention and the transformer block, built from registry ops you can click on.

Scaled dot-product attention for queries Q, keys K and values V (one head):

    scores = Q K^T / sqrt(d_head)          how well each query matches each key
    scores = scores + mask                 -1e9 where a query must not look (future, padding)
    weights = softmax(scores, axis=-1)     each query's attention sums to 1 over the keys
    out = weights V                        a weighted average of the values

Multi-head attention runs ``n_heads`` of these side by side on slices of d_model
(reshape to (B, T, H, d_head), transpose to (B, H, T, d_head)), then mixes them with an
output projection. The transformer block here is *pre-LN* (GPT-2 style):
``x + attn(ln1(x))`` then ``x + ffn(ln2(x))``.
"""

from __future__ import annotations

import math

import numpy as np

from .. import ops
from ..ops.leaves import constant
from ..tensor import Tensor
from .layers import Dropout, FeedForward, LayerNorm, Linear
from .module import Module

__all__ = [
    "MultiHeadAttention", "TransformerBlock", "SinusoidalPositionalEncoding", "LearnedPositionalEmbedding",
    "RotaryEmbedding", "causal_mask",
]

_NEG = -1e9  # "minus infinity" that stays finite: a fully masked row gives uniform weights, not NaN


def causal_mask(t: int) -> np.ndarray:
    """(t, t) additive mask: 0 on and below the diagonal, -1e9 above (no peeking at the future)."""
    return np.triu(np.full((t, t), _NEG), k=1)


class MultiHeadAttention(Module):
    """Multi-head self-attention over x of shape (batch, seq, d_model).

    ``causal=True`` masks future positions. ``padding_mask`` (an input of shape
    (batch, seq): 1 for real tokens, 0 for padding) hides padded keys.
    """

    kind = "MultiHeadAttention"

    def __init__(self, d_model: int, n_heads: int, causal: bool = False, dropout: float = 0.0,
                 rope: "RotaryEmbedding | None" = None, name: str | None = None) -> None:
        super().__init__(name)
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.d_model, self.n_heads, self.d_head, self.causal = d_model, n_heads, d_model // n_heads, causal
        for role in ("query", "key", "value", "output"):
            setattr(self, role, self.child(role, Linear(d_model, d_model, name=f"{self.name}.{role}")))
        for m in (self.query, self.key, self.value, self.output):
            m.kind = "Attention"  # the inspector explains q/k/v/o as attention roles
            for t in m._params.values():
                t.node.meta["layer_kind"] = "Attention"
                t.node.meta["role"] = f"{m.name.rsplit('.', 1)[-1]}.{t.node.meta['role']}"
        self.rope = rope
        self.drop = self.child("drop", Dropout(dropout, name=f"{self.name}.drop")) if dropout else None

    def _split(self, x: Tensor, b: int, t: int) -> Tensor:
        return ops.transpose(ops.reshape(x, (b, t, self.n_heads, self.d_head)), (0, 2, 1, 3))

    def forward(self, x: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"{self.name}: expected (batch, seq, {self.d_model}), got {x.shape}")
        b, t, _ = x.shape
        q = self._split(self.query(x), b, t)
        k = self._split(self.key(x), b, t)
        v = self._split(self.value(x), b, t)
        if self.rope is not None:
            q, k = self.rope(q), self.rope(k)
        scores = (q @ ops.transpose(k, (0, 1, 3, 2))) * (1.0 / math.sqrt(self.d_head))
        if self.causal:
            scores = scores + constant(causal_mask(t), name="causal mask")
        if padding_mask is not None:
            if padding_mask.shape != (b, t):
                raise ValueError(f"{self.name}: padding_mask must have shape {(b, t)}, got {padding_mask.shape}")
            scores = scores + (1.0 - ops.reshape(padding_mask, (b, 1, 1, t))) * _NEG
        weights = ops.softmax(scores, axis=-1)
        if self.drop is not None:
            weights = self.drop(weights)
        heads = weights @ v                                        # (b, h, t, d_head)
        merged = ops.reshape(ops.transpose(heads, (0, 2, 1, 3)), (b, t, self.d_model))
        return self.output(merged)


class TransformerBlock(Module):
    """Pre-LN transformer block: x + attn(ln1(x)), then x + ffn(ln2(x))."""

    kind = "TransformerBlock"

    def __init__(self, d_model: int, n_heads: int, d_hidden: int | None = None, causal: bool = True,
                 dropout: float = 0.0, activation: str = "gelu", rope: "RotaryEmbedding | None" = None,
                 name: str | None = None) -> None:
        super().__init__(name)
        self.ln1 = self.child("ln1", LayerNorm(d_model, name=f"{self.name}.ln1"))
        self.attn = self.child("attn", MultiHeadAttention(d_model, n_heads, causal=causal, dropout=dropout,
                                                          rope=rope, name=f"{self.name}.attn"))
        self.ln2 = self.child("ln2", LayerNorm(d_model, name=f"{self.name}.ln2"))
        self.ffn = self.child("ffn", FeedForward(d_model, d_hidden or 4 * d_model, activation=activation,
                                                 dropout=dropout, name=f"{self.name}.ffn"))

    def forward(self, x: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        x = x + self.attn(self.ln1(x), padding_mask=padding_mask)
        return x + self.ffn(self.ln2(x))


def sinusoidal_table(max_len: int, d_model: int) -> np.ndarray:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(...) (Vaswani et al., 2017)."""
    pos = np.arange(max_len)[:, None]
    freq = np.exp(-math.log(10000.0) * np.arange(0, d_model, 2) / d_model)
    table = np.zeros((max_len, d_model))
    table[:, 0::2] = np.sin(pos * freq)
    table[:, 1::2] = np.cos(pos * freq)[:, : d_model // 2]
    return table


class SinusoidalPositionalEncoding(Module):
    """Adds a fixed sin/cos position code (a constant: nothing to learn)."""

    kind = "SinusoidalPositionalEncoding"

    def __init__(self, d_model: int, max_len: int = 2048, name: str | None = None) -> None:
        super().__init__(name)
        self.table = sinusoidal_table(max_len, d_model)

    def forward(self, x: Tensor) -> Tensor:
        t = x.shape[-2]
        return x + constant(self.table[:t], name="positional code")


class LearnedPositionalEmbedding(Module):
    """Adds a learned vector per position (GPT-2): a (max_len, d_model) parameter, sliced to seq length."""

    kind = "LearnedPositionalEmbedding"

    def __init__(self, max_len: int, d_model: int, name: str | None = None) -> None:
        super().__init__(name)
        self.weight = self.param("weight", (max_len, d_model), "normal", std=0.02)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.weight[: x.shape[-2]]


class RotaryEmbedding(Module):
    """RoPE (Su et al., 2021): rotate pairs of query/key features by a position-dependent angle.

    Uses the "half split" pairing (feature i with i + d/2, as GPT-NeoX and LLaMA code do):
    ``rot(x) = concat(x1 cos - x2 sin, x1 sin + x2 cos)``. The dot product of a rotated
    query and key then depends only on their relative position.
    """

    kind = "RotaryEmbedding"

    def __init__(self, d_head: int, max_len: int = 2048, base: float = 10000.0, name: str | None = None) -> None:
        super().__init__(name)
        if d_head % 2:
            raise ValueError(f"RoPE needs an even head size, got {d_head}")
        inv = base ** (-np.arange(0, d_head // 2) * 2.0 / d_head)
        angles = np.arange(max_len)[:, None] * inv[None, :]
        self.cos, self.sin, self.half = np.cos(angles), np.sin(angles), d_head // 2

    def forward(self, x: Tensor) -> Tensor:
        t = x.shape[-2]
        cos, sin = constant(self.cos[:t], name="rope cos"), constant(self.sin[:t], name="rope sin")
        x1, x2 = x[..., : self.half], x[..., self.half:]
        return ops.concat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)
