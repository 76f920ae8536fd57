"""Where did a NaN or an infinity come from? The search behind a training step that was refused.

A Trainer refuses a step whose loss or gradients are not finite (the parameters and the
optimizer state stay as they were, on every backend). Saying "a gradient is inf" would leave
the student with nothing to do; this module names the node where it started. It runs the
graph with the reference interpreter (every needed node in graph order, its op's numpy
kernel; asked for every value), then walks back from the first target that is not finite: from a
node to an input that is not finite either, until it reaches a node whose inputs are all
finite (or a fed input). That node made the NaN or the infinity; the message says why such an
op can (its ``nan_hint``) and shows its inputs' ranges.

Walking back, rather than taking the first non-finite value in graph order, matters for
infinities: an attention mask holds ``-inf`` on purpose, and the softmax after it is finite.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ..graph import Graph
from ..ops.registry import spec
from .common import created_at
from .reference import interpret

__all__ = ["first_nonfinite"]


def _kind(v: np.ndarray) -> str | None:
    if v.dtype.kind != "f" or not v.size:
        return None
    if np.isnan(v).any():
        return "NaN"
    return "inf" if np.isinf(v).any() else None


def first_nonfinite(graph: Graph, targets: Sequence[int], feeds: Mapping[Any, Any], dtype: Any = None) -> str | None:
    """A message naming the node where the first non-finite value among ``targets`` started, or None
    when every target is finite for these feeds."""
    nodes = graph.ancestors(list(targets))
    with np.errstate(all="ignore"):   # every value the targets need, kept: the reference interpreter's loop
        env = dict(zip(nodes, (np.asarray(v) for v in interpret(graph, nodes, feeds, dtype))))
    bad = [t for t in sorted(set(targets)) if _kind(env[t])]
    if not bad:
        return None
    n = graph.nodes[bad[0]]
    while True:
        worse = [j for j in n.inputs if _kind(env[j])]
        if not worse:
            break
        n = graph.nodes[min(worse)]
    v = env[n.id]
    kind = _kind(v)
    hit = np.isnan(v) if kind == "NaN" else np.isinf(v)
    first = tuple(int(k) for k in np.argwhere(hit)[0]) if v.ndim else ()
    if n.op in ("input", "parameter", "constant"):
        what = f"the feed for {n.op} '{n.name}'" if n.op != "constant" else f"constant #{n.id} '{n.name}'"
        return (f"{what} contains {kind} ({int(hit.sum())} of {v.size} values, first at index {first}), "
                f"created at {created_at(n)}")
    lines = []
    for j in n.inputs:
        x, src = env[j], graph.nodes[j]
        if x.dtype.kind == "f" and x.size:
            finite = x[np.isfinite(x)]
            rng = f"min {finite.min():.4g}, max {finite.max():.4g}" if finite.size else "no finite values"
            lines.append(f"    input #{j} {src.op} '{src.name}' {x.shape}: {rng}")
    hint = spec(n.op).tools.nan_hint or ("check this op's inputs: a value too large for float32 overflows to inf, "
                                   "x / 0 is inf, log(0) is -inf")
    return (f"{kind} first appears in {n.op} (node #{n.id} '{n.name}', {n.phase} pass), created at {created_at(n)}\n"
            f"  {int(hit.sum())} of {v.size} values are {kind}, first at index {first}\n"
            + "\n".join(lines) + f"\n  why: {hint}")
