"""Batch normalisation: BatchNorm1d and BatchNorm2d, PyTorch's semantics, as graph ops.

LayerNorm (in ``layers.py``) normalises each example over its own features. BatchNorm
normalises each *channel* over the batch: for ``x`` of shape (N, C), (N, C, L) or
(N, C, H, W) it computes, per channel c, the mean and the (biased) variance over every
axis but the channel axis, and

    y = (x - mean) / sqrt(var + eps) * weight + bias          (weight = 1, bias = 0 at first)

In training those are the *batch's* statistics. The layer also keeps running estimates,
updated after every training step with PyTorch's momentum (0.1 by default)::

    running_mean = (1 - momentum) * running_mean + momentum * mean
    running_var  = (1 - momentum) * running_var  + momentum * var * n / (n - 1)

(``n / (n - 1)``: the running variance is the *unbiased* one, n = the values per channel),
and evaluation normalises with them instead, so a prediction does not depend on which other
examples share its batch. Running statistics start at 0 (mean) and 1 (variance).

How that is a graph (one graph for both modes, like Dropout's):

- ``<name>.running_mean`` and ``<name>.running_var`` are **inputs**, as Adam's moments are
  (``optim.py``): whoever runs the graph feeds the current values. Their next values are
  nodes of the graph too (each input's ``node.supplied.next`` names its node); a Trainer reads
  them back after each step it accepts and keeps them in ``trainer.buffers``.
- ``<name>.training`` is a scalar input, 1.0 in training and 0.0 in evaluation, and the
  statistics used are ``where(training, batch statistic, running statistic)``: ``where``
  picks, it does not blend, so either branch is used exactly, and in evaluation no gradient
  reaches the batch statistics. The runner feeds it: ``Trainer.train_step``/``fit`` 1.0,
  ``Trainer.run`` 0.0, ``at.run(..., training=False)`` 0.0 by default (``training=True``: 1.0).

Why a flag input and not two graphs, or a Python switch when the layer is built: a module
here only *builds* nodes (``Module``'s docstring), so the mode cannot live in the module;
an input decided at run time lets one compiled plan serve both modes, as the dropout mask does.

``at.run`` has no Trainer and so no buffers: it uses the running statistics you feed by name
(``{"bn.running_mean": ..., "bn.running_var": ...}``; ``trainer.buffers`` is such a dict),
and where you feed none, a fresh layer's (mean 0, variance 1), as a new ``torch.nn.BatchNorm1d``
holds. It never updates anything: running a graph is a function of its feeds.

Call a BatchNorm layer once per graph: a second call makes a second set of inputs of the same
names (a notebook cell re-run does that, and the newest wins), and a Trainer refuses a loss
that depends on both (two updates per step of the same statistics).
"""

from __future__ import annotations

import math
from dataclasses import replace

from .. import ops
from ..graph import Supplied, user_source
from ..shapes import ShapeError
from ..tensor import Tensor
from .module import Module

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNormBase"]

#: The first value of each running statistic (a fresh PyTorch BatchNorm holds the same).
BUFFER_FILL = {"running_mean": 0.0, "running_var": 1.0}


class BatchNormBase(Module):
    """What BatchNorm1d and BatchNorm2d share (public for checks that switch a batch norm's forward off); they
    differ only in the input ranks they accept."""

    kind = "BatchNorm"
    ranks: tuple[int, ...] = ()
    layout = ""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1, affine: bool = True,
                 track_running_stats: bool = True, name: str | None = None) -> None:
        super().__init__(name)
        if momentum is None or not 0.0 <= momentum <= 1.0:
            raise ValueError(f"{self.kind}: momentum must be a number in [0, 1], got {momentum!r} (PyTorch's "
                             f"momentum=None, a cumulative average, is not supported)")
        if eps <= 0:
            raise ValueError(f"{self.kind}: eps must be positive, got {eps}")
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.weight = self.param("weight", (num_features,), "ones") if affine else None
        self.bias = self.param("bias", (num_features,), "zeros") if affine else None

    def forward(self, x: Tensor) -> Tensor:
        c = self.num_features
        if x.ndim not in self.ranks or x.shape[1] != c:
            raise ShapeError(self.kind, f"layer '{self.name}' (num_features={c}) expects x of shape "
                             f"{self.layout.format(c=c)}, got {x.shape}", [x.shape], user_source())
        axes = (0, *range(2, x.ndim))                  # every axis but the channels
        n = math.prod(x.shape[a] for a in axes)       # values per channel
        # one value per channel (a batch of one example): evaluation is fine, as in PyTorch, but training is not,
        # so the training flag carries why and a runner asked to train raises it (``Supplied.refuse``)
        refuse = (f"layer '{self.name}' has 1 value per channel in x of shape {x.shape}: it cannot train on that (the "
                  "batch variance would be 0 and the unbiased one undefined)") if n < 2 else ""
        if refuse and not self.track_running_stats:   # batch statistics in both modes: nothing can run it
            raise ShapeError(self.kind, refuse + "; without running statistics (track_running_stats=False) it "
                             "normalises with the batch's in evaluation too", [x.shape], user_source())
        mean = batch_mean = ops.mean(x, axis=axes)   # (C,)
        var = batch_var = ops.var(x, axis=axes)      # (C,), biased (divides by n), as PyTorch normalises
        if self.track_running_stats:
            training = self.supplied_input("training", (), Supplied("training_flag", refuse=refuse))
            running_mean = self.supplied_input("running_mean", (c,), Supplied("running_stat",
                                                                              fill=BUFFER_FILL["running_mean"]))
            running_var = self.supplied_input("running_var", (c,), Supplied("running_stat",
                                                                            fill=BUFFER_FILL["running_var"]))
            mean = ops.where(training, batch_mean, running_mean)
            var = ops.where(training, batch_var, running_var)
            m = self.momentum
            next_mean = (1.0 - m) * running_mean + m * batch_mean
            next_var = (1.0 - m) * running_var + m * (batch_var * (n / max(n - 1, 1)))   # (never used when n = 1)
            for stat, nxt in ((running_mean, next_mean), (running_var, next_var)):   # (declared once it exists)
                stat.node.supplied = replace(stat.node.supplied, next=nxt.node_id)
        per_channel = (c,) + (1,) * (x.ndim - 2)     # (C,), (C, 1) or (C, 1, 1): broadcasts along axis 1

        def along_channels(v: Tensor) -> Tensor:
            return v if x.ndim == 2 else ops.reshape(v, per_channel)

        y = (x - along_channels(mean)) / ops.sqrt(along_channels(var) + self.eps)
        if self.affine:
            y = y * along_channels(self.weight) + along_channels(self.bias)
        return y


class BatchNorm1d(BatchNormBase):
    """Normalise each of C channels over the batch: x of shape (N, C) or (N, C, L) (over N, or N and L).

    ``BatchNorm1d(num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True)``,
    as ``torch.nn.BatchNorm1d``; the module docstring says how training and evaluation differ.
    """

    kind = "BatchNorm1d"
    ranks = (2, 3)
    layout = "(N, {c}) or (N, {c}, L)"


class BatchNorm2d(BatchNormBase):
    """Normalise each of C channels over the batch and the image: x of shape (N, C, H, W) (over N, H and W).

    ``BatchNorm2d(num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True)``,
    as ``torch.nn.BatchNorm2d``; the module docstring says how training and evaluation differ.
    """

    kind = "BatchNorm2d"
    ranks = (4,)
    layout = "(N, {c}, H, W)"
