"""The op registry and the functions that build op nodes.

``REGISTRY`` maps every op name to its :class:`OpSpec`. The family modules register
their ops when imported; their public functions (each module's ``__all__``) are what
``at.*`` re-exports, so a new op's function is exported by the module that defines it.
"""

from __future__ import annotations

from .registry import (  # noqa: F401
    CATEGORIES, COMPOSITES, GPU, REGISTRY, BatchContext, Composite, NotDifferentiableError, OpSpec, Tools, View,
    VjpContext, activation, activations, apply, as_tensor, lookup, patched, register, registered, spec, unregister,
)
from .leaves import constant, input, parameter  # noqa: F401  (leaves registers input/parameter/constant)
from . import elementwise, reduce, shape, linalg, nn, conv, gradient_control  # noqa: I001  (this order is the registry's)
from .elementwise import *  # noqa: F401,F403
from .elementwise import batch_elementwise  # noqa: F401  (the batching rule an elementwise op of yours can share)
from .reduce import *  # noqa: F401,F403
from .shape import *  # noqa: F401,F403
from .linalg import *  # noqa: F401,F403
from .nn import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .gradient_control import *  # noqa: F401,F403
from .graph_file import load_graph  # noqa: F401

#: The public op functions, ``at.relu`` and friends: each family module's ``__all__``.
__all__ = ["NotDifferentiableError", "input", "parameter", "constant", "load_graph"]
__all__ += elementwise.__all__
__all__ += reduce.__all__
__all__ += shape.__all__
__all__ += linalg.__all__
__all__ += nn.__all__
__all__ += conv.__all__
__all__ += gradient_control.__all__
