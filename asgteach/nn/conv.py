"""Convolutional layers: Conv2d, MaxPool2d, AvgPool2d (NCHW, as in PyTorch)."""

from __future__ import annotations

from typing import Any

from .. import ops
from ..ops import conv as _conv
from ..tensor import Tensor
from .module import Module

__all__ = ["Conv2d", "MaxPool2d", "AvgPool2d"]


class Conv2d(Module):
    """y = conv2d(x, kernel) + bias, kernel of shape (out, in/groups, kh, kw).

    Default init: Kaiming-uniform kernel (fan-in = in/groups * kh * kw), zero bias.
    """

    kind = "Conv2d"

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int, int], stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True, name: str | None = None,
                 init: str = "kaiming_uniform") -> None:
        super().__init__(name)
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv2d: in_channels ({in_channels}) and out_channels ({out_channels}) "
                             f"must be divisible by groups ({groups})")
        kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
        self.options = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
        self.weight = self.param("weight", (out_channels, in_channels // groups, kh, kw), init)
        self.bias = self.param("bias", (out_channels,), "zeros") if bias else None

    def forward(self, x: Tensor) -> Tensor:
        y = _conv.conv2d(x, self.weight, **self.options)
        if self.bias is None:
            return y
        return y + ops.reshape(self.bias, (self.bias.shape[0], 1, 1))


class _Pool2d(Module):
    """Shared by the pooling layers: no parameters, just the window settings."""

    op = staticmethod(_conv.max_pool2d)

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, name: str | None = None) -> None:
        super().__init__(name)
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x: Tensor) -> Tensor:
        return self.op(x, self.kernel_size, self.stride, self.padding)


class MaxPool2d(_Pool2d):
    """Max over kernel_size windows (stride defaults to kernel_size)."""

    kind = "MaxPool2d"
    op = staticmethod(_conv.max_pool2d)


class AvgPool2d(_Pool2d):
    """Mean over kernel_size windows (stride defaults to kernel_size; zero padding is counted)."""

    kind = "AvgPool2d"
    op = staticmethod(_conv.avg_pool2d)
