"""The wgpu backend: the same graph, run as WGSL compute shaders on a GPU (or on lavapipe).

``compile(graph, outputs)`` does everything that does not depend on the numbers:

1. **kernels**: the plain plan (``wgpu_plain``, ``optimize=False``) gives every compute
   node its own kernel, written from its op's record by ``wgpu_kernels`` (WGSL, uniform
   block, bindings). The optimised plan (the default) rewrites that kernel list with the
   ordered passes of ``wgpu_passes``: reshapes share their input's buffer, matmuls read
   transposed operands in place, batched weight gradients run as one GEMM, chains of
   elementwise ops run as one generated kernel (``wgpu_chain``)... ``plan.passes`` says
   what each pass did;
2. **pipelines**, cached per process by (op, dtype, variant) (``wgpu_device``); a kernel
   not compiled yet starts compiling on a worker thread as soon as step 1 knows it;
3. **memory plan**: one persistent device buffer per live value. Inputs, parameters,
   constants and requested outputs own their buffers; every other value borrows one
   from a pool and gives it back after its last reader — the same liveness analysis as
   the numpy backend's, but here it decides how much GPU memory a step needs;
4. **bind groups** and ONE uniform buffer holding every dispatch's parameters, written once.

Steps 1 and 3 (and the uniform words) depend only on the graph's structure: they end in
``wgpu_memory`` and are kept (``wgpu_plan_cache``): compiling a fresh graph of the same shape again — a re-run
notebook cell, a second Trainer — only creates this plan's buffers and bind groups.

``plan.run(feeds)`` is then short, and talks to the GPU as little as possible:

* feeds are uploaded with ``queue.write_buffer`` (float64 becomes float32, once warned;
  integer ids become int32);
* the whole run is recorded into ONE command encoder — one compute pass with every
  dispatch — and handed to the GPU with ONE ``submit``; the next run's commands are
  recorded while the GPU executes this one's, so Python's encoding time hides behind it;
* only the requested outputs are copied into one persistent staging buffer, which is
  mapped once: ONE host synchronisation per run. ``plan.stats`` counts all of this.

Where the code is
-----------------
This module is the backend's face: ``compile`` and :func:`resident_training`. The plan is
``wgpu_program`` (compile in ``Plan.__init__``, then ``Plan.run``); keeping a Trainer's parameters and
optimizer state on the GPU is a layer over it, ``wgpu_resident``; the kernels are ``wgpu_kernels``
(plain) and ``wgpu_passes`` (the optimisations, in order), the device ``wgpu_device``.

Feeds that stay on the GPU between runs
---------------------------------------
A training step must not ship its weights to the GPU every time. Two ways:

* ``plan.run(feeds, params={w: W})``: an array that is the *same object* as last time and
  unchanged is not uploaded again. "Unchanged" is checked against a host copy (no GPU
  traffic, but a compare of the whole array); a frozen array — read-only and not a view of
  anything writable (``arr.setflags(write=False)`` on an array that owns its memory, see
  :func:`frozen`) — is trusted without the compare: freeze a batch or a parameter you reuse
  to make the check free. Either way a run computes with the numbers the array holds now,
  as numpy does.
* every other leaf must be fed on every run, as on numpy: a feed left out is a FeedError,
  never last run's value.
* ``resident_training(plan)`` (``wgpu_resident``): ``bind_updates({w: w_new})`` copies output
  ``w_new`` into ``w``'s buffer *on the GPU* after every run of the layer (or has the update
  kernel write it there), behind a device-side check that refuses a step with a NaN. Feed ``w``
  once; later runs may leave it out and use the device copy. ``read_params()`` fetches them.

NaNs
----
With ``on_nan="raise"`` (the default) a NaN in an output is explained by re-running the
same feeds on the numpy backend in float32, which names the first node that produced a
NaN and why (the GPU run records no per-node values, on purpose: that would cost a sync
per node). If numpy finds none, the error says the NaN came from the GPU kernels alone.
"""

from __future__ import annotations

from typing import Any

from ..graph import Graph
from .wgpu_device import GPU_LOCK, check_available, collector_paused, describe  # noqa: F401
from .wgpu_program import BindingLimitError, Plan, frozen, warn_float64_again  # noqa: F401
from .wgpu_resident import ResidentTraining

__all__ = ["NAME", "compile", "Plan", "resident_training", "ResidentTraining", "check_available", "describe",
           "BindingLimitError", "GPU_LOCK", "frozen", "warn_float64_again"]

NAME = "wgpu"


def compile(graph: Graph, outputs: list[int], max_binding: int | None = None,  # noqa: A001
            optimize: bool = True, passes: Any = None) -> Plan:
    """Compile the outputs (node ids) of ``graph`` into a GPU :class:`Plan`.

    ``optimize=False`` gives the plain plan: one kernel per compute node (``wgpu_plain``); the default
    runs the passes of ``wgpu_passes`` over it, or only those named in ``passes`` (``"chains"``, or
    several: each pass can be tried alone against the plain plan). ``max_binding`` overrides the
    adapter's per-binding size limit (for tests).
    """
    with GPU_LOCK, collector_paused():   # (the pipeline and lowering caches are shared by every thread's plans)
        return Plan(graph, outputs, max_binding, optimize, passes)


def resident_training(plan: Plan) -> ResidentTraining:
    """The layer that keeps ``plan``'s parameters and optimizer state on the GPU between runs
    (``common.ResidentTraining``; see ``wgpu_resident``). The plan itself is not changed."""
    if not isinstance(plan, Plan):
        raise TypeError(f"resident_training: a wgpu Plan is needed, got {type(plan).__name__}")
    return ResidentTraining(plan)
