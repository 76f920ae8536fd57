"""From a Graph to the elements a graph view draws: nodes, edges, groups — plain dicts.

This module is pure Python (no widgets), so the notebook view, the static HTML view and
the tests all share it. It answers four questions:

* **What is in view?** ``scope_of(x)``: for a Tensor, the nodes it depends on, plus the
  gradient nodes that ``at.grad`` appended for them; for a Graph, every node.
* **How does a node look?** ``category_of`` (its colour), ``label_of`` (op + shape, or a
  leaf's name), CSS-like classes (backward, leaf, output ...).
* **Which layer does a node belong to?** ``group_path``: parameters know their layer
  (``meta["layer"]``), nodes built inside a Module's forward know the module
  (``meta["module"]``), backward nodes belong to the layer of the forward node they
  differentiate. Layer names are dotted (``block.attn.query``), so the groups nest.
* **What is drawn?** ``build_elements``: a cytoscape element list for one *mode*
  (forward / backward / both) with some groups collapsed into one node each — this is
  what keeps a 1,000-node transformer readable.
* **Which gradient mirrors which node?** ``mirrors_of``: the backward node holding
  dL/d(node) for each forward node (from the recorded ``at.grad`` sweeps), so the layout
  can put a gradient at the height of its node and step-through can light up both.
* **What is glue?** ``glue_ids``: with ``details`` off, nodes that only move data (ops
  whose OpSpec says ``view=View(glue=True)``), scalar constants and the seed are folded into the edge
  labels (an edge keeps the ids it hides in ``data["folded"]``, for the inspector).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from ..graph import Graph, Node

__all__ = [
    "MODES", "COLLAPSE_DEFAULT", "Scope", "scope_of", "category_of", "label_of", "shape_text", "group_path",
    "groups_of",
    "build_elements", "node_element_id", "group_element_id", "parse_element_id", "GRAD_LINKS", "mirrors_of",
    "glue_ids", "element_phase",
]

#: What the view can show: the user's graph, autograd's graph, or both in one picture.
MODES = ("forward", "backward", "both")
#: Above this many drawn nodes, views start with every layer collapsed into one node.
COLLAPSE_DEFAULT = 150
#: Open layers are drawn as boxes only up to this many drawn nodes: dagre lays out compound
#: graphs much more slowly than flat ones, and boxes stop helping the eye at this size.
BOX_LIMIT = 250
#: Prefix of the groups holding a layer's backward nodes.
BACKWARD_MARK = "∇ "
#: Meta keys by which autograd ties a backward node to a forward node.
GRAD_LINKS = ("vjp_of", "accumulates", "grad_of", "seed_of")


@dataclass
class Scope:
    """The nodes a view covers: ``ids`` (sorted), and ``outputs`` (what the user asked to see)."""

    graph: Graph
    ids: list[int]
    outputs: list[int] = field(default_factory=list)

    @property
    def has_backward(self) -> bool:
        return any(self.graph.nodes[i].phase == "backward" for i in self.ids)


def scope_of(target: Any) -> Scope:
    """The nodes to draw for a Tensor, a list of Tensors or a Graph.

    For Tensors: their ancestors, plus the gradient nodes autograd made for those
    ancestors (so ``at.show(loss)`` after ``at.grad(loss, ...)`` shows both passes).
    Optimizer updates and forward-mode (jvp) nodes are left out unless asked for.
    """
    if isinstance(target, Graph):
        g = target
        consumers = g.consumers()
        outs = [n.id for n in g.nodes if n.phase == "forward" and not any(
            g.nodes[c].phase == "forward" for c in consumers[n.id]) and n.op not in ("input", "parameter", "constant")]
        return Scope(g, list(range(len(g.nodes))), outs)
    tensors = list(target) if isinstance(target, (list, tuple)) else [target]
    if not tensors:
        raise ValueError("show: nothing to show (an empty list)")
    g = tensors[0].graph
    if any(t.graph is not g for t in tensors):
        raise ValueError("show: all tensors must belong to one graph")
    outs = [t.node_id for t in tensors]
    forward = set(g.ancestors(outs))
    grads = [n.id for n in g.nodes[min(forward):] if n.phase == "backward" and "jvp_of" not in n.meta
             and "mode" not in n.meta and any(n.meta.get(k) in forward for k in GRAD_LINKS)]
    ids = g.ancestors(sorted(forward | set(grads))) if grads else sorted(forward)
    return Scope(g, ids, outs)


def category_of(node: Node) -> str:
    """The colour category: the op's category, "gradient" for a backward node."""
    if node.phase == "backward":
        return "gradient"
    from ..ops.registry import REGISTRY

    op = REGISTRY.get(node.op)
    return op.category if op is not None else "arithmetic"


