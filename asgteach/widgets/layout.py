"""Where every node sits: the forward graph on the left, its gradient mirrored on the right.

Reverse mode walks the forward graph backwards, and the picture says so:

* the **forward** nodes form the left column, inputs at the top, the loss at the bottom;
* the **backward** nodes form the right column and run bottom-up, from the seed beside the
  loss to the gradients of the inputs at the top;
* the gradient of a forward node (``data["mirror"]``) sits at that node's height.

Heights are *levels* found by solving difference constraints (a longest-path problem): a
forward edge goes at least one level down, a backward edge at least one level up, a gradient
and its node share a level. Where a backward rule needs several nodes between two forward
levels the forward column simply stretches. Leaves (inputs, parameters) sit just above
their first use, not all at the top. Within a level, nodes are ordered and placed near
their neighbours (a few barycentre sweeps), gradients under the x of their node.

Everything is in cytoscape's model units at zoom 1 (= CSS pixels when not zoomed), sized
from the labels (monospace text), so the view can choose a canvas height that keeps the
labels legible. Pure Python: the widget, the tests and anything else can call it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from .elements import element_phase

__all__ = ["Layout", "FONT_PX", "PAD", "node_size", "levels", "mirror_layout"]

#: Label font size of a node, in model units (= CSS px at zoom 1).
FONT_PX = 12.0
#: Width of one monospace character and height of one line, in font sizes.
CHAR_EM, LINE_EM = 0.62, 1.25
#: Padding inside a node (the stylesheet's ``padding``), gaps between nodes, rows, columns.
PAD, GAP_X, GAP_Y, COLUMN_GAP = 6.0, 14.0, 18.0, 48.0


@dataclass
class Layout:
    """Centres and sizes of the drawable nodes (element id -> (x, y) / (w, h)) and the extent."""

    positions: dict[str, tuple[float, float]] = field(default_factory=dict)
    sizes: dict[str, tuple[float, float]] = field(default_factory=dict)
    level: dict[str, int] = field(default_factory=dict)
    width: float = 0.0
    height: float = 0.0


def node_size(label: str, font: float = FONT_PX) -> tuple[float, float]:
    """(width, height) of a node showing ``label`` (one line per ``\\n``) at ``font`` px."""
    lines = label.split("\n") or [""]
    return (max(len(s) for s in lines) * CHAR_EM * font + 2 * PAD + 4,
            len(lines) * LINE_EM * font + 2 * PAD + 2)


def _solve(nodes: list[str], cons: list[tuple[str, str, int]], start: dict[str, int]) -> dict[str, int] | None:
    """Least levels with L[b] >= L[a] + w for every (a, b, w); None if the constraints cycle."""
    lev = dict(start)
    for _ in range(len(nodes) + 1):
        changed = False
        for a, b, w in cons:
            if lev[b] < lev[a] + w:
                lev[b] = lev[a] + w
                changed = True
        if not changed:
            return lev
    return None


def levels(nodes: Iterable[str], edges: Iterable[tuple[str, str]], phase: dict[str, str],
           mirror: dict[str, str]) -> dict[str, int]:
    """The level (row, 0 at the top) of every node: see the module doc.

    ``edges`` are (source, target) pairs (the target reads the source); ``phase`` says which
    column a node is in; ``mirror`` maps a gradient node to the forward node it mirrors.
    """
    nodes = list(nodes)
    known = set(nodes)
    edges = [(a, b) for a, b in edges if a in known and b in known and a != b]
    hard: list[tuple[str, str, int]] = []
    for a, b in edges:
        if phase[a] == phase[b] == "forward":
            hard.append((a, b, 1))
        elif phase[a] == phase[b] == "backward":
            hard.append((b, a, 1))      # backward data flows up: the reader sits above
    ties = [(f, g, 0) for g, f in mirror.items() if g in known and f in known]
    ties += [(g, f, 0) for f, g, _ in ties]
    zero = {n: 0 for n in nodes}
    lev = _solve(nodes, hard + ties, zero)
    if lev is None:   # a gradient that cannot sit beside its node (second-order graphs): let it float
        ties = []
        lev = _solve(nodes, hard, zero) or zero
    # leaves (no forward input) sit just above their first use, not all in the top row
    preds = {n: [a for a, b in edges if b == n and phase[a] == phase[n]] for n in nodes}
    succs = {n: [b for a, b in edges if a == n and phase[b] == phase[n] == "forward"] for n in nodes}
    raised = dict(lev)
    for n in nodes:
        if phase[n] == "forward" and not preds[n] and succs[n]:
            raised[n] = max(lev[n], min(lev[s] for s in succs[n]) - 1)
    if raised != lev:
        lev = _solve(nodes, hard + ties, raised) or lev
    # a backward node tied to nothing sits beside the forward values it reads
    tied = {a for a, _, _ in hard + ties} | {b for _, b, _ in hard + ties}
    for n in nodes:
        if phase[n] == "backward" and n not in tied:
            read = [lev[a] for a, b in edges if b == n and phase[a] == "forward"]
            if read:
                lev[n] = max(read)
    low = min(lev.values(), default=0)
    return {n: v - low for n, v in lev.items()}


def _place_row(row: list[str], want: dict[str, float], width: dict[str, float]) -> dict[str, float]:
    """Centres for one row: each node as near its wanted x as its neighbours in the row allow.

    Overlaps are resolved pushing right, then pushing left, and the two are averaged (then
    pushed right once more): crowded rows spread evenly about where they want to be.
    """
    order = sorted(row, key=lambda n: want[n])
    sep = [(width[a] + width[b]) / 2 + GAP_X for a, b in zip(order, order[1:])]
    right = [want[order[0]]]
    for k, n in enumerate(order[1:]):
        right.append(max(want[n], right[-1] + sep[k]))
    left = [want[order[-1]]]
    for k in range(len(order) - 2, -1, -1):
        left.insert(0, min(want[order[k]], left[0] - sep[k]))
    xs = [(a + b) / 2 for a, b in zip(right, left)]
    for k in range(1, len(xs)):
        xs[k] = max(xs[k], xs[k - 1] + sep[k - 1])
    return dict(zip(order, xs))


def _column(rows: dict[int, list[str]], width: dict[str, float], nbrs_up: dict[str, list[str]],
            nbrs_down: dict[str, list[str]], order: list[int], x: dict[str, float],
            anchor: dict[str, float] | None = None) -> None:
    """Barycentre sweeps over one column (down, up, down), writing centres into ``x``."""
    leaves = {n for row in rows.values() for n in row if not nbrs_up[n]}
    for sweep in range(3):
        seq = order if sweep % 2 == 0 else order[::-1]
        nbrs = nbrs_up if sweep % 2 == 0 else nbrs_down
        for lv in seq:
            row = rows[lv]
            want = {}
            for i, n in enumerate(row):
                if anchor and n in anchor:
                    want[n] = anchor[n]
                    continue
                # a leaf beside a node should not pull that node sideways (the spine stays straight)
                near = [x[m] for m in nbrs[n] if m in x and m not in leaves] or [x[m] for m in nbrs[n] if m in x]
                want[n] = sum(near) / len(near) if near else x.get(n, i * (width[n] + GAP_X))
            x.update(_place_row(row, want, width))
    # the spine may have moved since the leaves were placed: put each leaf back beside its first use
    for lv in order:
        row = rows[lv]
        want = {}
        for n in row:
            use = [x[m] for m in nbrs_down[n] if m in x]
            want[n] = anchor[n] if anchor and n in anchor else (
                sum(use) / len(use) if n in leaves and use else x[n])
        x.update(_place_row(row, want, width))


def mirror_layout(elements: list[dict[str, Any]], font: float = FONT_PX) -> Layout:
    """Positions for the drawable nodes of ``elements`` (compound boxes follow their members)."""
    nodes = [e for e in elements if e["group"] == "nodes" and e["data"].get("kind") != "compound"]
    ids = [e["data"]["id"] for e in nodes]
    if not ids:
        return Layout()
    phase = {e["data"]["id"]: element_phase(e) for e in nodes}
    mirror = {e["data"]["id"]: e["data"]["mirror"] for e in nodes if e["data"].get("mirror") in phase}
    size = {e["data"]["id"]: node_size(str(e["data"].get("label", "")), font) for e in nodes}
    known = set(ids)
    edges = [(e["data"]["source"], e["data"]["target"]) for e in elements if e["group"] == "edges"
             and e["data"]["source"] in known and e["data"]["target"] in known]
    lev = levels(ids, edges, phase, mirror)

    # rows of each column, in element order (graph order: a topological order) to start with
    cols: dict[str, dict[int, list[str]]] = {"forward": {}, "backward": {}}
    for n in ids:
        cols[phase[n]].setdefault(lev[n], []).append(n)
    width = {n: size[n][0] for n in ids}
    same_up: dict[str, list[str]] = {n: [] for n in ids}     # neighbours a sweep down the column reads
    same_down: dict[str, list[str]] = {n: [] for n in ids}
    for a, b in edges:
        if phase[a] != phase[b]:
            continue
        if phase[a] == "forward":
            same_up[b].append(a)
            same_down[a].append(b)
        else:           # backward flows up: its "upstream" is below
            same_up[a].append(b)
            same_down[b].append(a)
    x: dict[str, float] = {}
    fwd_rows = cols["forward"]
    _column(fwd_rows, width, same_up, same_down, sorted(fwd_rows), x)
    bwd_rows = cols["backward"]
    if bwd_rows:
        anchor = {g: x[f] for g, f in mirror.items() if f in x}
        _column(bwd_rows, width, same_down, same_up, sorted(bwd_rows, reverse=True), x, anchor)
        # mirrored nodes keep their node's x only as far as the row allows; then the column moves right
        fwd = [n for n in ids if phase[n] == "forward"]
        bwd = [n for n in ids if phase[n] == "backward"]
        right = max((x[n] + width[n] / 2 for n in fwd), default=0.0)
        left = min(x[n] - width[n] / 2 for n in bwd)
        shift = (right + COLUMN_GAP - left) if fwd else -left
        for n in bwd:
            x[n] += shift
    # rows: as tall as their tallest node
    row_h: dict[int, float] = {}
    for n in ids:
        row_h[lev[n]] = max(row_h.get(lev[n], 0.0), size[n][1])
    y_of: dict[int, float] = {}
    y = 0.0
    for lv in range(max(lev.values()) + 1):
        h = row_h.get(lv, size[ids[0]][1] * 0.5)   # an empty level (a stretched column) is half a row
        y_of[lv] = y + h / 2
        y += h + GAP_Y
    left = min(x[n] - width[n] / 2 for n in ids)
    pos = {n: (round(x[n] - left, 1), round(y_of[lev[n]], 1)) for n in ids}
    w = max(pos[n][0] + width[n] / 2 for n in ids)
    h = max(pos[n][1] + size[n][1] / 2 for n in ids)
    return Layout(pos, size, lev, round(w, 1), round(h, 1))
