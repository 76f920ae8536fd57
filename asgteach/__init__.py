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
from .batching import NotBatchableError, vmap
from .backends import (
    BackendUnavailable, FeedError, KernelError, NumericsError, available, compile, describe, get_backend, run,
)
from .graph import Graph, GraphLoadError, NameReboundWarning, Node, ReleasedError, Supplied, default_graph
from .graph import reset_default_graph as reset
from .gradcheck import GradcheckReport, gradcheck
# every op's public function (at.relu, at.sum, ...): ops.__all__ gathers them from the module of each op family
from .ops import *  # noqa: F401,F403
from .shapes import ShapeError
from .tensor import Tensor
from .widgets.show import show  # also lets a Graph or Tensor ending a notebook cell draw itself
from . import cells  # noqa: F401,E402  (re-running notebook cells: hooks IPython when one runs)
from . import nn  # noqa: E402  (nn builds on everything above)
from .nn import CheckpointWarning, DataLoader, Dataset, Trainer, WeightsFileError
from .nn import init, optim

__version__ = "0.2.0"

__all__ = [
    "show", "nn", "optim", "init", "Trainer", "Dataset", "DataLoader", "WeightsFileError", "CheckpointWarning",
    "Graph", "Node", "Supplied", "Tensor", "ShapeError", "FeedError", "KernelError", "GraphLoadError",
    "NumericsError", "BackendUnavailable", "NameReboundWarning", "ReleasedError", "default_graph", "reset",
    "ops", "grad", "jvp", "hvp", "vmap", "NotBatchableError", "run", "compile",
    "available", "describe", "get_backend", "gradcheck", "GradcheckReport",
]
__all__ += ops.__all__   # NotDifferentiableError, input, parameter, constant and every op function
