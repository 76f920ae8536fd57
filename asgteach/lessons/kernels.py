"""Look at the wgpu backend's kernels without a GPU: for lesson 11 ("backends").

The wgpu backend turns each node into *dispatches* in two steps: lowering (pure Python:
which WGSL family and entry point, the 64-word uniform block of shapes and strides, how
many workgroups) and then pipelines and buffers on a device. The first step needs no
adapter, so a class without a GPU driver can still read the exact WGSL a node would run
and the numbers its kernel would receive. With an adapter, ``plan.shader_for(node)``
returns the same text for a node the plan does not rewrite (reshapes share buffers and
transposes feeding a matmul are read in place: see the passes in ``asgteach.backends.wgpu_passes``).
"""

from __future__ import annotations

import re
from typing import Any

from ..backends.wgpu_kernels import Dispatch, lower
from ..backends.wgpu_matmul import tile_from_env
from ..ops.registry import spec

__all__ = ["dispatches_for", "wgsl_for", "wgsl_functions"]


def dispatches_for(tensor: Any) -> list[Dispatch]:
    """The dispatches the wgpu backend would launch for ``tensor``'s node (no device needed).

    Each :class:`~asgteach.backends.wgpu_kernels.Dispatch` holds ``entry`` (the WGSL entry
    point), ``groups`` (the workgroup grid), ``params`` (the uniform words) and ``source``.
    """
    graph, node = tensor.graph, tensor.graph.nodes[tensor.node_id]
    op = spec(node.op)
    if op.leaf:
        raise ValueError(f"node #{node.id} is a {node.op}: leaves are uploaded, not computed, so they run no kernel")
    return lower(graph, node, op.gpu.kernel, tile_from_env())


def wgsl_for(tensor: Any) -> str:
    """The WGSL source of the kernel that computes ``tensor``'s node (its last dispatch)."""
    found = dispatches_for(tensor)
    if not found:
        raise ValueError(f"node #{tensor.node_id} has no elements, so it runs no kernel")
    return found[-1].source


def wgsl_functions(source: str, names: list[str]) -> str:
    """Only the named ``fn``s of a WGSL source (with the attribute lines just above each), in source order.

    A kernel's full text is long (common helpers, every entry point of the family); a
    lesson shows the few functions that matter.
    """
    lines = source.splitlines()
    picked: list[tuple[int, int]] = []
    for name in names:
        pat = re.compile(rf"^\s*fn\s+{re.escape(name)}\s*\(")
        start = next((k for k, line in enumerate(lines) if pat.match(line)), None)
        if start is None:
            raise KeyError(f"no WGSL function {name!r} in this source")
        first = start
        while first > 0 and lines[first - 1].lstrip().startswith("@"):
            first -= 1
        depth, end = 0, start
        for end in range(start, len(lines)):
            depth += lines[end].count("{") - lines[end].count("}")
            if depth == 0 and "{" in "".join(lines[start:end + 1]):
                break
        picked.append((first, end))
    return "\n\n".join("\n".join(lines[a:b + 1]) for a, b in sorted(picked))
