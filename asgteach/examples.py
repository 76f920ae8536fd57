"""Worked training examples, from XOR to a character-level transformer block.

Each function builds its graph, trains it with a :class:`~asgteach.Trainer` and returns
an :class:`ExampleResult`. The lessons, ``bench/train_examples.py`` and the tests all
call these same functions (the tests with small budgets).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import nn, ops
from .graph import Graph
from .nn.trainer import Trainer

__all__ = ["ExampleResult", "xor", "linear_regression", "digits", "char_transformer"]


@dataclass
class ExampleResult:
    """What an example produced: the loss history, a headline metric, and the trainer."""

    name: str
    history: list[float]
    metrics: dict[str, float]
    trainer: Trainer = field(repr=False)
    graph: Graph = field(repr=False)
    extra: dict[str, Any] = field(default_factory=dict, repr=False)


def xor(steps: int = 500, seed: int = 0, backend: str = "numpy", progress: bool = False) -> ExampleResult:
    """The classic: XOR is not linearly separable, so it needs a hidden layer (2-8-1, tanh)."""
    X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=np.float64)
    T = np.array([[0], [1], [1], [0]], dtype=np.float64)
    with Graph("xor") as g:
        x, t = ops.input("x", (4, 2)), ops.input("t", (4, 1))
        net = nn.MLP([2, 8, 1], activation="tanh", name="mlp")
        pred = ops.sigmoid(net(x))
        loss = nn.mse_loss(pred, t)
    tr = Trainer(loss, optimizer=nn.optim.Adam(lr=0.05), backend=backend, seed=seed)
    history = tr.fit({x: X, t: T}, steps=steps, progress=progress)
    (p,) = tr.run([pred], {x: X})
    acc = float(np.mean((p > 0.5) == (T > 0.5)))
    return ExampleResult("xor", history, {"final_loss": history[-1], "accuracy": acc}, tr, g)


def linear_regression(steps: int = 200, seed: int = 0, backend: str = "numpy",
                      progress: bool = False) -> ExampleResult:
    """Fit y = X w + b + noise with one Linear layer and SGD; the learned w approaches the true one."""
    rng = np.random.default_rng(seed)
    true_w = np.array([[2.0], [-3.0], [0.5]])
    X = rng.standard_normal((64, 3))
    Y = X @ true_w + 1.0 + 0.01 * rng.standard_normal((64, 1))
    with Graph("linear regression") as g:
        x, y = ops.input("x", (64, 3)), ops.input("y", (64, 1))
        lin = nn.Linear(3, 1, name="lin")
        loss = nn.mse_loss(lin(x), y)
    tr = Trainer(loss, optimizer=nn.optim.SGD(lr=0.1), backend=backend, seed=seed)
    history = tr.fit({x: X, y: Y}, steps=steps, progress=progress)
    w_err = float(np.abs(tr.params["lin.weight"] - true_w).max())
    return ExampleResult("linear_regression", history, {"final_loss": history[-1], "weight_error": w_err}, tr, g)


def digits(epochs: int = 30, batch_size: int = 64, seed: int = 0, backend: str = "numpy",
           progress: bool = False) -> ExampleResult:
    """The 8x8 handwritten digits (UCI), an MLP 64-64-10 with softmax cross-entropy and Adam."""
    from .datasets import load_digits, train_test_split

    X, y = load_digits()
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_fraction=0.25, seed=seed)
    with Graph("digits") as g:
        x, t = ops.input("x", (batch_size, 64)), ops.input("labels", (batch_size,), dtype="int")
        net = nn.MLP([64, 64, 10], activation="relu", name="mlp")
        loss = nn.cross_entropy(net(x), t)
        x_all = ops.input("x_test", (len(X_test), 64))
        predicted = ops.argmax(net(x_all), axis=-1)
    tr = Trainer(loss, optimizer=nn.optim.Adam(lr=0.01), backend=backend, seed=seed)
    loader = nn.DataLoader(nn.Dataset({x: X_train, t: y_train}), batch_size=batch_size, shuffle=True, seed=seed)
    history = tr.fit(loader, epochs=epochs, progress=progress)
    (pred,) = tr.run([predicted], {x_all: X_test})
    acc = float(np.mean(pred == y_test))
    return ExampleResult("digits", history, {"final_loss": history[-1], "test_accuracy": acc}, tr, g)


def char_transformer(steps: int = 300, seq_len: int = 32, batch_size: int = 16, d_model: int = 32,
                     n_heads: int = 2, seed: int = 0, backend: str = "numpy", progress: bool = False) -> ExampleResult:
    """A one-block character-level transformer predicting the next character of a public-domain text."""
    from .datasets import load_text

    text = load_text()
    vocab = sorted(set(text))
    ids = np.array([vocab.index(ch) for ch in text], dtype=np.int64)
    rng = np.random.default_rng(seed)
    with Graph("char transformer") as g:
        tokens = ops.input("tokens", (batch_size, seq_len), dtype="int")
        targets = ops.input("targets", (batch_size, seq_len), dtype="int")
        emb = nn.Embedding(len(vocab), d_model, name="embed", std=0.1)
        pos = nn.LearnedPositionalEmbedding(seq_len, d_model, name="pos")
        block = nn.TransformerBlock(d_model, n_heads, causal=True, name="block")
        ln = nn.LayerNorm(d_model, name="ln_f")
        head = nn.Linear(d_model, len(vocab), name="head")
        logits = head(ln(block(pos(emb(tokens)))))
        loss = nn.cross_entropy(logits, targets)
    tr = Trainer(loss, optimizer=nn.optim.Adam(lr=3e-3), backend=backend, seed=seed)

    def batches() -> Any:
        while True:
            starts = rng.integers(0, len(ids) - seq_len - 1, batch_size)
            window = np.stack([ids[s: s + seq_len + 1] for s in starts])
            yield {tokens: window[:, :-1], targets: window[:, 1:]}

    history = tr.fit(batches(), steps=steps, progress=progress)
    first = float(np.mean(history[:10]))
    last = float(np.mean(history[-10:]))
    return ExampleResult("char_transformer", history,
                         {"first_loss": first, "final_loss": last, "uniform_loss": float(np.log(len(vocab)))},
                         tr, g, {"vocab": vocab, "nodes": len(g.nodes)})
