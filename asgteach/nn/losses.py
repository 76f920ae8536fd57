"""Loss functions, written as graph ops (so their gradients are graphs too).

Names, arguments and defaults follow ``torch.nn.functional``. ``reduction`` is "mean"
(default), "sum" or "none".

Numerical care is part of the lesson:
* ``cross_entropy`` takes *logits* and uses ``log_softmax`` — never log(softmax(x)), which
  turns a tiny probability into log(0) = -inf;
* ``cross_entropy`` and ``nll_loss`` *pick* each row's log-probability with a ``where`` on the
  one-hot row instead of multiplying by it: a masked logit (``-inf``) has log-probability
  ``-inf``, and ``0 * -inf`` is NaN;
* ``binary_cross_entropy_with_logits`` uses ``softplus(x) - x t``, equal to
  ``-(t log s + (1-t) log(1-s))`` with s = sigmoid(x), but it never evaluates log(0).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import ops
from ..graph import user_source
from ..ops.leaves import constant
from ..shapes import ShapeError
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
    rows = ops.embedding(ids, constant(np.eye(num_classes), name=f"eye({num_classes})"))
    # (what an id without a row is called in the error: backends/ids.py)
    rows.node.meta.update(ids_for="the class ids of one_hot", ids_count="classes", ids_by="one_hot")
    return rows


def _targets(rows: Tensor, loss: str) -> Tensor:
    """``rows = one_hot(targets)`` built by ``loss``: an id without a class is an error about its targets."""
    rows.node.meta.update(ids_for=f"the targets of {loss} (class ids)", ids_count="classes", ids_by=loss)
    return rows


def _class_ids_hint(name: str, logits: Tensor, target: Tensor) -> str:
    """A hint for the common slip: class ids held in a *float* tensor.

    Integer class ids of shape (N,) given as ``at.input("t", (N,))`` are float, so the loss
    reads them as probabilities (which must have the logits' shape) and the shapes clash.
    """
    if target.dtype == "float" and target.shape == logits.shape[:-1]:
        n = ", ".join(str(d) for d in target.shape) + ("," if len(target.shape) == 1 else "")
        return (f"if {target.name!r} holds class ids, declare it as integers: "
                f'at.input("{target.name}", ({n}), dtype="int") (or feed an integer array)')
    return ""


def _check_targets(name: str, logits: Tensor, target: Tensor) -> None:
    if target.dtype == "int":
        if target.shape != logits.shape[:-1]:
            raise ShapeError(name, f"integer targets must have shape {logits.shape[:-1]} (the logits' shape "
                                   f"without the class axis), got {target.shape}",
                             [logits.shape, target.shape], user_source())
    elif target.shape != logits.shape:
        raise ShapeError(name, f"prediction {logits.shape} and target {target.shape} must have the same shape "
                               f"(probability targets have one entry per class)",
                         [logits.shape, target.shape], user_source(), hint=_class_ids_hint(name, logits, target))


def _pick(log_probs: Tensor, mask: Tensor) -> Tensor:
    """``log_probs[..., ids]`` given ``mask = one_hot(ids)``: each row's entry at its class id,
    for any number of leading axes.

    Written as "where the one-hot row is 1, take the value, else 0; sum the row". It is a
    *where*, not ``one_hot * log_probs``, on purpose: a masked logit is ``-inf``, its
    log-probability is ``-inf`` too, and ``0 * -inf`` is NaN. ``where`` never multiplies,
    and its backward rule sends the gradient only to the picked entry (the others get an
    exact 0), so the masked class gets probability 0 and gradient 0, as in PyTorch.
    """
    return ops.sum(ops.where(mask, log_probs, 0.0), axis=-1)


def _weighted(log_probs: Tensor, q: Tensor) -> Tensor:
    """sum over classes of q * log_probs, with the convention 0 * log 0 = 0.

    Where the weight q is 0 the log-probability is replaced by 0 *before* multiplying, so a
    masked class (log-probability -inf) with weight 0 adds 0, not NaN. A class that has weight
    > 0 and probability 0 still gives an infinite loss: that is the honest answer.
    """
    return ops.sum(q * ops.where(q, log_probs, 0.0), axis=-1)


def _smoothing(name: str, label_smoothing: float) -> None:
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{name}: label_smoothing must be in [0, 1], got {label_smoothing}")


def cross_entropy(logits: Tensor, target: Any, reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """Softmax cross-entropy from logits (N, C) (or (..., C)); targets are integer class ids
    (shape (N,)) or probabilities/one-hot rows (N, C). Mean over the rows by default.

    A logit of ``-inf`` masks its class out (probability exactly 0, gradient exactly 0), as
    in attention masks: integer targets *pick* their log-probability instead of multiplying
    by a one-hot row (see ``_pick``). With ``label_smoothing`` > 0 every class is given a
    little weight, so a masked class makes the loss infinite (it asks for probability where there is none).
    """
    target = ops.as_tensor(target, kind=target.dtype if isinstance(target, Tensor) else (
        "int" if np.asarray(target).dtype.kind in "iu" else "float"))
    _check_targets("cross_entropy", logits, target)
    _smoothing("cross_entropy", label_smoothing)
    c = logits.shape[-1]
    q = _targets(one_hot(target, c), "cross_entropy") if target.dtype == "int" else target
    log_probs = ops.log_softmax(logits, axis=-1)
    if target.dtype == "int" and not label_smoothing:
        per_row = ops.neg(_pick(log_probs, q))
    else:
        if label_smoothing:
            q = q * (1.0 - label_smoothing) + label_smoothing / c
        per_row = ops.neg(_weighted(log_probs, q))
    return _reduce(per_row, reduction, "cross_entropy")


def nll_loss(log_probs: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of integer targets, given log-probabilities (e.g. from log_softmax).

    The target's entry is picked, not multiplied out, so a ``-inf`` log-probability in another
    class does not turn the loss into NaN."""
    if not isinstance(target, Tensor) or target.dtype != "int":
        raise TypeError("nll_loss: targets must be integer class ids (at.input(\"t\", (N,), dtype=\"int\"))")
    _check_targets("nll_loss", log_probs, target)
    rows = _targets(one_hot(target, log_probs.shape[-1]), "nll_loss")
    return _reduce(ops.neg(_pick(log_probs, rows)), reduction, "nll_loss")


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