def shape_text(shape: tuple[int, ...]) -> str:
    """``(4, 3)``; a 0-d tensor is called a scalar."""
    if not shape:
        return "scalar"
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def label_of(node: Node, graph: Graph | None = None) -> str:
    """The text inside a node: a leaf's name (what the user called it) or the op; then the shape."""
    if node.op in ("input", "parameter", "constant"):
        head = node.name
    else:
        head = node.op if node.name in ("", node.op) else f"{node.op} {node.name}"
    if len(head) > 40:
        head = head[:37] + "..."
    of = node.meta.get("grad_of")
    if of is not None and graph is not None and 0 <= of < len(graph.nodes):
        # a line of its own: a narrow node, and the result reads first
        name = graph.nodes[of].name
        head = f"{head}\n∂L/∂{name if len(name) <= 36 else name[:33] + '...'}"
    return f"{head}\n{shape_text(node.shape)}"


def _layer_name(graph: Graph, node: Node, depth: int = 0) -> str | None:
    meta = node.meta
    if node.op in ("parameter", "input") and meta.get("layer"):
        return str(meta["layer"])
    if meta.get("module"):
        return str(meta["module"])
    if node.phase == "backward" and depth < 8:
        for key in ("vjp_of", "accumulates", "grad_of"):
            target = meta.get(key)
            if isinstance(target, int) and 0 <= target < len(graph.nodes):
                return _layer_name(graph, graph.nodes[target], depth + 1)
    return None


def group_path(graph: Graph, node: Node) -> tuple[str, ...]:
    """The nested groups a node sits in, outermost first: ``("block", "block.attn", "block.attn.query")``."""
    name = _layer_name(graph, node)
    if not name:
        return ()
    parts = name.split(".")
    # a layer's backward nodes get groups of their own ("∇ mlp.0"): mixed into the forward
    # box they would tangle the layout, and a student wants to open one pass at a time
    mark = BACKWARD_MARK if node.phase == "backward" else ""
    return tuple(mark + ".".join(parts[: k + 1]) for k in range(len(parts)))


def groups_of(graph: Graph, ids: Iterable[int]) -> dict[str, list[int]]:
    """Every group (at every nesting level) and the node ids inside it."""
    out: dict[str, list[int]] = {}
    for i in ids:
        for g in group_path(graph, graph.nodes[i]):
            out.setdefault(g, []).append(i)
    return out


def node_element_id(node_id: int) -> str:
    return f"n{node_id}"


def group_element_id(group: str) -> str:
    return f"g:{group}"


def parse_element_id(element_id: str) -> tuple[str, Any]:
    """``"n12"`` -> ("node", 12); ``"g:block.attn"`` -> ("group", "block.attn")."""
    if element_id.startswith("g:"):
        return "group", element_id[2:]
    if element_id.startswith("n") and element_id[1:].isdigit():
        return "node", int(element_id[1:])
    raise ValueError(f"not an element id of a graph view: {element_id!r}")


