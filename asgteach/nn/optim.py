"""Optimizers as graph ops, learning-rate schedules and gradient clipping.

An optimizer here does not loop over arrays. ``build`` appends the update rule to the
graph: for SGD, one ``sub`` and one ``mul`` per parameter (``w_new = w - lr * dw``).
Optimizer state (momentum, Adam's moments) is an *input* of the graph whose new value is
an *output*; the Trainer feeds the state in and keeps what comes out. So one run of one
compiled plan is a whole training step — forward, backward and update — and you can
click on the update nodes like any others.

The learning rate and the step counter are inputs too, so a schedule changes them without
rebuilding anything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import ops
from ..ops.leaves import input as _input
from ..tensor import Tensor

__all__ = [
    "Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "AdaGrad", "Adagrad", "Update", "clip_grad_norm", "clip_grad_value",
    "StepLR", "ExponentialLR", "CosineAnnealingLR", "LinearWarmup", "ConstantLR",
]


@dataclass
class Update:
    """What ``Optimizer.build`` adds: new parameter values and optimizer state in and out."""

    new_params: list[Tensor]
    state_in: list[Tensor] = field(default_factory=list)     # inputs, fed each step
    state_out: list[Tensor] = field(default_factory=list)    # their next values
    state_init: list[np.ndarray] = field(default_factory=list)
    # (the state's first values: float32 zeros, the precision training runs in; the Trainer converts them only for
    # another dtype, so a large model's optimizer state costs no float64 arrays and no conversion pass)


def clip_grad_norm(grads: list[Tensor], max_norm: float) -> list[Tensor]:
    """Scale all gradients together so their global L2 norm is at most ``max_norm``."""
    total = ops.sum(ops.concat([ops.reshape(g * g, (-1,)) for g in grads], axis=0))
    norm = ops.sqrt(total)
    scale = ops.minimum(1.0, max_norm / (norm + 1e-6))
    return [g * scale for g in grads]


def clip_grad_value(grads: list[Tensor], clip_value: float) -> list[Tensor]:
    """Clamp every gradient element to [-clip_value, clip_value]."""
    return [ops.maximum(ops.minimum(g, clip_value), -clip_value) for g in grads]


class Optimizer:
    """Base class: holds hyper-parameters; ``build`` writes the update into the graph.

    Weight decay is written here, once, in its two forms: L2 (``g + wd * p``, added to the
    gradient in :meth:`_prepare`, as ``torch.optim`` SGD/Adam/RMSprop do) or *decoupled*
    (``p * (1 - lr * wd)``, the parameter shrinks by itself: :meth:`_decayed`, AdamW).
    """

    name = "optimizer"
    #: True: weight decay shrinks the parameter directly instead of joining the gradient (AdamW)
    decoupled = False

    def __init__(self, lr: float, weight_decay: float = 0.0, clip_norm: float | None = None,
                 clip_value: float | None = None) -> None:
        if lr <= 0:
            raise ValueError(f"{type(self).__name__}: lr must be positive, got {lr}")
        self.lr, self.weight_decay, self.clip_norm, self.clip_value = lr, weight_decay, clip_norm, clip_value

    def hyperparameters(self) -> dict[str, float | bool | None]:
        """The numbers that define this optimizer, by the names it keeps them under
        (``{"lr": 0.05, "weight_decay": 0.01, "b1": 0.9, ...}``).

        A checkpoint records them next to the optimizer's state, so a file says how it was trained.
        """
        return {k: v for k, v in vars(self).items() if v is None or isinstance(v, (bool, int, float))}

    def _state(self, kind: str, p: Tensor) -> Tensor:
        t = _input(f"{self.name}.{kind}[{p.name}]", p.shape, graph=p.graph)
        t.node.meta.update({"optimizer_state": kind, "optimizer": self.name, "for": p.name})
        return t

    def _prepare(self, params: list[Tensor], grads: list[Tensor]) -> list[Tensor]:
        """The gradients the update uses: clipped (by value, then by global norm), then L2 weight decay."""
        if self.clip_value is not None:
            grads = clip_grad_value(grads, self.clip_value)
        if self.clip_norm is not None:
            grads = clip_grad_norm(grads, self.clip_norm)
        if self.weight_decay and not self.decoupled:
            grads = [g + self.weight_decay * p for p, g in zip(params, grads)]
        return grads

    def _decayed(self, p: Tensor, lr: Tensor) -> Tensor:
        """The parameter the step starts from: ``p * (1 - lr * wd)`` with decoupled decay, else ``p``."""
        return p * (1.0 - lr * self.weight_decay) if self.decoupled and self.weight_decay else p

    def build(self, params: list[Tensor], grads: list[Tensor], lr: Tensor, step: Tensor) -> Update:
        """Append the update for ``params`` given their ``grads``; ``lr``/``step`` are scalar inputs."""
        raise NotImplementedError


class SGD(Optimizer):
    """p -= lr * g, optionally with momentum (v = mu v + g), Nesterov and L2 weight decay
    (g += wd p), as ``torch.optim.SGD``."""

    name = "sgd"

    def __init__(self, lr: float = 0.01, momentum: float = 0.0, nesterov: bool = False, weight_decay: float = 0.0,
                 **clip: float) -> None:
        super().__init__(lr, weight_decay, **clip)
        if nesterov and momentum <= 0:
            raise ValueError("SGD: Nesterov momentum needs momentum > 0")
        self.momentum, self.nesterov = momentum, nesterov

    def build(self, params, grads, lr, step):
        up = Update([])
        for p, g in zip(params, self._prepare(params, grads)):
            if self.momentum:
                v = self._state("momentum", p)
                v_new = self.momentum * v + g
                up.state_in.append(v)
                up.state_out.append(v_new)
                up.state_init.append(np.zeros(p.shape, np.float32))
                g = g + self.momentum * v_new if self.nesterov else v_new
            up.new_params.append(p - lr * g)
        return up


class Adam(Optimizer):
    """Adam (Kingma & Ba, 2015): running means of g and g^2 with bias correction.

    m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  p -= lr * m_hat / (sqrt(v_hat) + eps),
    m_hat = m / (1 - b1^t), v_hat = v / (1 - b2^t). ``weight_decay`` adds wd * p to g (L2).
    """

    name = "adam"

    def __init__(self, lr: float = 0.001, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, **clip: float) -> None:
        super().__init__(lr, weight_decay, **clip)
        self.b1, self.b2 = betas
        self.eps = eps

    def build(self, params, grads, lr, step):
        up = Update([])
        corr1 = 1.0 - ops.pow(self.b1, step)
        corr2 = 1.0 - ops.pow(self.b2, step)
        for p, g in zip(params, self._prepare(params, grads)):
            m, v = self._state("m", p), self._state("v", p)
            m_new = self.b1 * m + (1.0 - self.b1) * g
            v_new = self.b2 * v + (1.0 - self.b2) * (g * g)
            step_dir = (m_new / corr1) / (ops.sqrt(v_new / corr2) + self.eps)
            up.new_params.append(self._decayed(p, lr) - lr * step_dir)
            up.state_in += [m, v]
            up.state_out += [m_new, v_new]
            up.state_init += [np.zeros(p.shape, np.float32), np.zeros(p.shape, np.float32)]
        return up


class AdamW(Adam):
    """Adam with *decoupled* weight decay (Loshchilov & Hutter, 2019): p *= (1 - lr wd) before the Adam step."""

    name = "adamw"
    decoupled = True

    def __init__(self, lr: float = 0.001, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01, **clip: float) -> None:
        super().__init__(lr, betas, eps, weight_decay, **clip)


class RMSprop(Optimizer):
    """v = alpha v + (1-alpha) g^2;  p -= lr g / (sqrt(v) + eps)  (``torch.optim.RMSprop`` defaults)."""

    name = "rmsprop"

    def __init__(self, lr: float = 0.01, alpha: float = 0.99, eps: float = 1e-8, weight_decay: float = 0.0,
                 **clip: float) -> None:
        super().__init__(lr, weight_decay, **clip)
        self.alpha, self.eps = alpha, eps

    def build(self, params, grads, lr, step):
        up = Update([])
        for p, g in zip(params, self._prepare(params, grads)):
            v = self._state("square_avg", p)
            v_new = self.alpha * v + (1.0 - self.alpha) * (g * g)
            up.new_params.append(p - lr * g / (ops.sqrt(v_new) + self.eps))
            up.state_in.append(v)
            up.state_out.append(v_new)
            up.state_init.append(np.zeros(p.shape, np.float32))
        return up


class AdaGrad(Optimizer):
    """AdaGrad (Duchi, Hazan & Singer, 2011): every coordinate keeps the sum of its squared gradients and
    steps by lr / sqrt(that sum), so a coordinate that has seen large gradients moves less and less.

    s = s + g^2;  p -= lr_t g / (sqrt(s) + eps),  lr_t = lr / (1 + (t - 1) lr_decay);
    ``weight_decay`` adds wd * p to g (L2). ``torch.optim.Adagrad``'s defaults; ``Adagrad`` is PyTorch's spelling.
    The step shrinks forever (s only grows): RMSprop and Adam replace the sum by a running average.
    """

    name = "adagrad"

    def __init__(self, lr: float = 0.01, lr_decay: float = 0.0, weight_decay: float = 0.0,
                 initial_accumulator_value: float = 0.0, eps: float = 1e-10, **clip: float) -> None:
        super().__init__(lr, weight_decay, **clip)
        if lr_decay < 0 or initial_accumulator_value < 0:
            raise ValueError(f"AdaGrad: lr_decay and initial_accumulator_value must be >= 0, got {lr_decay} and "
                             f"{initial_accumulator_value}")
        self.lr_decay, self.initial_accumulator_value, self.eps = lr_decay, initial_accumulator_value, eps

    def build(self, params, grads, lr, step):
        up = Update([])
        lr_t = lr / (1.0 + (step - 1.0) * self.lr_decay) if self.lr_decay else lr
        for p, g in zip(params, self._prepare(params, grads)):
            s = self._state("sum", p)
            s_new = s + g * g
            up.new_params.append(p - lr_t * g / (ops.sqrt(s_new) + self.eps))
            up.state_in.append(s)
            up.state_out.append(s_new)
            up.state_init.append(np.full(p.shape, self.initial_accumulator_value, np.float32))
        return up


Adagrad = AdaGrad


# --- learning-rate schedules: step (0-based count of updates done) -> lr --------------------------
class ConstantLR:
    """The optimizer's own lr, always."""

    def __call__(self, base_lr: float, step: int) -> float:
        return base_lr


