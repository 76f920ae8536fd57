"""The op registry and the functions that build op nodes.

``REGISTRY`` maps every op name to its :class:`OpSpec`. The family modules register
their ops when imported; the public functions below are what ``at.*`` re-exports.
"""

from __future__ import annotations

from .registry import (  # noqa: F401
    CATEGORIES, REGISTRY, NotDifferentiableError, OpSpec, VjpContext, apply, as_tensor, patched, register, spec,
)
from . import leaves  # noqa: F401  (registers input/parameter/constant)
from .leaves import constant, input, parameter  # noqa: F401
from .elementwise import (  # noqa: F401
    abs, add, div, equal, erf, exp, gelu, greater, leaky_relu, log, maximum, minimum, mul, neg, pow, relu,
    sigmoid, sign, silu, softplus, sqrt, sub, tanh, where,
)
from .reduce import argmax, max, mean, sum, var  # noqa: F401
from .shape import broadcast_to, concat, getitem, reshape, sum_to, transpose  # noqa: F401
from .linalg import matmul  # noqa: F401
from .nn import embedding, layer_norm, layer_norm_composite, log_softmax, softmax  # noqa: F401
from .conv import avg_pool2d, conv2d, max_pool2d  # noqa: F401
