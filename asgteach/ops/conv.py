"""Convolution and pooling over images in NCHW layout (batch, channels, height, width).

A 2-D convolution slides a small kernel over the image; each output pixel is a dot
product of the kernel with the patch under it:

    y[n, o, i, j] = sum_{c, a, b} x_pad[n, c, i*s + a*d, j*s + b*d] * w[o, c, a, b]

(``s`` stride, ``d`` dilation, ``x_pad`` the input with ``padding`` zeros around it;
with ``groups`` the channels are split into independent groups). The numpy kernels build
a strided *view* of all patches ("im2col" without copying) and contract it with
``einsum``.

Backward rules come in pairs that are each other's transposes: the gradient with
respect to the input is a *transposed convolution* (``conv2d_grad_input``), the gradient
with respect to the kernel correlates the input with the output gradient
(``conv2d_grad_weight``). Both are linear in the gradient, so their own backward rules
are the other two ops again — second derivatives need nothing new.

Max pooling sends each window's gradient to the element that won (the first maximum, as
PyTorch does); average pooling spreads it evenly over the window (zero padding counts
toward the average, PyTorch's ``count_include_pad=True``).

Batching (``at.vmap``) uses the two axes these ops already have for "many": a batch of images
joins the images' own axis N (B batches of N images are B * N images), and a batch of kernels
joins the channels as groups (B kernels side by side are one grouped convolution with B times
the groups, the way JAX batches its convolutions). So a batch is one conv node, never B.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..graph import user_source
from ..shapes import ShapeError
from ..tensor import Tensor
from .registry import GPU, BatchContext, OpSpec, Tools, VjpContext, apply, register
from .shape import reshape

__all__ = ["conv2d", "max_pool2d", "avg_pool2d"]

Pair = tuple[int, int]


def _pair(op: str, name: str, v: Any, minimum: int) -> Pair:
    p = (int(v), int(v)) if isinstance(v, (int, np.integer)) else tuple(int(a) for a in v)
    if len(p) != 2 or min(p) < minimum:
        raise ShapeError(op, f"{name} must be an int or a pair of ints >= {minimum}, got {v!r}", (), user_source())
    return p  # type: ignore[return-value]


def _out_size(op: str, size: int, k: int, s: int, p: int, d: int, shapes: list) -> int:
    span = d * (k - 1) + 1
    if size + 2 * p < span:
        raise ShapeError(op, f"the kernel spans {span} pixels but the padded input has only {size + 2 * p}", shapes)
    return (size + 2 * p - span) // s + 1


def _windows(xp: np.ndarray, kh: int, kw: int, oh: int, ow: int, s: Pair, d: Pair) -> np.ndarray:
    """A (N, C, OH, OW, KH, KW) view of every patch of the padded input (no copy)."""
    n, c = xp.shape[:2]
    sn, sc, sh, sw = xp.strides
    return as_strided(xp, (n, c, oh, ow, kh, kw), (sn, sc, sh * s[0], sw * s[1], sh * d[0], sw * d[1]),
                      writeable=False)


def _pad(x: np.ndarray, p: Pair, value: float = 0.0) -> np.ndarray:
    if p == (0, 0):
        return x
    return np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])), constant_values=value)


def _tap(a: int, b: int, oh: int, ow: int, s: Pair, d: Pair) -> tuple[slice, slice, slice, slice]:
    """Index of the padded input read by kernel tap (a, b) for every output pixel."""
    return (slice(None), slice(None), slice(a * d[0], a * d[0] + s[0] * (oh - 1) + 1, s[0]),
            slice(b * d[1], b * d[1] + s[1] * (ow - 1) + 1, s[1]))


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0] if n > 0 else [1]


# --- conv2d ---------------------------------------------------------------------------------------
def _conv_infer(x: tuple, w: tuple, stride: Pair = (1, 1), padding: Pair = (0, 0), dilation: Pair = (1, 1),
                groups: int = 1, **_: Any) -> tuple:
    if len(x) != 4 or len(w) != 4:
        raise ShapeError("conv2d", "conv2d needs x of shape (N, C, H, W) and w of shape (O, C/groups, KH, KW)", [x, w])
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1:
        # groups splits the channels into that many independent convolutions: 0 or -1 groups mean nothing
        raise ShapeError("conv2d", f"groups must be a positive integer that divides both the input channels "
                                   f"({x[1]}) and the output channels ({w[0]}); got groups={groups!r}", [x, w],
                         hint=f"use one of {_divisors(math.gcd(x[1], w[0]))} (groups=1 is an ordinary convolution)")
    if x[1] % groups or w[0] % groups:
        raise ShapeError("conv2d", f"in channels ({x[1]}) and out channels ({w[0]}) must divide by groups={groups}",
                         [x, w])
    if w[1] != x[1] // groups:
        raise ShapeError("conv2d", f"the kernel expects {w[1] * groups} input channels (C/groups = {w[1]}), "
                                   f"x has {x[1]}", [x, w])
    oh = _out_size("conv2d", x[2], w[2], stride[0], padding[0], dilation[0], [x, w])
    ow = _out_size("conv2d", x[3], w[3], stride[1], padding[1], dilation[1], [x, w])
    return (x[0], w[0], oh, ow)


def _conv_kernel(x: np.ndarray, w: np.ndarray, stride: Pair = (1, 1), padding: Pair = (0, 0),
                 dilation: Pair = (1, 1), groups: int = 1) -> np.ndarray:
    n, c, _, _ = x.shape
    o, cg, kh, kw = w.shape
    _, _, oh, ow = _conv_infer(x.shape, w.shape, stride, padding, dilation, groups)
    cols = _windows(_pad(x, padding), kh, kw, oh, ow, stride, dilation)
    g = groups
    cols = cols.reshape(n, g, cg, oh, ow, kh, kw)
    wr = w.reshape(g, o // g, cg, kh, kw)
    y = np.einsum("ngcijab,gocab->ngoij", cols, wr, optimize=True)
    return np.ascontiguousarray(y.reshape(n, o, oh, ow), dtype=x.dtype)


def _conv_attrs(c: VjpContext) -> dict[str, Any]:
    return {k: c.attrs[k] for k in ("stride", "padding", "dilation", "groups")}


def _conv_vjp(c: VjpContext, g: Tensor):
    x, w = c.inputs
    a = _conv_attrs(c)
    dx = apply("conv2d_grad_input", g, w, x_shape=x.shape, **a) if c.needs[0] else None
    dw = apply("conv2d_grad_weight", x, g, w_shape=w.shape, **a) if c.needs[1] else None
    return dx, dw


def _images(c: BatchContext, x: Tensor, dim: int | None) -> Tensor:
    """A batch of (N, C, H, W) images as (B * N, C, H, W): the batch joins the images' axis."""
    x = c.moved(x, dim)
    return reshape(x, (x.shape[0] * x.shape[1],) + x.shape[2:])