def visible_ids(scope: Scope, mode: str) -> tuple[list[int], set[int]]:
    """The node ids drawn in ``mode``, and which of them are only context (forward values read by backward nodes)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    g = scope.graph
    if mode == "both":
        return list(scope.ids), set()
    fwd = [i for i in scope.ids if g.nodes[i].phase == "forward"]
    if mode == "forward":
        return fwd, set()
    bwd = [i for i in scope.ids if g.nodes[i].phase == "backward"]
    read = {j for i in bwd for j in g.nodes[i].inputs if g.nodes[j].phase == "forward"}
    return sorted(set(bwd) | read), read


def _broadcast_label(graph: Graph, src: Node, dst: Node) -> str | None:
    """An edge label when ``dst`` stretches ``src`` to a bigger shape (broadcasting)."""
    from ..ops.registry import REGISTRY

    op = REGISTRY.get(dst.op)   # ops whose inputs broadcast say so in their spec (add, where, broadcast_to ...)
    if op is None or not op.view.broadcasts or src.shape == dst.shape or src.size == 0:
        return None
    return f"{shape_text(src.shape)} → {shape_text(dst.shape)}"


def mirrors_of(graph: Graph, ids: Iterable[int]) -> dict[int, int]:
    """Backward node id -> the forward node whose gradient dL/d(node) it holds (among ``ids``).

    Read from the recorded sweeps (``graph.passes``: forward id -> gradient id) and from
    ``meta["grad_of"]``. One gradient node can hold the gradient of several forward nodes
    (``add`` passes its gradient through unchanged to both inputs): it mirrors the one the
    sweep reached first, the one nearest the output (the largest id).
    """
    shown = set(ids)
    out: dict[int, int] = {}
    for p in graph.passes:
        if p.get("kind", "grad") != "grad":
            continue
        for f, gid in sorted((int(k), int(v)) for k, v in p.get("grads", {}).items()):
            if f in shown and gid in shown and graph.nodes[gid].phase == "backward" and \
                    graph.nodes[f].phase == "forward":
                out[gid] = f  # ascending forward ids: the largest one wins
    for i in shown:
        of = graph.nodes[i].meta.get("grad_of")
        if graph.nodes[i].phase == "backward" and isinstance(of, int) and of in shown and i not in out:
            out[i] = of
    return out


def glue_ids(scope: Scope, ids: Iterable[int]) -> set[int]:
    """The nodes of ``ids`` that a view without details folds away.

    Glue is what the op registry calls glue (``OpSpec.view.glue``: reshape, transpose, broadcast_to,
    sum_to ... ops that only move data) when its input is drawn, scalar constants (category
    "constant", one element) and the seed of a sweep. What the user asked to see and the final
    gradients (``meta["grad_of"]``) are never folded.
    """
    from ..ops.registry import REGISTRY

    g = scope.graph
    shown = set(ids)
    keep = set(scope.outputs)
    out: set[int] = set()
    for i in shown:
        n = g.nodes[i]
        if i in keep or "grad_of" in n.meta:
            continue
        spec = REGISTRY.get(n.op)
        if "seed_of" in n.meta or (spec is not None and spec.category == "constant" and n.size == 1):
            out.add(i)
        elif spec is not None and spec.view.glue and len(n.inputs) == 1 and n.inputs[0] in shown:
            out.add(i)
    return out


def element_phase(element: dict[str, Any]) -> str:
    """"forward" or "backward" for any node element (a group's phase is its members')."""
    d = element["data"]
    if d.get("phase"):
        return str(d["phase"])
    return "backward" if str(d.get("group", "")).startswith(BACKWARD_MARK) else "forward"


def _fold_label(graph: Graph, chain: list[int]) -> str:
    """The label of an edge that hides ``chain`` (glue nodes, in the order data flows through them)."""
    ops = " → ".join(graph.nodes[i].op for i in chain)
    return f"{ops} {shape_text(graph.nodes[chain[-1]].shape)}"


def _past_glue(graph: Graph, j: int, hidden: set[int]) -> tuple[list[int], int]:
    """Walk back from input ``j`` past folded glue: (the glue passed, in flow order; where the walk ended)."""
    chain: list[int] = []
    while j in hidden and graph.nodes[j].inputs:
        chain.insert(0, j)
        j = graph.nodes[j].inputs[0]
    return chain, j


def build_elements(scope: Scope, mode: str = "both", expanded: set[str] | None = None,
                   details: bool = True) -> list[dict[str, Any]]:
    """The cytoscape elements of ``scope`` in ``mode``.

    ``expanded`` is the set of groups drawn open (as a box around their members);
    ``None`` means all open. A closed group is ONE node standing for all its members;
    edges into and out of its members are redrawn to it (once per neighbour).

    With ``details`` off, glue (:func:`glue_ids`) is not drawn: an edge runs past it, labelled
    with the hidden ops and keeping their ids in ``data["folded"]``; a folded scalar constant
    is named in its consumer's label instead (``mul ×0.1``).

    Every node element carries ``data["phase"]`` ("forward" or "backward"); a gradient node
    carries ``data["mirror"]``, the element id of the forward node whose gradient it holds.
    """
    g = scope.graph
    ids, context = visible_ids(scope, mode)
    hidden = glue_ids(scope, ids) if not details else set()
    if hidden:
        ids = [i for i in ids if i not in hidden]
    mirrors = mirrors_of(g, ids)
    is_open = (lambda name: True) if expanded is None else (lambda name: name in expanded)
    outputs = set(scope.outputs)

    rep: dict[int, str] = {}        # node id -> element id that stands for it
    parent_of: dict[str, str] = {}  # element id -> compound parent element id
    members: dict[str, int] = {}    # closed group element id -> number of nodes inside
    open_groups: set[str] = set()
    for i in ids:
        path = group_path(g, g.nodes[i])
        enclosing: str | None = None
        for name in path:
            if not is_open(name):
                eid = group_element_id(name)
                rep[i] = eid
                members[eid] = members.get(eid, 0) + 1
                if enclosing:
                    parent_of[eid] = group_element_id(enclosing)
                break
            open_groups.add(name)
            enclosing = name
        else:
            rep[i] = node_element_id(i)
            if enclosing:
                parent_of[rep[i]] = group_element_id(enclosing)
    if sum(1 for i in ids if rep[i] == node_element_id(i)) + len(members) > BOX_LIMIT:
        open_groups = set()  # too big for boxes: members are drawn loose (see BOX_LIMIT)
        parent_of = {}
    for name in open_groups:
        parts = name.rsplit(".", 1)
        if len(parts) == 2 and parts[0] in open_groups:
            parent_of[group_element_id(name)] = group_element_id(parts[0])

    elements: list[dict[str, Any]] = []
    for name in sorted(open_groups):
        eid = group_element_id(name)
        data = {"id": eid, "label": name, "kind": "compound", "group": name,
                "phase": "backward" if name.startswith(BACKWARD_MARK) else "forward"}
        if eid in parent_of:
            data["parent"] = parent_of[eid]
        elements.append({"group": "nodes", "data": data, "classes": "compound"})
    for eid, count in members.items():
        name = eid[2:]
        data = {"id": eid, "label": f"▸ {name}\n{count} nodes", "kind": "group", "group": name, "size": count,
                "phase": "backward" if name.startswith(BACKWARD_MARK) else "forward"}
        if name.startswith(BACKWARD_MARK) and group_element_id(name[len(BACKWARD_MARK):]) in members:
            data["mirror"] = group_element_id(name[len(BACKWARD_MARK):])
        if eid in parent_of:
            data["parent"] = parent_of[eid]
        elements.append({"group": "nodes", "data": data, "classes": "group"})
    for i in ids:
        if rep[i] != node_element_id(i):
            continue
        n = g.nodes[i]
        cat = category_of(n)
        classes = [f"cat-{cat}", n.phase]
        if n.op in ("input", "parameter", "constant"):
            classes.append("leaf")
        if i in context:
            classes.append("context")
        if i in outputs:
            classes.append("output")
        label = label_of(n, g)
        consts = [g.nodes[k].name for k in (_past_glue(g, j, hidden)[1] for j in n.inputs) if k in hidden]
        if consts:  # a folded scalar constant or seed is named where it is used
            head, _, rest = label.partition("\n")
            label = f"{head} ({', '.join(c[:12] for c in consts)})\n{rest}"
        data = {"id": rep[i], "label": label, "nid": i, "op": n.op, "cat": cat, "phase": n.phase,
                "kind": "node"}
        if i in mirrors and rep.get(mirrors[i]) == node_element_id(mirrors[i]):
            data["mirror"] = node_element_id(mirrors[i])
        if rep[i] in parent_of:
            data["parent"] = parent_of[rep[i]]
        elements.append({"group": "nodes", "data": data, "classes": " ".join(classes)})

    seen: set[tuple[str, str]] = set()
    shown = set(ids)
    for i in ids:
        dst = g.nodes[i]
        for j in dst.inputs:
            chain, j = _past_glue(g, j, hidden)
            if j not in shown or j in hidden:
                continue
            a, b = rep[j], rep[i]
            if a == b or (a, b) in seen:
                continue
            seen.add((a, b))
            src = g.nodes[j]
            classes = []
            if dst.phase == "backward":
                classes.append("backward" if src.phase == "backward" else "reads")
            data: dict[str, Any] = {"id": f"e:{a}>{b}", "source": a, "target": b}
            if chain:
                classes += ["folded", "folded-read"] if "reads" in classes else ["folded"]
                data["label"] = _fold_label(g, chain)
                data["folded"] = chain
            else:
                label = _broadcast_label(g, src, dst) if a.startswith("n") and b.startswith("n") else None
                if label:
                    classes.append("broadcast")
                    data["label"] = label
            elements.append({"group": "edges", "data": data, "classes": " ".join(classes)})
    return elements
