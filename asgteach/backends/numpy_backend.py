"""The numpy backend: the reference implementation every other backend is checked against.

Start with ``asgteach/backends/reference.py``: a dozen lines that run any graph — every
node the outputs need, in graph order, ``env[node] = kernel(*inputs)``. That loop IS this
backend, minus the speed. This backend computes the same values (tests check it against
the loop on random graphs), in two steps, as every real framework does:

``compile(graph, outputs) -> Plan`` does the work that does not depend on the numbers,
once: prune to what the outputs need, order, bind each op's numpy kernel, plan memory (free
each value after its last use, write in place where that is safe), fold the steps that read
only constants, and write the whole run out as one straight-line Python function
(``plan.source`` shows it).

``plan.run(feeds)`` then calls that function. Float precision follows the feeds: float64 in,
float64 out; float32 stays float32. A NaN in an output is explained: the run is repeated
step by step to name the first node that made one, and why its op can.

Where the parts live (each module has one job):

* ``reference.py``       the interpreter: the meaning of running a graph;
* ``numpy_plan.py``      :class:`Plan`: compile, the short feed path, constant folding, run, NaN search;
* ``numpy_memory.py``    which kernels write in place, and which outputs must be copied;
* ``numpy_codegen.py``   the generated straight-line program;
* ``common.py``          the backend interface, feed checks and errors (shared with wgpu).
"""

from __future__ import annotations

from ..graph import Graph
# The feed helpers and errors live in ``common``; they are named here too for code written
# against this module's old contents.
from .common import FeedError, KernelError, NumericsError, feed_array, missing_feed_error, resolve_feeds  # noqa: F401
from .numpy_plan import Plan

__all__ = ["NAME", "compile", "Plan", "resident_training"]

NAME = "numpy"


def compile(graph: Graph, outputs: list[int]) -> Plan:  # noqa: A001 - the verb every backend uses
    """Compile the outputs (node ids) of ``graph`` into a :class:`Plan`."""
    return Plan(graph, outputs)


def resident_training(plan: Plan) -> None:
    """None: a numpy plan computes in host memory, where the Trainer keeps its parameters and optimizer
    state anyway; there is no device copy to keep current (``common.ResidentTraining``)."""
    return None