def _unmerge(c: BatchContext, y: Tensor) -> Tensor:
    """(B * N, ...) back to (B, N, ...)."""
    return reshape(y, (c.size, y.shape[0] // c.size) + y.shape[1:])


def _as_groups(c: BatchContext, x: Tensor, dim: int | None) -> Tensor:
    """A batch of (N, C, ...) as (N, B * C, ...): example b's channels are the b-th block of channels."""
    x = c.moved(x, dim, 1)
    return reshape(x, (x.shape[0], x.shape[1] * x.shape[2]) + x.shape[3:])


def _kernels(c: BatchContext, w: Tensor, dim: int | None) -> Tensor:
    """A batch of (O, C/g, KH, KW) kernels as (B * O, C/g, KH, KW): the kernels of B groups-of-groups."""
    w = c.moved(w, dim)
    return reshape(w, (w.shape[0] * w.shape[1],) + w.shape[2:])


def _conv_batch(c: BatchContext, args: tuple, dims: tuple):
    """Images batched, one kernel: B * N images. Kernels batched: B times the groups (channels side by side)."""
    (x, w), (dx, dw) = args, dims
    if dw is None:
        return _unmerge(c, apply("conv2d", _images(c, x, dx), w, **c.attrs)), 0
    y = apply("conv2d", _as_groups(c, x, dx), _kernels(c, w, dw), **{**c.attrs, "groups": c.size * c.attrs["groups"]})
    n, _, oh, ow = y.shape
    return reshape(y, (n, c.size, y.shape[1] // c.size, oh, ow)), 1


_CONV_ATTRS = {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "groups": 1}
register(OpSpec(
    name="conv2d", category="convolution", arity=2, infer=_conv_infer, numpy=_conv_kernel, vjp=_conv_vjp,
    batch=_conv_batch,
    attrs=dict(_CONV_ATTRS),
    doc="2-D cross-correlation, NCHW, with stride, padding, dilation and groups",
    gpu=GPU(kernel="conv"), tools=Tools(sample=lambda b: conv2d(b.x((1, 2, 5, 5)), b.x((3, 2, 3, 3)), padding=1)),
))


def conv2d(x: Any, w: Any, stride: int | Pair = 1, padding: int | Pair = 0, dilation: int | Pair = 1,
           groups: int = 1) -> Tensor:
    """2-D convolution like ``F.conv2d(x, w, stride=, padding=, dilation=, groups=)`` (no bias: add it)."""
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)):
        raise ShapeError("conv2d", f"groups must be a positive integer, got {groups!r}", (), user_source())
    return apply("conv2d", x, w, stride=_pair("conv2d", "stride", stride, 1),
                 padding=_pair("conv2d", "padding", padding, 0), dilation=_pair("conv2d", "dilation", dilation, 1),
                 groups=int(groups))


# --- conv2d_grad_input: the transposed convolution ------------------------------------------------
def _conv_grad_input_kernel(gy: np.ndarray, w: np.ndarray, x_shape: tuple = (), stride: Pair = (1, 1),
                            padding: Pair = (0, 0), dilation: Pair = (1, 1), groups: int = 1) -> np.ndarray:
    n, c, h, wd = x_shape
    o, cg, kh, kw = w.shape
    _, _, oh, ow = gy.shape
    g = groups
    gr = gy.reshape(n, g, o // g, oh, ow)
    wr = w.reshape(g, o // g, cg, kh, kw)
    dxp = np.zeros((n, c, h + 2 * padding[0], wd + 2 * padding[1]), dtype=gy.dtype)
    for a in range(kh):
        for b in range(kw):
            part = np.einsum("ngoij,goc->ngcij", gr, wr[..., a, b], optimize=True).reshape(n, c, oh, ow)
            dxp[_tap(a, b, oh, ow, stride, dilation)] += part
    return dxp[:, :, padding[0]: padding[0] + h, padding[1]: padding[1] + wd].copy()


def _grad_input_vjp(c: VjpContext, u: Tensor):
    # out = Bx(gy, w), bilinear: d/d gy -> conv2d(u, w);  d/dw -> Bw(u, gy)
    gy, w = c.inputs
    a = _conv_attrs(c)
    d_gy = apply("conv2d", u, w, **a) if c.needs[0] else None
    d_w = apply("conv2d_grad_weight", u, gy, w_shape=w.shape, **a) if c.needs[1] else None
    return d_gy, d_w


def _grad_input_batch(c: BatchContext, args: tuple, dims: tuple):
    """As conv2d's rule: the transposed convolution of a grouped convolution is grouped the same way."""
    (gy, w), (dg, dw) = args, dims
    n, ch, h, wd = c.attrs["x_shape"]
    if dw is None:
        return _unmerge(c, apply("conv2d_grad_input", _images(c, gy, dg), w,
                                 **{**c.attrs, "x_shape": (c.size * n, ch, h, wd)})), 0
    dx = apply("conv2d_grad_input", _as_groups(c, gy, dg), _kernels(c, w, dw),
               **{**c.attrs, "x_shape": (n, c.size * ch, h, wd), "groups": c.size * c.attrs["groups"]})
    return reshape(dx, (n, c.size, ch, h, wd)), 1


_SAMPLE_CONV = {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 1), "groups": 1}
register(OpSpec(
    name="conv2d_grad_input", category="gradient", arity=2, infer=lambda g, w, x_shape=(), **_: tuple(x_shape),
    numpy=_conv_grad_input_kernel, vjp=_grad_input_vjp, batch=_grad_input_batch,
    attrs={**_CONV_ATTRS, "x_shape": ()},
    doc="gradient of conv2d with respect to its input: a transposed convolution",
    gpu=GPU(kernel="conv"),
    tools=Tools(sample=lambda b: apply("conv2d_grad_input", b.x((2, 3, 3, 3)), b.x((3, 2, 3, 3)),
                                       x_shape=(2, 2, 5, 5), **_SAMPLE_CONV)),
))


# --- conv2d_grad_weight ---------------------------------------------------------------------------
def _conv_grad_weight_kernel(x: np.ndarray, gy: np.ndarray, w_shape: tuple = (), stride: Pair = (1, 1),
                             padding: Pair = (0, 0), dilation: Pair = (1, 1), groups: int = 1) -> np.ndarray:
    n, c, _, _ = x.shape
    o, cg, kh, kw = w_shape
    _, _, oh, ow = gy.shape
    g = groups
    cols = _windows(_pad(x, padding), kh, kw, oh, ow, stride, dilation).reshape(n, g, cg, oh, ow, kh, kw)
    gr = gy.reshape(n, g, o // g, oh, ow)
    dw = np.einsum("ngoij,ngcijab->gocab", gr, cols, optimize=True)
    return np.ascontiguousarray(dw.reshape(o, cg, kh, kw), dtype=x.dtype)


def _grad_weight_vjp(c: VjpContext, u: Tensor):
    # out = Bw(x, gy), bilinear: d/dx -> Bx(gy, u);  d/d gy -> conv2d(x, u)
    x, gy = c.inputs
    a = _conv_attrs(c)
    d_x = apply("conv2d_grad_input", gy, u, x_shape=x.shape, **a) if c.needs[0] else None
    d_gy = apply("conv2d", x, u, **a) if c.needs[1] else None
    return d_x, d_gy


def _grad_weight_batch(c: BatchContext, args: tuple, dims: tuple):
    """One kernel gradient per example: images and output gradients as B groups, B * O kernels out."""
    (x, gy), (dx, dg) = args, dims
    o, cg, kh, kw = c.attrs["w_shape"]
    dw = apply("conv2d_grad_weight", _as_groups(c, x, dx), _as_groups(c, gy, dg),
               **{**c.attrs, "w_shape": (c.size * o, cg, kh, kw), "groups": c.size * c.attrs["groups"]})
    return reshape(dw, (c.size, o, cg, kh, kw)), 0


register(OpSpec(
    name="conv2d_grad_weight", category="gradient", arity=2, infer=lambda x, g, w_shape=(), **_: tuple(w_shape),
    numpy=_conv_grad_weight_kernel, vjp=_grad_weight_vjp, batch=_grad_weight_batch,
    attrs={**_CONV_ATTRS, "w_shape": ()},
    doc="gradient of conv2d with respect to its kernel: input patches correlated with the output gradient",
    gpu=GPU(kernel="conv"),
    tools=Tools(sample=lambda b: apply("conv2d_grad_weight", b.x((2, 2, 5, 5)), b.x((2, 3, 3, 3)),
                                       w_shape=(3, 2, 3, 3), **_SAMPLE_CONV)),
))


# --- pooling: what the pools share ----------------------------------------------------------------
def _pool_infer(x: tuple, kernel_size: Pair = (2, 2), stride: Pair = (2, 2), padding: Pair = (0, 0), **_: Any) -> tuple:
    if len(x) != 4:
        raise ShapeError("pool", "pooling needs x of shape (N, C, H, W)", [x])
    if padding[0] * 2 > kernel_size[0] or padding[1] * 2 > kernel_size[1]:
        raise ShapeError("pool", f"padding {padding} must be at most half the kernel size {kernel_size}", [x])
    oh = _out_size("pool", x[2], kernel_size[0], stride[0], padding[0], 1, [x])
    ow = _out_size("pool", x[3], kernel_size[1], stride[1], padding[1], 1, [x])
    return (x[0], x[1], oh, ow)


def _pool_windows(x: np.ndarray, k: Pair, s: Pair, p: Pair, fill: float) -> tuple[np.ndarray, int, int]:
    _, _, oh, ow = _pool_infer(x.shape, k, s, p)
    return _windows(_pad(x, p, fill), k[0], k[1], oh, ow, s, (1, 1)), oh, ow


def _argmax_taps(x: np.ndarray, k: Pair, s: Pair, p: Pair) -> tuple[np.ndarray, int, int]:
    """The winning tap (a * KW + b) of every window: its first maximum, as in PyTorch.

    The padding counts as -inf, so it can never beat a real element; but when every real
    element of a window is -inf too (a masked region), a plain argmax would pick the first
    tap, which may lie in the padding: the gradient would go to a place that is cropped
    away, and be lost. PyTorch starts each window's search at its first *real* element, so
    such a window sends its gradient there. We do the same (and so does shaders/pool.wgsl).
    """
    win, oh, ow = _pool_windows(x, k, s, p, -np.inf)
    flat = win.reshape(win.shape[:4] + (k[0] * k[1],))
    idx = np.argmax(flat, axis=-1)  # first maximum wins (a NaN counts as the maximum)
    if p != (0, 0) and idx.size:
        # first real tap of window (i, j): row max(0, p - i s), column max(0, p - j s)
        a0 = np.maximum(0, p[0] - np.arange(oh) * s[0])
        b0 = np.maximum(0, p[1] - np.arange(ow) * s[1])
        first_real = a0[:, None] * k[1] + b0[None, :]
        idx = np.where(flat.max(axis=-1) == -np.inf, first_real, idx)
    return idx, oh, ow


def _pool_attrs(c: VjpContext) -> dict[str, Any]:
    return {k: c.attrs[k] for k in ("kernel_size", "stride", "padding")}


def _pool_batch(c: BatchContext, args: tuple, dims: tuple):
    """Pooling and its gradients read and write images only: B batches of N images are B * N images."""
    attrs = dict(c.attrs)
    if "x_shape" in attrs:
        attrs["x_shape"] = (c.size * attrs["x_shape"][0],) + tuple(attrs["x_shape"][1:])
    return _unmerge(c, apply(c.op, *(_images(c, x, d) for x, d in zip(args, dims)), **attrs)), 0


def _pool(name: str, x: Any, kernel_size: int | Pair, stride: int | Pair | None, padding: int | Pair) -> Tensor:
    k = _pair(name, "kernel_size", kernel_size, 1)
    s = k if stride is None else _pair(name, "stride", stride, 1)
    return apply(name, x, kernel_size=k, stride=s, padding=_pair(name, "padding", padding, 0))


_POOL_ATTRS = {"kernel_size": (2, 2), "stride": (2, 2), "padding": (0, 0)}
_SAMPLE_POOL = {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1)}   # overlapping, padded windows


# --- max_pool2d -----------------------------------------------------------------------------------
def _max_pool_kernel(x: np.ndarray, kernel_size: Pair = (2, 2), stride: Pair = (2, 2),
                     padding: Pair = (0, 0)) -> np.ndarray:
    win, _, _ = _pool_windows(x, kernel_size, stride, padding, -np.inf)
    return np.ascontiguousarray(win.max(axis=(-2, -1)), dtype=x.dtype)


register(OpSpec(
    name="max_pool2d", category="convolution", arity=1, infer=_pool_infer, numpy=_max_pool_kernel,
    vjp=lambda c, g: (apply("max_pool2d_grad", c.inputs[0], g, **_pool_attrs(c)),),
    batch=_pool_batch, attrs=dict(_POOL_ATTRS),
    doc="maximum over each window; the gradient goes to the (first) maximum",
    gpu=GPU(kernel="pool"),
    tools=Tools(sample=lambda b: max_pool2d(b.distinct((1, 2, 4, 4)), 2)),   # no ties: one winner per window
))


def max_pool2d(x: Any, kernel_size: int | Pair, stride: int | Pair | None = None, padding: int | Pair = 0) -> Tensor:
    """Max over windows, like ``F.max_pool2d`` (stride defaults to the kernel size)."""
    return _pool("max_pool2d", x, kernel_size, stride, padding)


# --- max_pool2d_grad: the gradient goes to the winner ---------------------------------------------
def _max_pool_grad_kernel(x: np.ndarray, g: np.ndarray, kernel_size: Pair = (2, 2), stride: Pair = (2, 2),
                          padding: Pair = (0, 0)) -> np.ndarray:
    idx, oh, ow = _argmax_taps(x, kernel_size, stride, padding)
    n, c, h, w = x.shape
    dxp = np.zeros((n, c, h + 2 * padding[0], w + 2 * padding[1]), dtype=g.dtype)
    for a in range(kernel_size[0]):
        for b in range(kernel_size[1]):
            dxp[_tap(a, b, oh, ow, stride, (1, 1))] += np.where(idx == a * kernel_size[1] + b, g, 0)
    return dxp[:, :, padding[0]: padding[0] + h, padding[1]: padding[1] + w].copy()


register(OpSpec(
    name="max_pool2d_grad", category="gradient", arity=2, infer=lambda x, g, **_: x, numpy=_max_pool_grad_kernel,
    vjp=lambda c, u: (None, apply("max_pool2d_gather", c.inputs[0], u, **_pool_attrs(c))),
    batch=_pool_batch, diff_inputs=(False, True), attrs=dict(_POOL_ATTRS),
    doc="routes each window's gradient to the position of its maximum in x (zeros elsewhere)",
    gpu=GPU(kernel="pool"),
    tools=Tools(sample=lambda b: apply("max_pool2d_grad", b.distinct((1, 2, 5, 5), diff=False), b.x((1, 2, 3, 3)),
                                       **_SAMPLE_POOL)),
))


# --- max_pool2d_gather: the transpose of max_pool2d_grad ------------------------------------------
def _max_pool_gather_kernel(x: np.ndarray, u: np.ndarray, kernel_size: Pair = (2, 2), stride: Pair = (2, 2),
                            padding: Pair = (0, 0)) -> np.ndarray:
    idx, oh, ow = _argmax_taps(x, kernel_size, stride, padding)
    up = _pad(u, padding)
    out = np.zeros(idx.shape, dtype=u.dtype)
    for a in range(kernel_size[0]):
        for b in range(kernel_size[1]):
            out += np.where(idx == a * kernel_size[1] + b, up[_tap(a, b, oh, ow, stride, (1, 1))], 0)
    return out


register(OpSpec(
    name="max_pool2d_gather", category="gradient", arity=2, infer=lambda x, u, **kw: _pool_infer(x, **kw),
    numpy=_max_pool_gather_kernel,
    vjp=lambda c, g: (None, apply("max_pool2d_grad", c.inputs[0], g, **_pool_attrs(c))),
    batch=_pool_batch, diff_inputs=(False, True), attrs=dict(_POOL_ATTRS),
    doc="reads u at the position of each window's maximum in x (the transpose of max_pool2d_grad)",
    gpu=GPU(kernel="pool"),
    tools=Tools(sample=lambda b: apply("max_pool2d_gather", b.distinct((1, 2, 5, 5), diff=False), b.x((1, 2, 5, 5)),
                                       **_SAMPLE_POOL)),
))


# --- avg_pool2d -----------------------------------------------------------------------------------
def _avg_pool_kernel(x: np.ndarray, kernel_size: Pair = (2, 2), stride: Pair = (2, 2),
                     padding: Pair = (0, 0)) -> np.ndarray:
    win, _, _ = _pool_windows(x, kernel_size, stride, padding, 0.0)
    return np.ascontiguousarray(win.mean(axis=(-2, -1)), dtype=x.dtype)


register(OpSpec(
    name="avg_pool2d", category="convolution", arity=1, infer=_pool_infer, numpy=_avg_pool_kernel,
    vjp=lambda c, g: (apply("avg_pool2d_grad", g, x_shape=c.inputs[0].shape, **_pool_attrs(c)),),
    batch=_pool_batch, attrs=dict(_POOL_ATTRS),
    doc="mean over each window (zero padding counts, count_include_pad=True)",
    gpu=GPU(kernel="pool"), tools=Tools(sample=lambda b: avg_pool2d(b.x((1, 2, 4, 4)), 2)),
))


def avg_pool2d(x: Any, kernel_size: int | Pair, stride: int | Pair | None = None, padding: int | Pair = 0) -> Tensor:
    """Mean over windows, like ``F.avg_pool2d`` (stride defaults to the kernel size)."""
    return _pool("avg_pool2d", x, kernel_size, stride, padding)


# --- avg_pool2d_grad ------------------------------------------------------------------------------
def _avg_pool_grad_kernel(g: np.ndarray, x_shape: tuple = (), kernel_size: Pair = (2, 2), stride: Pair = (2, 2),
                          padding: Pair = (0, 0)) -> np.ndarray:
    n, c, h, w = x_shape
    _, _, oh, ow = g.shape
    dxp = np.zeros((n, c, h + 2 * padding[0], w + 2 * padding[1]), dtype=g.dtype)
    share = g / (kernel_size[0] * kernel_size[1])
    for a in range(kernel_size[0]):
        for b in range(kernel_size[1]):
            dxp[_tap(a, b, oh, ow, stride, (1, 1))] += share
    return dxp[:, :, padding[0]: padding[0] + h, padding[1]: padding[1] + w].copy()


register(OpSpec(
    name="avg_pool2d_grad", category="gradient", arity=1, infer=lambda g, x_shape=(), **_: tuple(x_shape),
    numpy=_avg_pool_grad_kernel, vjp=lambda c, u: (apply("avg_pool2d", u, **_pool_attrs(c)),),
    batch=_pool_batch, attrs={**_POOL_ATTRS, "x_shape": ()},
    doc="spreads each window's gradient evenly over the window",
    gpu=GPU(kernel="pool"),
    tools=Tools(sample=lambda b: apply("avg_pool2d_grad", b.x((1, 2, 3, 3)), x_shape=(1, 2, 5, 5), **_SAMPLE_POOL)),
))
