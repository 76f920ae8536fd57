"""The update gate: a training step that meets a NaN or an infinity changes nothing on the GPU either.

On numpy a training step is one ``plan.run``; its outputs are the loss and the new parameters
and optimizer state, and the Trainer keeps them only when the run raised nothing. A GPU plan
with ``bind_updates`` writes the new values over the old ones *on the device*, in the same
submit that computes the loss (an update kernel writes its parameter in place). Checking the
loss on the host afterwards is too late: the parameters and Adam's moments already hold NaN,
and every later step fails.

So the plan checks first, on the device, as PyTorch's GradScaler does (``found_inf``): just
before the first update kernel, ONE kernel (``shaders/finite_check.wgsl``, up to 16 buffers per
launch) looks at every value the update kernels read — the gradients, a split GEMM's K-chunks,
the learning rate — and at the outputs read back (the loss). A NaN or an infinity sets a flag.
A tiny kernel (``gate.wgsl``) then writes the workgroup counts of every update kernel into a
buffer, or zeros when the flag is set, and the update kernels are dispatched from it
(``dispatch_workgroups_indirect``): they do not run at all. An update that is copied rather than
written in place is copied by a kernel dispatched the same way (``gate_copy.wgsl``). The flag
is read back with the outputs, so the host learns it without an extra sync, and raises.

This module is the pure part: which launches are updates, which buffers to check, and the check
kernel's WGSL. ``wgpu_resident`` (the training layer over a plan) creates the buffers and records the launches.

A value the updates read that is computed *after* the first update kernel (a split sum's last
stage waits until just before the update that reads it, see ``wgpu_batch``) is checked through
what it is computed from (the partial sums): a sum of finite partials that overflows to
infinity is the one case the gate misses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..graph import Graph
from .wgpu_device import family_source
from .wgpu_kernels import Dispatch

__all__ = ["Gate", "plan_gate", "check_source", "SLOTS", "PER_WG"]

SLOTS = 16       # buffers one finite_check launch looks at (one 64-word uniform block: 4 words each)
PER_WG = 4096    # words one workgroup of finite_check looks at (shaders/finite_check.wgsl)


@dataclass
class Gate:
    """Where the gate goes in a plan's launches, and what it looks at."""

    at: int                                   # the index (in the launches) of the first update launch
    gated: list[int]                          # the launches writing a parameter in place: dispatched from the
    #                                           gate's arguments (an update with a buffer of its own runs as usual)
    checked: list[tuple[int, int]] = field(default_factory=list)   # (buffer owner node, bytes) to check
    copies: list[tuple[int, int]] = field(default_factory=list)    # (new, old) updates copied by a kernel


def _writes(d: Dispatch) -> set[int]:
    """The nodes whose buffers ``d`` writes (as bindings name them: a buffer's owner). A chain writes
    binding 1 (its root, or the leaf it updates in place) and its stores; a split sum's last stage
    binding 2; any other kernel its own node. (Scratch buffers, < 0, are the kernel's own.)"""
    if d.batch == "partials":
        return {d.binds[2]}
    if d.batch == "chain" or d.stores:
        return {n for n in (d.binds.get(1), *(d.binds[b] for b in d.stores)) if n is not None and n >= 0}
    return {d.node.id}


def plan_gate(graph: Graph, dispatches: Sequence[Dispatch], launches: Sequence[Sequence[int]],
              updates: Sequence[tuple[int, int]], in_place: set[tuple[int, int]], outputs: Sequence[int],
              device_only: set[int], bytes_of: Callable[[Dispatch, int], int]) -> Gate | None:
    """The gate for a plan whose ``launches`` (each a list of indices into ``dispatches``) run in order.

    ``updates``: the (new, old) pairs of ``bind_updates``; ``in_place``: the pairs a kernel writes
    straight into old. ``bytes_of(dispatch, node)``: how many bytes of node's buffer that dispatch
    binds (a split GEMM's K-chunks are more than the node). None: nothing to gate.
    """
    if not updates:
        return None
    news = {n for n, _ in updates}
    olds = {o for _, o in updates}
    update_values = news | olds
    writes = [set().union(*(_writes(dispatches[k]) for k in members)) for members in launches]
    # the launches that compute updates; those that write a parameter in place are the gated ones (one that
    # writes a new value to a buffer of its own runs: its copy into the parameter is what the gate stops)
    computing = [i for i, w in enumerate(writes) if w & update_values]
    gated = [i for i in computing if writes[i] & olds]
    copies = [(n, o) for n, o in updates if (n, o) not in in_place]
    if not computing or not (gated or copies):
        return None
    first = computing[0]
    gated_set = set(computing)
    produced_at: dict[int, int] = {}   # node (a buffer's owner, as bindings name it) -> the last launch writing it
    for i, w in enumerate(writes):
        for n in w:
            produced_at[n] = i

    checked: dict[int, int] = {}
    seen: set[int] = set()

    def check(node: int, d: Dispatch) -> None:
        """Check ``node`` as ``d`` reads it; if it is made after the gate, check what it is made from."""
        if node < 0 or node in seen or node in update_values or graph.nodes[node].dtype != "float":
            return
        seen.add(node)
        at = produced_at.get(node)
        if at is not None and at >= first:
            if at in gated_set:
                return   # a value the updates themselves compute
            for k in launches[at]:
                src = dispatches[k]
                for b, n in src.binds.items():
                    if n not in _writes(src):
                        check(n, src)
            return
        checked[node] = max(checked.get(node, 0), bytes_of(d, node))

    for i in computing:
        for k in launches[i]:
            d = dispatches[k]
            for b, n in d.binds.items():
                if n not in _writes(d):
                    check(n, d)
    for k, out in enumerate(outputs):   # the loss (and whatever else is read back)
        if out in device_only or out in news or graph.nodes[out].dtype != "float" or not graph.nodes[out].size:
            continue
        at = produced_at.get(out)
        if at is None or at < first:
            checked.setdefault(out, graph.nodes[out].size * 4)
    return Gate(first, gated, [(n, b) for n, b in checked.items() if b > 0], copies)


def check_source(slots: int) -> str:
    """finite_check's WGSL for ``slots`` buffers (slot s reads binding 2 + s)."""
    bindings = ["@group(0) @binding(1) var<storage, read_write> flag: array<u32>;"]
    cases = []
    for s in range(slots):
        bindings.append(f"@group(0) @binding({2 + s}) var<storage, read> d{s}: array<u32>;")
        cases.append(f"        case {s}u: {{ for (var k = 0u; k < 16u; k++) {{ let i = start + k * 256u; "
                     f"if (i < n) {{ bad = bad || bad_bits(d{s}[i]); }} }} }}")
    return family_source("finite_check", BINDINGS="\n".join(bindings), CASES="\n".join(cases), SLOTS=slots)
