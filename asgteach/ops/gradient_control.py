"""Gradient control: ops that change what autograd sees, not what the forward pass computes.

``stop_gradient(x)`` is the identity on values and a wall for gradients. Its record says so
with the registry's own mark, ``zero_gradient``: autograd's path search (``_on_paths``) and
forward mode (``jvp``) read that mark and never cross the node, so

* ``at.grad`` sends nothing through it: an x reached only through a stop_gradient gets exact
  zeros of its shape (the "y does not depend on x" answer), not an error and not a ``0 * g``
  that would turn an infinite g into NaN;
* ``at.jvp`` gives it no tangent: what depends on x only through the wall gets a zero tangent;
* grad of grad (``at.hvp``) is zero through it too: a first gradient that reads the stopped
  value reads it as the constant it is for autograd.

``greater`` and ``sign`` carry the same mark for another reason: their derivative *is* 0
wherever it exists. stop_gradient's derivative, by calculus, is 1; the 0 is a decision (truncated
BPTT, target networks, straight-through estimators). So a finite difference of the forward
graph sees through the wall, and the check samples (``asgteach check``, the tests) put one only
where both agree: on a value that is already constant to first order.

Everything else treats it as the elementwise identity it is: the numpy kernel returns its input
(the numpy plan counts a non-ufunc kernel's result as a possible view of its inputs, so no
buffer is written in place under it), the GPU formula is ``x`` (a chain fuses it away at no
cost), and constant folding may compute it once like any op that reads only constants: autograd
has already run on the graph before any backend sees it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tensor import Tensor
from .elementwise import batch_elementwise
from .registry import GPU, OpSpec, Tools, apply, register

__all__ = ["stop_gradient"]

#: why no gradient crosses it (the registry's ``zero_gradient`` reason; the NaN and check messages quote it)
_WALL = ("a wall for gradients by design: autograd treats its output as a constant, so for gradients its "
         "derivative is 0 (by decision, not by calculus: the forward pass is the identity)")


def _identity(x: np.ndarray) -> np.ndarray:
    """The forward pass: the value itself, same array, same dtype (no copy: it is not written in place)."""
    return x


def _sample(b: Any) -> Tensor:
    """stop_gradient of a binarised value, sign(x) with |x| >= 0.2: the quantiser a straight-through estimator wraps.

    Its input is constant to first order, so a finite difference of the forward graph (0) and the
    wall's gradient (0) agree: gradcheck and the jvp tests can check it. On an input that varies with x
    they cannot: the finite difference sees the identity, the wall says 0, and that is the point of the op.
    """
    from .elementwise import sign

    return stop_gradient(sign(b.x(away=0.2)))


register(OpSpec(
    name="stop_gradient", category="gradient", arity=1, infer=lambda s, **_: s, numpy=_identity,
    vjp=lambda c, g: (None,), zero_gradient=_WALL,
    doc="x on the forward pass; no gradient flows back through it",
    gpu=GPU(expr="x"), tools=Tools(sample=_sample),
    batch=batch_elementwise,      # elementwise: the batch axis passes through
))


def stop_gradient(x: Any) -> Tensor:
    """``x`` itself on the forward pass; for ``at.grad`` and ``at.jvp``, a constant.

    ``at.grad(at.sum(x * at.stop_gradient(x)), x)`` is ``x``, not ``2 x``: the second factor is a
    constant to autograd. What reaches x only through it gets zeros. PyTorch's ``x.detach()``,
    JAX's ``lax.stop_gradient``; here also ``x.detach()``.
    """
    return apply("stop_gradient", x)
