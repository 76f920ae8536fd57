"""asgteach — see how autograd works: build a graph, look at it, differentiate it, run it.

    import asgteach as at
    with at.Graph() as g:
        x = at.input("x", (4, 3))
        w = at.parameter("w", (3, 2))
        y = at.sum(at.relu(x @ w) ** 2)
        dx, dw = at.grad(y, [x, w])
    values = at.run([y, dx, dw], {x: X, w: W})

This file only gathers the public API; each part lives in a module named for it.
"""

from __future__ import annotations

from . import ops
from .autograd import grad, hvp, jvp
from .backends import (
    BackendUnavailable, FeedError, KernelError, NumericsError, available, compile, describe, get_backend, run,
)
from .graph import Graph, NameReboundWarning, Node, ReleasedError, default_graph
from .graph import reset_default_graph as reset
from .gradcheck import GradcheckReport, gradcheck
from .ops import (
    NotDifferentiableError, abs, add, argmax, avg_pool2d, broadcast_to, concat, constant, conv2d, div, embedding,
    equal, erf, exp, gelu, getitem, greater, input, layer_norm, layer_norm_composite, leaky_relu, log, log_softmax,
    matmul, max, max_pool2d, maximum, mean, minimum, mul, neg, parameter, pow, relu, reshape, sigmoid, sign, silu,
    softmax, softplus, sqrt, sub, sum, sum_to, tanh, transpose, var, where,
)
from .shapes import ShapeError
from .tensor import Tensor
from .widgets.show import show  # also lets a Graph or Tensor ending a notebook cell draw itself
from . import cells  # noqa: F401,E402  (re-running notebook cells: hooks IPython when one runs)
from . import nn  # noqa: E402  (nn builds on everything above)
from .nn import DataLoader, Dataset, Trainer, WeightsFileError
from .nn import init, optim

__version__ = "0.1.0"

__all__ = [
    "show", "nn", "optim", "init", "Trainer", "Dataset", "DataLoader", "WeightsFileError",
    "Graph", "Node", "Tensor", "ShapeError", "NotDifferentiableError", "FeedError", "KernelError",
    "NumericsError", "BackendUnavailable", "NameReboundWarning", "ReleasedError", "default_graph", "reset",
    "ops", "grad", "jvp", "hvp", "run", "compile",
    "available", "describe", "get_backend", "gradcheck", "GradcheckReport",
    "input", "parameter", "constant",
    "add", "sub", "mul", "div", "neg", "pow", "exp", "log", "sqrt", "abs", "sign", "erf", "tanh", "sigmoid",
    "relu", "gelu", "silu", "leaky_relu", "softplus", "maximum", "minimum", "where", "greater", "equal",
    "sum", "mean", "max", "var", "argmax", "softmax", "log_softmax", "reshape", "transpose", "matmul",
    "concat", "broadcast_to", "sum_to", "getitem", "layer_norm", "layer_norm_composite", "embedding",
    "conv2d", "max_pool2d", "avg_pool2d",
]
