"""Basic layers: Linear, MLP, LayerNorm, Embedding, Dropout, FeedForward.

Each layer is a few graph ops. Reading ``forward`` tells you exactly which nodes the
layer adds — there is nothing else hidden in it.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from .. import ops
from ..graph import Supplied
from ..tensor import Tensor
from .module import Module

__all__ = ["Linear", "MLP", "LayerNorm", "Embedding", "Dropout", "FeedForward", "get_activation"]

def get_activation(name: str | Callable[[Tensor], Tensor] | None) -> Callable[[Tensor], Tensor]:
    """An activation function by name, or the function itself.

    A name is any registered op of category "activation" taking one tensor ("relu", "tanh",
    "gelu", a softsign you registered yourself) or a registered composite ("hardtanh",
    "gelu_tanh"): see ``asgteach.ops.activations()``.
    """
    if name is None:
        return lambda x: x
    if callable(name):
        return name
    return ops.activation(name)


def _init_for(activation: str | Callable | None) -> str:
    """The weight initialiser suited to an activation: what its spec says (Kaiming for relu-like ones), else Xavier."""
    if isinstance(activation, str):
        return ops.lookup(activation).tools.weight_init or "xavier_uniform"
    return "xavier_uniform"


class Linear(Module):
    """y = x @ W + b, with W of shape (in_features, out_features).

    W is stored (in, out) — not PyTorch's (out, in) — so the graph reads ``x @ W`` with no
    transpose node. Default init: Xavier-uniform weight, zero bias.
    """

    kind = "Linear"

    def __init__(self, in_features: int, out_features: int, bias: bool = True, name: str | None = None,
                 init: str = "xavier_uniform", **init_args: Any) -> None:
        super().__init__(name)
        self.in_features, self.out_features = in_features, out_features
        self.weight = self.param("weight", (in_features, out_features), init, **init_args)
        self.bias = self.param("bias", (out_features,), "zeros") if bias else None

    def forward(self, x: Tensor) -> Tensor:
        y = x @ self.weight
        return y + self.bias if self.bias is not None else y


class MLP(Module):
    """Linear layers with an activation between them: ``MLP([2, 8, 1], activation="tanh")``.

    No activation after the last layer (apply your own: sigmoid for a probability, nothing
    for logits). ``init`` defaults to Kaiming for relu-like activations, Xavier otherwise.
    """

    kind = "MLP"

    def __init__(self, sizes: Sequence[int], activation: str | Callable = "relu", name: str | None = None,
                 init: str | None = None, bias: bool = True) -> None:
        super().__init__(name)
        if len(sizes) < 2:
            raise ValueError(f"MLP needs at least an input and an output size, got {list(sizes)}")
        self.sizes = list(sizes)
        self.act_name = activation if isinstance(activation, str) else getattr(activation, "__name__", "custom")
        self.act = get_activation(activation)
        if init is None:
            init = _init_for(activation)
        self.layers = [
            self.child(str(i), Linear(a, b, bias=bias, name=f"{self.name}.{i}", init=init))
            for i, (a, b) in enumerate(zip(self.sizes[:-1], self.sizes[1:]))
        ]

    def forward(self, x: Tensor) -> Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = self.act(x)
        return x


class LayerNorm(Module):
    """Normalise the last axis, then scale by gamma (init ones) and shift by beta (init zeros)."""

    kind = "LayerNorm"

    def __init__(self, dim: int, eps: float = 1e-5, name: str | None = None) -> None:
        super().__init__(name)
        self.eps = eps
        self.weight = self.param("weight", (dim,), "ones")
        self.bias = self.param("bias", (dim,), "zeros")

    def forward(self, x: Tensor) -> Tensor:
        return ops.layer_norm(x, self.weight, self.bias, eps=self.eps)


class Embedding(Module):
    """A table of vectors, one row per id: ``Embedding(vocab, dim)(ids)``. Init N(0, 1) like PyTorch."""

    kind = "Embedding"

    def __init__(self, num_embeddings: int, dim: int, name: str | None = None, init: str = "normal",
                 **init_args: Any) -> None:
        super().__init__(name)
        self.weight = self.param("weight", (num_embeddings, dim), init, **init_args)

    def forward(self, ids: Tensor) -> Tensor:
        return ops.embedding(ids, self.weight)


class Dropout(Module):
    """Zero each element with probability p during training, scaling the rest by 1/(1-p).

    The random mask is an *input* of the graph (``<name>.mask``) that the Trainer fills
    with fresh, seeded random numbers every step, and with ones in evaluation — so the
    graph stays a pure function and the mask is visible in it.
    """

    kind = "Dropout"

    def __init__(self, p: float = 0.5, name: str | None = None) -> None:
        super().__init__(name)
        if not 0.0 <= p < 1.0:
            raise ValueError(f"Dropout probability must be in [0, 1), got {p}")
        self.p = p
        self._calls = 0

    def forward(self, x: Tensor) -> Tensor:
        if self.p == 0.0:
            return x
        role = "mask" if self._calls == 0 else f"mask{self._calls}"
        self._calls += 1
        mask = self.supplied_input(role, x.shape, Supplied("dropout_mask", p=self.p))
        return x * mask


class FeedForward(Module):
    """The transformer's position-wise MLP: Linear(d, hidden) -> activation -> Linear(hidden, d)."""

    kind = "FeedForward"

    def __init__(self, d_model: int, d_hidden: int, activation: str = "gelu", dropout: float = 0.0,
                 name: str | None = None) -> None:
        super().__init__(name)
        self.fc_in = self.child("fc_in", Linear(d_model, d_hidden, name=f"{self.name}.fc_in"))
        self.fc_out = self.child("fc_out", Linear(d_hidden, d_model, name=f"{self.name}.fc_out"))
        self.act = get_activation(activation)
        self.drop = self.child("drop", Dropout(dropout, name=f"{self.name}.drop")) if dropout else None

    def forward(self, x: Tensor) -> Tensor:
        y = self.fc_out(self.act(self.fc_in(x)))
        return self.drop(y) if self.drop is not None else y
