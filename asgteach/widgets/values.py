"""Numbers for the inspector: which values a view has, their statistics and a tiny heatmap.

A view can be given values three ways (``at.show`` passes its arguments here):

* ``values={tensor_or_id_or_name: array, ...}`` — arrays you already have;
* ``feeds={x: X, w: W}`` — the view runs the graph itself (numpy backend) and keeps the
  value of every node it draws, forward and backward;
* ``trainer=tr`` (with ``feeds`` for the data) — the same, with the trainer's current
  parameters and optimizer state.
"""

from __future__ import annotations

import base64
from typing import Any, Mapping

import numpy as np

from ..graph import Graph

__all__ = ["resolve_values", "compute_values", "stats", "heatmap_png", "heatmap_img"]


def _key_to_id(graph: Graph, key: Any) -> int:
    if isinstance(key, (int, np.integer)):
        return int(key)
    if isinstance(key, str):
        return graph.find(key).id
    node_id = getattr(key, "node_id", None)
    if node_id is None or getattr(key, "graph", graph) is not graph:
        raise TypeError(f"values: a key must be a Tensor of this graph, a node id or a name, got {key!r}")
    return int(node_id)


def resolve_values(graph: Graph, values: Mapping[Any, Any] | None) -> dict[int, np.ndarray]:
    """``{Tensor | node id | name: array}`` -> ``{node id: ndarray}``."""
    return {_key_to_id(graph, k): np.asarray(v) for k, v in (values or {}).items()}


def compute_values(graph: Graph, ids: list[int], feeds: Mapping[Any, Any] | None = None,
                   trainer: Any = None) -> dict[int, np.ndarray]:
    """Run the graph for every node in ``ids`` that can be computed from what is fed.

    Nodes that need an input nobody fed (e.g. the optimizer's learning rate) are skipped
    instead of failing the whole view.
    """
    from ..backends import compile as _compile
    from ..backends.common import resolve_feeds
    from ..tensor import Tensor

    given: dict[int, Any] = dict(resolve_feeds(graph, feeds)) if feeds else {}
    if trainer is not None:
        given.update({k: v for k, v in trainer.held_values().items() if k not in given})
    fed_leaves = {i for i in given}
    computable = []
    ok: dict[int, bool] = {}
    for i in sorted(ids):
        n = graph.nodes[i]
        if n.op in ("input", "parameter"):
            ok[i] = i in fed_leaves
        elif n.op == "constant":
            ok[i] = True
        else:
            ok[i] = all(ok.get(j, _ok_ancestor(graph, j, fed_leaves, ok)) for j in n.inputs)
        if ok[i]:
            computable.append(i)
    out: dict[int, np.ndarray] = {i: np.asarray(v) for i, v in given.items() if i in set(ids)}
    targets = [i for i in computable if graph.nodes[i].op not in ("input", "parameter")]
    if targets:
        dtype = trainer.dtype if trainer is not None else None  # None: the precision of the feeds
        plan = _compile([Tensor(graph, i) for i in targets], "numpy")
        feeds_needed = {k: v for k, v in given.items()}
        results = plan.run(feeds_needed, dtype=dtype, on_nan="ignore")
        out.update({i: np.asarray(r) for i, r in zip(targets, results)})
    return out


def _ok_ancestor(graph: Graph, j: int, fed: set[int], ok: dict[int, bool]) -> bool:
    """Can node ``j`` (outside the view) be computed from the fed leaves? (memoised in ``ok``)."""
    stack = [j]
    while stack:
        i = stack[-1]
        if i in ok:
            stack.pop()
            continue
        n = graph.nodes[i]
        if n.op in ("input", "parameter"):
            ok[i] = i in fed
            stack.pop()
        elif n.op == "constant":
            ok[i] = True
            stack.pop()
        else:
            todo = [k for k in n.inputs if k not in ok]
            if todo:
                stack.extend(todo)
            else:
                ok[i] = all(ok[k] for k in n.inputs)
                stack.pop()
    return ok[j]


def stats(a: np.ndarray) -> dict[str, Any]:
    """shape, min/mean/max (and how many entries are not finite) of an array."""
    a = np.asarray(a)
    out: dict[str, Any] = {"shape": tuple(a.shape), "dtype": str(a.dtype)}
    if a.size == 0:
        return out
    f = a.astype(np.float64, copy=False)
    finite = np.isfinite(f)
    if finite.any():
        v = f[finite]
        out.update(min=float(v.min()), mean=float(v.mean()), max=float(v.max()))
    out["nonfinite"] = int(a.size - finite.sum())
    return out


def _as_2d(a: np.ndarray) -> np.ndarray | None:
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 0 or a.size == 0:
        return None
    if a.ndim == 1:
        return a[None, :]
    if a.ndim == 2:
        return a
    return a.reshape(-1, a.shape[-1])  # rows of the last axis: still shows structure


def heatmap_png(a: np.ndarray, max_cells: int = 64, scale: int | None = None) -> bytes | None:
    """A small PNG of a 1-D/2-D array (higher dims are flattened to rows): blue < 0 < red.

    Written with numpy and zlib only (no matplotlib), so it costs well under a
    millisecond: the inspector redraws it on every click.
    """
    import struct
    import zlib

    m = _as_2d(a)
    if m is None:
        return None
    m = m[:max_cells, :max_cells]
    if scale is None:  # about 160 px across, never below 2 px per cell
        scale = int(max(2, min(24, 160 // max(m.shape[1], 1), 120 // max(m.shape[0], 1))))
    m = np.where(np.isfinite(m), m, 0.0)
    lim = float(np.abs(m).max()) or 1.0
    t = np.clip(m / lim, -1.0, 1.0)
    pos, neg = np.clip(t, 0, 1), np.clip(-t, 0, 1)
    r = 255 * (1 - neg * 0.85)
    gch = 255 * (1 - 0.85 * np.maximum(pos, neg))
    b = 255 * (1 - pos * 0.85)
    rgb = np.stack([r, gch, b], axis=-1).astype(np.uint8)
    rgb = np.repeat(np.repeat(rgb, scale, axis=0), scale, axis=1)
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def heatmap_img(a: np.ndarray, title: str = "") -> str:
    """An ``<img>`` tag with the heatmap inline (data: URI), or "" for scalars."""
    png = heatmap_png(a)
    if png is None:
        return ""
    src = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    import html

    return (f'<img class="asg-heatmap" alt="{html.escape(title)} heatmap" title="{html.escape(title)}" '
            f'src="{src}" style="image-rendering:pixelated;border:1px solid #ccc;max-width:100%"/>')
