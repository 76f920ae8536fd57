"""Matrix multiplication, numpy's ``matmul`` rules: 1-D, 2-D, batched, batch-broadcast.

For C = A @ B with A (n, k) and B (k, m):

    dA = dC @ B^T        (n, m) @ (m, k) -> (n, k)
    dB = A^T @ dC        (k, n) @ (n, m) -> (k, m)

Batched inputs (..., n, k) follow the same rule per batch; when one side's batch axes
were broadcast (one weight matrix for a whole batch), its gradient is summed over them
with ``sum_to`` — the same un-broadcast as for ``add``. 1-D inputs are treated as a row
(left) or column (right) vector whose extra axis is removed from the result.

Batching (``at.vmap``) needs no new kernel: matmul is already batched. A batch of vectors
times one matrix is a matrix times that matrix (the classic one), and in general each operand
gets its batch axis first and becomes one more batch axis of numpy's matmul.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..shapes import ShapeError, broadcast_shapes
from ..tensor import Tensor
from . import shape as _shape
from .registry import GPU, BatchContext, OpSpec, Tools, VjpContext, apply, register

__all__ = ["matmul"]


def _matmul_infer(a: tuple, b: tuple, **_: Any) -> tuple:
    if not a or not b:
        raise ShapeError("matmul", "matmul needs at least 1-D operands (use mul for scalars)", [a, b])
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ShapeError(
            "matmul", f"inner dimensions differ: {a} @ {b} needs a's last axis ({a2[-1]}) "
                      f"to equal b's {'only' if len(b) == 1 else 'second-to-last'} axis ({b2[-2]})",
            [a, b], hint="check which operand needs transposing (x.T) or the layer's in/out sizes",
        )
    try:
        batch = broadcast_shapes("matmul", a2[:-2], b2[:-2])
    except ShapeError as e:  # name the operands, not just their batch parts
        raise ShapeError("matmul", f"batch axes {a2[:-2]} and {b2[:-2]} do not broadcast ({e.detail})", [a, b],
                         hint="batch axes follow numpy broadcasting: sizes must match or be 1") from None
    out = batch + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def _swap_last2(t: Tensor) -> Tensor:
    axes = tuple(range(t.ndim - 2)) + (t.ndim - 1, t.ndim - 2)
    return _shape.transpose(t, axes)


def _matmul_vjp(c: VjpContext, g: Tensor):
    a, b = c.inputs
    # Work with 2-D-or-more views; 1-D vectors become a row (a) or a column (b).
    a2 = _shape.reshape(a, (1, a.shape[0])) if a.ndim == 1 else a
    b2 = _shape.reshape(b, (b.shape[0], 1)) if b.ndim == 1 else b
    out2 = broadcast_shapes("matmul", a2.shape[:-2], b2.shape[:-2]) + (a2.shape[-2], b2.shape[-1])
    g2 = _shape.reshape(g, out2) if g.shape != out2 else g
    da = db = None
    if c.needs[0]:
        da = _shape.reshape(_shape.sum_to(matmul(g2, _swap_last2(b2)), a2.shape), a.shape)
    if c.needs[1]:
        db = _shape.reshape(_shape.sum_to(matmul(_swap_last2(a2), g2), b2.shape), b.shape)
    return da, db


def _matmul_jvp(c: VjpContext, t):
    a, b = c.inputs
    ta, tb = t
    parts = [matmul(ta, b) if ta is not None else None, matmul(a, tb) if tb is not None else None]
    parts = [p for p in parts if p is not None]
    return None if not parts else parts[0] if len(parts) == 1 else parts[0] + parts[1]


def _matmul_batch(c: BatchContext, args: tuple, dims: tuple):
    """A batch of products as ONE matmul node.

    Two cases are a plain product already: B vectors (rows of a (B, k)) times one (k, m) matrix is
    (B, k) @ (k, m); one (n, k) matrix times B vectors is (n, k) @ (k, B), the batch in axis 1.
    Otherwise every operand is made at least 2-D for one example (a vector is a row on the left,
    a column on the right, as numpy does), the batched ones get the batch axis first and size-1
    axes after it up to the other operand's rank (numpy broadcasts matmul's batch axes from the
    right), the product runs once, and a reshape drops the axes the vectors added.
    """
    (a, b), (da, db) = args, dims
    sa, sb = c.in_shapes
    if db is None and len(sa) == 1 and len(sb) == 2:
        return matmul(_shape.moveaxis(a, da, 0), b), 0
    if da is None and len(sa) == 2 and len(sb) == 1:
        return matmul(a, _shape.moveaxis(b, db, 1)), 1
    a2 = (1,) + sa if len(sa) == 1 else sa
    b2 = sb + (1,) if len(sb) == 1 else sb
    rank = max(len(a2), len(b2))

    def ready(x: Tensor, d: int | None, two_d: tuple) -> Tensor:
        if d is None:
            return _shape.reshape(x, two_d)
        x = _shape.moveaxis(x, d, 0)
        return _shape.reshape(x, (c.size,) + (1,) * (rank - len(two_d)) + two_d)

    return _shape.reshape(matmul(ready(a, da, a2), ready(b, db, b2)), (c.size,) + c.out_shape), 0


register(OpSpec(
    name="matmul", category="linalg", arity=2, infer=_matmul_infer, numpy=np.matmul, vjp=_matmul_vjp,
    jvp=_matmul_jvp, batch=_matmul_batch,
    doc="matrix product with numpy's 1-D / batched / broadcast rules",
    gpu=GPU(kernel="matmul"), tools=Tools(sample=lambda b: matmul(b.x((2, 2, 3)), b.x((3, 4)))),
))


def matmul(a: Any, b: Any) -> Tensor:
    """``a @ b`` with numpy's rules (1-D vectors, batches, broadcast batch axes)."""
    return apply("matmul", a, b)