class StepLR:
    """lr * gamma ** (step // step_size)."""

    def __init__(self, step_size: int, gamma: float = 0.1) -> None:
        self.step_size, self.gamma = step_size, gamma

    def __call__(self, base_lr: float, step: int) -> float:
        return base_lr * self.gamma ** (step // self.step_size)


class ExponentialLR:
    """lr * gamma ** step."""

    def __init__(self, gamma: float) -> None:
        self.gamma = gamma

    def __call__(self, base_lr: float, step: int) -> float:
        return base_lr * self.gamma**step


class CosineAnnealingLR:
    """eta_min + (lr - eta_min) (1 + cos(pi step / T_max)) / 2, flat at eta_min after T_max."""

    def __init__(self, T_max: int, eta_min: float = 0.0) -> None:  # noqa: N803 - PyTorch's name
        self.T_max, self.eta_min = T_max, eta_min

    def __call__(self, base_lr: float, step: int) -> float:
        s = min(step, self.T_max)
        return self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * s / self.T_max)) / 2


class LinearWarmup:
    """Ramp linearly from lr/warmup_steps to lr over ``warmup_steps``, then follow ``after`` (default constant)."""

    def __init__(self, warmup_steps: int, after: object | None = None) -> None:
        self.warmup_steps, self.after = warmup_steps, after or ConstantLR()

    def __call__(self, base_lr: float, step: int) -> float:
        if step < self.warmup_steps:
            return base_lr * (step + 1) / self.warmup_steps
        return self.after(base_lr, step - self.warmup_steps)  # type: ignore[operator]
