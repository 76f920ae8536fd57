"""Neural-network ops that are worth having as single nodes: softmax, log_softmax,
layer_norm and embedding.

Each could be written from smaller ops, and ``layer_norm_composite`` does exactly that
for comparison. A fused node is easier to read in a big graph, its kernel can be made
numerically stable (softmax subtracts the max first), and its hand-derived backward rule
is much smaller than the backward graph of its pieces.

Batching rules (``at.vmap``): softmax and log_softmax work along one axis, shifted past the
batch axis; layer_norm normalises the last axis, so a batch axis in front changes nothing (a
batched weight or bias is applied as a broadcast multiply-add instead); embedding's ids may carry
the batch as they are, and a batch of tables is one wide table (see :func:`_embedding_batch`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..graph import user_source
from ..shapes import ShapeError, single_axis
from ..tensor import Tensor
from . import elementwise as _ew
from . import reduce as _red
from . import shape as _shape
from .registry import GPU, BatchContext, OpSpec, Tools, VjpContext, apply, as_tensor, register

__all__ = ["softmax", "log_softmax", "layer_norm", "layer_norm_composite", "embedding", "IdsOutOfRange"]


# --- softmax / log_softmax: along one axis ------------------------------------------------------
def _along_one_axis(op: str):
    """The shape rule of an op along one axis: the shape stays, the axis must exist."""

    def infer(s: tuple, axis: Any = -1, **_: Any) -> tuple:
        single_axis(op, axis, len(s), shape=s)  # also for nodes built by apply() or from JSON
        return s

    return infer


def _along_one_axis_batch(c: BatchContext, args: tuple, dims: tuple):
    """softmax / log_softmax of each example along ``axis``: the same op along that axis of the batch."""
    (x,), (d,) = args, dims
    a = int(c.attrs["axis"]) % len(c.in_shapes[0])
    return apply(c.op, x, **{**c.attrs, "axis": a + (a >= d)}), d


# --- softmax ----------------------------------------------------------------------------------
# np.maximum.reduce / np.add.reduce are np.max / np.sum without their Python wrappers, and
# the temporaries are reused in place (out=): the same arithmetic, fewer microseconds.
def _softmax_kernel(x: np.ndarray, axis: int = -1) -> np.ndarray:
    shifted = np.subtract(x, np.maximum.reduce(x, axis=axis, keepdims=True))  # max term is e^0 = 1: no overflow
    e = np.exp(shifted, out=shifted) if isinstance(shifted, np.ndarray) else np.exp(shifted)
    return e / np.add.reduce(e, axis=axis, keepdims=True)


def _softmax_vjp(c: VjpContext, g: Tensor):
    # dx = y * (g - sum(g * y))   — the Jacobian diag(y) - y y^T applied to g
    y = c.out
    return (y * (g - _red.sum(g * y, axis=c.attrs["axis"], keepdims=True)),)


def _softmax_jvp(c: VjpContext, t):
    if t[0] is None:
        return None
    y = c.out
    return y * (t[0] - _red.sum(t[0] * y, axis=c.attrs["axis"], keepdims=True))


register(OpSpec(
    name="softmax", category="activation", arity=1, infer=_along_one_axis("softmax"), numpy=_softmax_kernel,
    vjp=_softmax_vjp, jvp=_softmax_jvp, batch=_along_one_axis_batch, attrs={"axis": -1},
    doc="exp(x) / sum(exp(x)) along an axis, max-shifted",
    gpu=GPU(kernel="softmax"), tools=Tools(sample=lambda b: softmax(b.x((2, 4), lo=-3.0, hi=3.0), axis=-1)),
))


def softmax(x: Any, axis: int = -1) -> Tensor:
    """Softmax along ``axis`` (default the last), computed stably."""
    x = as_tensor(x, op="softmax")
    return apply("softmax", x, axis=single_axis("softmax", axis, x.ndim, user_source(), x.shape))


# --- log_softmax ------------------------------------------------------------------------------
def _log_softmax_kernel(x: np.ndarray, axis: int = -1) -> np.ndarray:
    shifted = np.subtract(x, np.maximum.reduce(x, axis=axis, keepdims=True))
    log_sum = np.log(np.add.reduce(np.exp(shifted), axis=axis, keepdims=True))
    if isinstance(shifted, np.ndarray):
        return np.subtract(shifted, log_sum, out=shifted)
    return shifted - log_sum


def _log_softmax_vjp(c: VjpContext, g: Tensor):
    # out = x - logsumexp(x)  ->  dx = g - softmax(x) * sum(g),  softmax(x) = exp(out)
    return (g - _ew.exp(c.out) * _red.sum(g, axis=c.attrs["axis"], keepdims=True),)


def _log_softmax_jvp(c: VjpContext, t):
    if t[0] is None:
        return None
    return t[0] - _red.sum(_ew.exp(c.out) * t[0], axis=c.attrs["axis"], keepdims=True)


register(OpSpec(
    name="log_softmax", category="activation", arity=1, infer=_along_one_axis("log_softmax"),
    numpy=_log_softmax_kernel, vjp=_log_softmax_vjp, jvp=_log_softmax_jvp, batch=_along_one_axis_batch,
    attrs={"axis": -1},
    doc="x - logsumexp(x) along an axis, max-shifted",
    gpu=GPU(kernel="softmax"), tools=Tools(sample=lambda b: log_softmax(b.x((2, 3, 4), lo=-3.0, hi=3.0), axis=1)),
))


def log_softmax(x: Any, axis: int = -1) -> Tensor:
    """log(softmax(x)) along ``axis``, computed stably (never log of 0)."""
    x = as_tensor(x, op="log_softmax")
    return apply("log_softmax", x, axis=single_axis("log_softmax", axis, x.ndim, user_source(), x.shape))


# --- layer norm (over the last axis) ----------------------------------------------------------
def _layer_norm_infer(x: tuple, w: tuple, b: tuple, eps: float = 1e-5, **_: Any) -> tuple:
    if not x:
        raise ShapeError("layer_norm", "layer_norm needs at least a 1-D input", [x, w, b])
    if w != x[-1:] or b != x[-1:]:
        raise ShapeError("layer_norm", f"weight and bias must have shape {x[-1:]} (the last axis of x)", [x, w, b])
    return x


def _layer_norm_kernel(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    mu = np.mean(x, axis=-1, keepdims=True)
    xc = x - mu
    var = np.mean(xc * xc, axis=-1, keepdims=True)
    return xc / np.sqrt(var + eps) * w + b


def _normalised(x: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    """(x_hat, 1/sigma) over the last axis, as graph ops."""
    xc = x - _red.mean(x, axis=-1, keepdims=True)
    rstd = 1.0 / _ew.sqrt(_red.mean(xc * xc, axis=-1, keepdims=True) + eps)
    return xc * rstd, rstd


def _layer_norm_vjp(c: VjpContext, g: Tensor):
    x, w, b = c.inputs
    need_x, need_w, need_b = c.needs
    xhat, rstd = _normalised(x, c.attrs["eps"])
    dx = dw = db = None
    if need_x:
        # dx = (1/sigma) * (gw - mean(gw) - xhat * mean(gw * xhat)),  gw = g * w
        gw = g * w
        dx = rstd * (gw - _red.mean(gw, axis=-1, keepdims=True) - xhat * _red.mean(gw * xhat, axis=-1, keepdims=True))
    if need_w:
        dw = _shape.sum_to(g * xhat, w.shape)
    if need_b:
        db = _shape.sum_to(g, b.shape)
    return dx, dw, db


# --- layer_norm_dx: the x-gradient of layer_norm as one op --------------------------------------
def _layer_norm_dx_infer(g: tuple, x: tuple, w: tuple, eps: float = 1e-5, **_: Any) -> tuple:
    if not x or g != x or w != x[-1:]:
        raise ShapeError("layer_norm_dx", f"g must have x's shape and w the shape {x[-1:]} of x's last axis",
                         [g, x, w])
    return x


def _layer_norm_dx_kernel(g: np.ndarray, x: np.ndarray, w: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    xc = x - np.mean(x, axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(np.mean(xc * xc, axis=-1, keepdims=True) + eps)
    xhat = xc * rstd
    a = g * w
    return rstd * (a - np.mean(a, axis=-1, keepdims=True) - xhat * np.mean(a * xhat, axis=-1, keepdims=True))


def _layer_norm_dx_vjp(c: VjpContext, ybar: Tensor):
    """The rule of the rule (for grad of grad). Per row, with r = 1/sigma, a = g * w, m = mean(a * x_hat)
    and y = dx:  a_bar = r (ybar - mean(ybar) - x_hat mean(ybar x_hat)), so g_bar = a_bar * w and
    w_bar = sum_to(a_bar * g);  x_hat_bar = -r (m ybar + a mean(ybar x_hat)),  and x_bar is layer norm's
    own rule applied to x_hat_bar, minus r mean(ybar y) x_hat (y depends on x through r as well)."""
    g, x, w = c.inputs
    need_g, need_x, need_w = c.needs
    xhat, rstd = _normalised(x, c.attrs["eps"])

    def mean(t: Tensor) -> Tensor:
        return _red.mean(t, axis=-1, keepdims=True)

    ybar_xhat = mean(ybar * xhat)
    dg = dx = dw = None
    if need_g or need_w:
        abar = rstd * (ybar - mean(ybar) - xhat * ybar_xhat)
        dg = abar * w if need_g else None
        dw = _shape.sum_to(abar * g, w.shape) if need_w else None
    if need_x:
        a = g * w
        xhat_bar = -rstd * (mean(a * xhat) * ybar + a * ybar_xhat)
        dx = rstd * (xhat_bar - mean(xhat_bar) - xhat * mean(xhat_bar * xhat)) - rstd * mean(ybar * c.out) * xhat
    return dg, dx, dw


def _row_constant(c: BatchContext, like: Tensor, value: float) -> Tensor:
    from .leaves import constant

    return constant(np.full(c.in_shapes[0][-1:], value), graph=like.graph)


def _layer_norm_batch(c: BatchContext, args: tuple, dims: tuple):
    """layer_norm works along the last axis, so a batch axis in front is one more row axis.

    A batched weight or bias (one per example) cannot be the op's (D,) weight: the rows are
    normalised with weight 1 and bias 0, then scaled and shifted by a broadcast multiply-add.
    """
    (x, w, b), (dx, dw, db) = args, dims
    x = c.moved(x, dx)
    if dw is None and db is None:
        return apply("layer_norm", x, w, b, **c.attrs), 0
    rank = len(c.out_shape)
    xhat = apply("layer_norm", x, _row_constant(c, x, 1.0), _row_constant(c, x, 0.0), **c.attrs)
    return xhat * c.aligned(w, dw, rank) + c.aligned(b, db, rank), 0


def _layer_norm_dx_batch(c: BatchContext, args: tuple, dims: tuple):
    """As layer_norm's: rows in front. The kernel only ever uses g * w, so a batched w is folded into g."""
    (g, x, w), (dg, dx, dw) = args, dims
    g, x = c.moved(g, dg), c.moved(x, dx)
    if dw is None:
        return apply("layer_norm_dx", g, x, w, **c.attrs), 0
    return apply("layer_norm_dx", g * c.aligned(w, dw, len(c.out_shape)), x, _row_constant(c, x, 1.0),
                 **c.attrs), 0


