"""Loss functions, written as graph ops (so their gradients are graphs too).

Names, arguments and defaults follow ``torch.nn.functional``. ``reduction`` is "mean"
(default), "sum" or "none".

Numerical care is part of the lesson:
* ``cross_entropy`` takes *logits* and uses ``log_softmax`` — never log(softmax(x)), which
  turns a tiny probability into log(0) = -inf;
* ``binary_cross_entropy_with_logits`` uses ``softplus(x) - x t``, equal to
  ``-(t log s + (1-t) log(1-s))`` with s = sigmoid(x), but it never evaluates log(0).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import ops
from ..ops.leaves import constant
from ..tensor import Tensor

__all__ = [
    "mse_loss", "l1_loss", "huber_loss", "cross_entropy", "nll_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "kl_div", "one_hot",
]


def _reduce(x: Tensor, reduction: str, name: str) -> Tensor:
    if reduction == "mean":
        return ops.mean(x)
    if reduction == "sum":
        return ops.sum(x)
    if reduction == "none":
        return x
    raise ValueError(f"{name}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _check(name: str, pred: Tensor, target: Tensor) -> None:
    if pred.shape != target.shape:
        raise ValueError(f"{name}: prediction {pred.shape} and target {target.shape} must have the same shape "
                         f"(broadcasting them would silently compare the wrong pairs)")


def mse_loss(pred: Tensor, target: Any, reduction: str = "mean") -> Tensor:
    """Mean squared error: mean((pred - target)^2)."""
    target = ops.as_tensor(target)
    _check("mse_loss", pred, target)
    d = pred - target
    return _reduce(d * d, reduction, "mse_loss")


def l1_loss(pred: Tensor, target: Any, reduction: str = "mean") -> Tensor:
    """Mean absolute error: mean(|pred - target|)."""
    target = ops.as_tensor(target)
    _check("l1_loss", pred, target)
    return _reduce(ops.abs(pred - target), reduction, "l1_loss")


def huber_loss(pred: Tensor, target: Any, reduction: str = "mean", delta: float = 1.0) -> Tensor:
    """0.5 d^2 for |d| < delta, delta (|d| - delta/2) beyond: quadratic near 0, linear far away."""
    target = ops.as_tensor(target)
    _check("huber_loss", pred, target)
    d = pred - target
    a = ops.abs(d)
    small = ops.greater(delta, a)
    return _reduce(ops.where(small, 0.5 * d * d, delta * (a - 0.5 * delta)), reduction, "huber_loss")


def one_hot(ids: Tensor, num_classes: int) -> Tensor:
    """Float one-hot rows for integer ids: an embedding lookup into the identity matrix."""
    return ops.embedding(ids, constant(np.eye(num_classes), name=f"eye({num_classes})"))


def _target_probs(name: str, logits: Tensor, target: Tensor, label_smoothing: float) -> Tensor:
    c = logits.shape[-1]
    if target.dtype == "int":
        if target.shape != logits.shape[:-1]:
            raise ValueError(f"{name}: integer targets must have shape {logits.shape[:-1]}, got {target.shape}")
        q = one_hot(target, c)
    else:
        _check(name, logits, target)
        q = target
    if label_smoothing:
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"{name}: label_smoothing must be in [0, 1], got {label_smoothing}")
        q = q * (1.0 - label_smoothing) + label_smoothing / c
    return q


def cross_entropy(logits: Tensor, target: Any, reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """Softmax cross-entropy from logits (N, C) (or (..., C)); targets are integer class ids
    (shape (N,)) or probabilities/one-hot rows (N, C). Mean over the rows by default."""
    target = ops.as_tensor(target, kind=target.dtype if isinstance(target, Tensor) else (
        "int" if np.asarray(target).dtype.kind in "iu" else "float"))
    q = _target_probs("cross_entropy", logits, target, label_smoothing)
    per_row = ops.neg(ops.sum(q * ops.log_softmax(logits, axis=-1), axis=-1))
    return _reduce(per_row, reduction, "cross_entropy")


def nll_loss(log_probs: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of integer targets, given log-probabilities (e.g. from log_softmax)."""
    if target.dtype != "int":
        raise TypeError("nll_loss: targets must be integer class ids")
    per_row = ops.neg(ops.sum(one_hot(target, log_probs.shape[-1]) * log_probs, axis=-1))
    return _reduce(per_row, reduction, "nll_loss")


def binary_cross_entropy(prob: Tensor, target: Any, reduction: str = "mean", eps: float = 1e-12) -> Tensor:
    """-(t log p + (1-t) log(1-p)) for probabilities p; p is clipped to [eps, 1-eps] to avoid log(0).
    Prefer ``binary_cross_entropy_with_logits`` on raw scores."""
    target = ops.as_tensor(target)
    _check("binary_cross_entropy", prob, target)
    p = ops.minimum(ops.maximum(prob, eps), 1.0 - eps)
    per = ops.neg(target * ops.log(p) + (1.0 - target) * ops.log(1.0 - p))
    return _reduce(per, reduction, "binary_cross_entropy")


def binary_cross_entropy_with_logits(logits: Tensor, target: Any, reduction: str = "mean") -> Tensor:
    """Binary cross-entropy on raw scores x: softplus(x) - x t (stable for any x)."""
    target = ops.as_tensor(target)
    _check("binary_cross_entropy_with_logits", logits, target)
    return _reduce(ops.softplus(logits) - logits * target, reduction, "binary_cross_entropy_with_logits")


def kl_div(log_q: Tensor, p: Any, reduction: str = "batchmean") -> Tensor:
    """KL(p || q) = sum p (log p - log q), with ``log_q`` log-probabilities and ``p`` probabilities
    (PyTorch's argument order). "batchmean" divides the sum by the batch size (the first axis)."""
    p = ops.as_tensor(p)
    _check("kl_div", log_q, p)
    # p log p with the convention 0 log 0 = 0: log(p + [p == 0]) is log 1 = 0 where p is 0
    per = p * (ops.log(p + ops.equal(p, 0.0)) - log_q)
    if reduction == "batchmean":
        return ops.sum(per) / float(log_q.shape[0] if log_q.shape else 1)
    return _reduce(per, reduction, "kl_div")