register(OpSpec(
    name="layer_norm_dx", category="gradient", arity=3, infer=_layer_norm_dx_infer, numpy=_layer_norm_dx_kernel,
    vjp=_layer_norm_dx_vjp, batch=_layer_norm_dx_batch, attrs={"eps": 1e-5},
    doc="the gradient of layer_norm with respect to x, one row at a time (g is the output's gradient)",
    gpu=GPU(kernel="layer_norm"),
    tools=Tools(sample=lambda b: apply("layer_norm_dx", b.x((3, 5)), b.x((3, 5)), b.x((5,)))),
))


register(OpSpec(
    name="layer_norm", category="normalisation", arity=3, infer=_layer_norm_infer, numpy=_layer_norm_kernel,
    vjp=_layer_norm_vjp, batch=_layer_norm_batch, attrs={"eps": 1e-5},
    doc="normalise the last axis to mean 0, variance 1, then scale (weight) and shift (bias)",
    gpu=GPU(kernel="layer_norm"), tools=Tools(sample=lambda b: layer_norm(b.x((2, 4)), b.x((4,)), b.x((4,)))),
))


def layer_norm(x: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> Tensor:
    """Layer normalisation over the last axis (``F.layer_norm(x, x.shape[-1:], weight, bias, eps)``).

    A fused op with its own backward rule; ``layer_norm_composite`` builds the same
    function from mean/sub/sqrt/div so the two can be compared.
    """
    x = as_tensor(x, op="layer_norm")
    d = x.shape[-1:] if x.shape else ()
    weight = weight if weight is not None else np.ones(d)
    bias = bias if bias is not None else np.zeros(d)
    return apply("layer_norm", x, weight, bias, eps=float(eps))


def layer_norm_composite(x: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> Tensor:
    """The same function as :func:`layer_norm`, built from small ops (a bigger graph)."""
    x = as_tensor(x, op="layer_norm_composite")
    xhat, _ = _normalised(x, eps)
    out = xhat
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


# --- embedding: a table lookup whose gradient is a scatter-add -----------------------------------
def _embedding_infer(ids: tuple, table: tuple, **_: Any) -> tuple:
    if len(table) != 2:
        raise ShapeError("embedding", f"the table must be 2-D (num_embeddings, dim), got {table}", [ids, table])
    return ids + table[1:]


def _embedding_kernel(ids: np.ndarray, table: np.ndarray) -> np.ndarray:
    _check_ids(ids, table.shape[0])
    return table[ids]


class IdsOutOfRange(IndexError):
    """Row ids outside ``[0, bound)``: the kernel's finding, which the backends turn into an error that
    names where the ids came from (``backends.ids.ids_error``). Holds the first few bad ids and where
    they are."""

    def __init__(self, bound: int, rows: str, count: int, total: int, first: list[tuple[int, tuple]]) -> None:
        self.bound, self.rows, self.count, self.total, self.first = bound, rows, count, total, first
        bad = ", ".join(f"{v} at {at}" for v, at in first)
        super().__init__(f"ids must be in [0, {bound}) ({rows}); {count} of {total} are not: {bad}")

    @classmethod
    def check(cls, ids: np.ndarray, n: int, rows: str = "") -> None:
        """Raise when some id of ``ids`` is outside ``[0, n)``."""
        if ids.size and (ids.min() < 0 or ids.max() >= n):
            where = np.argwhere((ids < 0) | (ids >= n))
            first = [(int(ids[tuple(at)]), tuple(int(i) for i in at)) for at in where[:5]]
            raise cls(n, rows or f"the table has {n} rows", len(where), int(ids.size), first)


def _check_ids(ids: np.ndarray, n: int) -> None:
    IdsOutOfRange.check(ids, n)


def _embedding_grad_kernel(ids: np.ndarray, g: np.ndarray, num_embeddings: int = 0) -> np.ndarray:
    _check_ids(ids, num_embeddings)
    out = np.zeros((num_embeddings,) + g.shape[ids.ndim:], dtype=g.dtype)
    # add.at, not out[ids] = g: a repeated id must receive the SUM of its rows' gradients
    np.add.at(out, ids, g)
    return out


def _embedding_grad_infer(ids: tuple, g: tuple, num_embeddings: int = 0, **_: Any) -> tuple:
    if g[: len(ids)] != ids:
        raise ShapeError("embedding_grad", f"gradient {g} does not start with the ids' shape {ids}", [ids, g])
    return (num_embeddings,) + g[len(ids):]


def _eye(c: BatchContext, like: Tensor, shape: tuple) -> Tensor:
    """The B x B identity, reshaped to ``shape`` (a mask that keeps example b's part of example b's row)."""
    from .leaves import constant

    return constant(np.eye(c.size).reshape(shape), name="eye (vmap)", graph=like.graph)


def _embedding_batch(c: BatchContext, args: tuple, dims: tuple):
    """Row lookups for a batch, with no loop over the examples.

    * Batched ids, one table: the lookup takes ids of any shape, so it runs as it is; the output's
      batch axis is the ids' (the ids' axes come first in the output).
    * A table per example (B, V, D): side by side they are one wide table (V, B * D), whose row v
      holds row v of every example's table. Looking up the ids in it gives every example's rows;
      with batched ids too, example b keeps only its own part (a mask of the identity and a sum: B x B
      work per row, still one node each).
    """
    (ids, table), (di, dt) = args, dims
    if dt is None:
        return apply("embedding", ids, table), di
    rows, dim = c.in_shapes[1]
    wide = _shape.reshape(c.moved(table, dt, 1), (rows, c.size * dim))
    if di is None:
        looked = apply("embedding", ids, wide)
        return _shape.reshape(looked, ids.shape + (c.size, dim)), ids.ndim
    ids = c.moved(ids, di)
    looked = _shape.reshape(apply("embedding", ids, wide), ids.shape + (c.size, dim))
    mask = _eye(c, looked, (c.size,) + (1,) * (ids.ndim - 1) + (c.size, 1))
    return _red.sum(looked * mask, axis=ids.ndim), 0


def _embedding_grad_batch(c: BatchContext, args: tuple, dims: tuple):
    """Scatter-adds for a batch: one table gradient per example, (V, B, ...) with the batch in axis 1.

    * Ids the same for every example: the batch of gradients g moves behind the ids' axes, where it is
      one more feature axis: each id adds a (B, ...) block into its row.
    * Batched ids: example b's rows must reach only example b's table. g is spread over a one-hot axis
      of the examples (g[b, ..., c, :] is g[b, ..., :] where c == b, else 0), which is a feature axis
      again; the ids, batched, are just more ids.
    """
    (ids, g), (di, dg) = args, dims
    n_ids = len(c.in_shapes[0])
    v = c.attrs["num_embeddings"]
    if di is None:
        return apply("embedding_grad", ids, _shape.moveaxis(g, dg, n_ids), num_embeddings=v), 1
    ids, g = c.moved(ids, di), c.moved(g, dg)
    feature = g.shape[1 + n_ids:]
    spread = _shape.reshape(g, g.shape[: 1 + n_ids] + (1,) + feature)
    mask = _eye(c, g, (c.size,) + (1,) * n_ids + (c.size,) + (1,) * len(feature))
    return apply("embedding_grad", ids, spread * mask, num_embeddings=v), 1


_SAMPLE_IDS = [[0, 2, 0], [4, 2, 2]]   # repeated ids: their rows' gradients must add up
register(OpSpec(
    name="embedding", category="shape", arity=2, infer=_embedding_infer, numpy=_embedding_kernel,
    vjp=lambda c, g: (None, apply("embedding_grad", c.inputs[0], g, num_embeddings=c.inputs[1].shape[0])),
    jvp=lambda c, t: None if t[1] is None else embedding(c.inputs[0], t[1]), batch=_embedding_batch,
    diff_inputs=(False, True), input_kinds=("int", "float"),
    doc="row lookup: out[..., :] = table[ids[...], :]",
    gpu=GPU(kernel="gather", index_bound=lambda shapes, **_: shapes[1][0]),   # ids pick rows 0 .. rows - 1
    tools=Tools(sample=lambda b: embedding(b.ids((2, 3), _SAMPLE_IDS), b.x((5, 3)))),
))
register(OpSpec(
    name="embedding_grad", category="gradient", arity=2, infer=_embedding_grad_infer, numpy=_embedding_grad_kernel,
    vjp=lambda c, g: (None, embedding(c.inputs[0], g)),
    jvp=lambda c, t: None if t[1] is None else apply("embedding_grad", c.inputs[0], t[1], **c.attrs),
    batch=_embedding_grad_batch,
    diff_inputs=(False, True), input_kinds=("int", "float"), attrs={"num_embeddings": 0},
    doc="scatter-add of row gradients into a table-shaped zero tensor (repeated ids add up)",
    gpu=GPU(kernel="gather", index_bound=lambda shapes, num_embeddings=0, **_: num_embeddings),
    tools=Tools(sample=lambda b: apply("embedding_grad", b.ids((2, 3), _SAMPLE_IDS), b.x((2, 3, 2)),
                                       num_embeddings=5)),
))


def embedding(ids: Any, table: Any) -> Tensor:
    """Look up rows: ``table[ids]`` for integer ``ids`` (``F.embedding(ids, table)``)."""
    return apply("embedding", ids, table)
