"""The Abstract Semantic Graph (ASG): nodes and the graph that holds them.

asgteach is *define-then-run*: calling ``at.relu(x @ w)`` computes nothing. It appends nodes to a
:class:`Graph`, and only a backend (``at.run``) later turns the graph into numbers. Keeping the whole
computation as data is what lets us draw it, check its shapes before anything runs, differentiate it
into a second graph, and run it on different hardware. Two rules keep the graph simple:

* **Append-only.** A node is never changed or removed once added. A node can only use nodes that
  already exist, so the order of ``graph.nodes`` is always a valid topological order: walking it
  front to back evaluates the graph, walking it back to front is reverse-mode autodiff.
* **Every node remembers where the user created it** (``node.source``, ``file:line``), so an error
  about a node can point at the line of the user's code that made it.

A name means the newest node of that name: ``graph.find("x")`` and by-name feeds (``{"x": X}``) bind
to the most recently created input or parameter called "x". How a graph is *used* is its session's
business (``graph.session``, session.py): which Tensors are alive, which notebook cell bound which
name, when a parameter's name may move on to a new parameter, and what ``graph.collect()`` releases.

This module is the bottom of the stack: of asgteach it imports only leaves (the user's source line,
:mod:`asgteach.hooks`) and its own unit (session.py, graph_json.py). Whatever sits above and must
reach down here is handed down through :mod:`asgteach.hooks`.
"""

from __future__ import annotations

import math
import os
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Collection, Iterator

import numpy as np

from . import hooks
# the default graph and the `with` stack belong to the session (re-exported: ops import them from here)
from .session import NameReboundWarning, Session, default_graph, global_default_graph, graph_stack, reset_default_graph
from .source import source_line_text, user_source  # re-exported: `from asgteach.graph import user_source` still works

__all__ = [
    "Node", "Supplied", "SUPPLIED_KINDS", "META_KEYS", "Graph",
    "default_graph", "global_default_graph", "reset_default_graph", "PHASES", "DTYPES",
    "NameReboundWarning", "ReleasedError", "GraphLoadError", "notebook_display", "user_source", "source_line_text",
]

#: "forward" nodes are what the user wrote; "backward" nodes were appended by autograd.
PHASES = ("forward", "backward")
#: Every key a node's ``meta`` holds, named once, with who writes it and what it says. ``meta`` describes a
#: node for tools and views; nothing in it changes what a graph computes (that is ``op``, ``attrs`` and
#: ``Node.supplied``). ``Graph.phase(..., key=value)`` and ``add_node(meta=...)`` write them.
META_KEYS: dict[str, str] = {
    # what a parameter or a layer's node is (at.parameter, nn.Module): the inspector's words
    "layer": "the layer's name, e.g. 'block0.attn' (at.parameter, nn)",
    "layer_kind": "the layer's class, e.g. 'Linear' (nn)",
    "role": "the parameter's role in its layer, e.g. 'weight' (at.parameter, nn)",
    "init": "the parameter's initialiser, by name (at.parameter; nn.init reads it)",
    "init_args": "the initialiser's arguments, e.g. {'std': 0.02} (at.parameter)",
    "module": "the nn.Module whose forward() built the node: views group by it (nn.Module.__call__)",
    "optimizer_state": "an optimizer state input's kind, e.g. 'm' (nn.optim)",
    "optimizer": "the optimizer that state or an update belongs to (nn.optim, Trainer)",
    "for": "the parameter an optimizer state belongs to (nn.optim)",
    "update": "the optimizer whose in-graph update made the node (Trainer)",
    "ids_for": "what an integer input's ids index, for the error an id out of range gets (nn.losses)",
    "ids_count": "what the ids count, e.g. 'classes' (nn.losses)",
    "ids_by": "the op that reads the ids (nn.losses)",
    # how a derived node relates to the forward graph (autograd, batching): the step-through view's links
    "vjp_of": "the forward node whose backward rule made this node (autograd.grad)",
    "accumulates": "the node whose gradient contributions this add sums (autograd.accumulate)",
    "seed_of": "the output whose seed gradient this is (autograd.grad)",
    "grad_of": "the node this is the gradient of (autograd.grad)",
    "jvp_of": "the forward node whose tangent rule made this node (autograd.jvp)",
    "mode": "'jvp' on the nodes of a forward-mode pass (autograd.jvp)",
    "copied_from": "the node's id in the graph it was copied from (Graph.extract)",
    "recomputes": "the forward node a checkpointing rewrite recomputes (lesson 15)",
}
#: Element kinds a node can hold. The *precision* of "float" (float32 or float64) is chosen when the graph
#: runs, from the feeds: the same graph runs in float32 for speed and in float64 for gradient checks.
DTYPES = ("float", "int")


#: The kinds of input whose value a runner supplies itself (not the caller), by :class:`Supplied`.
SUPPLIED_KINDS = ("dropout_mask", "training_flag", "running_stat")


@dataclass(frozen=True)
class Supplied:
    """What a runner feeds an input by itself, declared where the input is made (``Node.supplied``).

    Training or evaluation is decided when a graph runs, not when it is built, so a few inputs take a
    value the *mode* decides (``asgteach.backends.mode_feeds``) or the runner keeps as state:

    - ``"dropout_mask"`` (``nn.Dropout``): in training a fresh random mask that drops each element with
      probability ``p`` and scales the kept ones by ``1 / (1 - p)``; in evaluation ones;
    - ``"training_flag"`` (``nn.BatchNorm1d``/``2d``): 1.0 in training, 0.0 in evaluation. A graph that can
      only be evaluated (a BatchNorm given one value per channel: a batch of one example) says why in
      ``refuse``, and asking it to train raises that;
    - ``"running_stat"`` (BatchNorm's running mean and variance): state, like an optimizer's moments. Its
      first value is ``fill``; ``next`` is the node that computes its value after a training step.
    """

    kind: str
    p: float = 0.0
    fill: float = 0.0
    next: int | None = None
    refuse: str = ""

    def __post_init__(self) -> None:
        if self.kind not in SUPPLIED_KINDS:
            raise ValueError(f"Supplied: kind must be one of {SUPPLIED_KINDS}, got {self.kind!r}")
        if self.refuse and self.kind != "training_flag":
            raise ValueError(f"Supplied: only a training flag refuses training, not a {self.kind}")
        if self.kind == "dropout_mask" and not 0.0 <= self.p < 1.0:
            raise ValueError(f"Supplied: a dropout mask's p must be in [0, 1), got {self.p!r}")

    def __repr__(self) -> str:
        """Only what the kind uses: ``Supplied('dropout_mask', p=0.25)``, ``Supplied('running_stat', fill=1.0,
        next=21)``."""
        extra = {"dropout_mask": f", p={self.p!r}", "running_stat": f", fill={self.fill!r}, next={self.next!r}",
                 "training_flag": f", refuse={self.refuse!r}" if self.refuse else ""}
        return f"Supplied({self.kind!r}{extra.get(self.kind, '')})"


@dataclass
class Node:
    """One vertex of the ASG.

    Attributes:
        id: position in ``graph.nodes`` (also a topological index).
        op: the op name, a key of ``asgteach.ops.REGISTRY``; "input", "parameter" and
            "constant" are the leaves.
        inputs: ids of the nodes this one reads, in argument order.
        attrs: the op's static arguments (``axis``, ``keepdims``, ...), JSON-friendly.
        shape: the output shape, inferred when the node was created.
        dtype: "float" or "int" (see ``DTYPES``).
        name: a human name (inputs and parameters carry the user's name).
        phase: "forward" or "backward".
        source: ``file:line`` of the user's code that created the node.
        meta: facts for tools and views, never behaviour (the keys are :data:`META_KEYS`): a
            parameter's layer/role/init, which forward node a backward node belongs to
            (``vjp_of``), which node a gradient is of (``grad_of``).
        supplied: for an input whose value a runner supplies (a dropout mask, BatchNorm's training
            flag and running statistics), what it is: :class:`Supplied`; None for every other node.
    """

    id: int
    op: str
    inputs: tuple[int, ...]
    attrs: dict[str, Any]
    shape: tuple[int, ...]
    dtype: str
    name: str
    phase: str = "forward"
    source: str = "<unknown>:0"
    meta: dict[str, Any] = field(default_factory=dict)
    supplied: Supplied | None = None

    @property
    def size(self) -> int:
        return int(math.prod(self.shape))   # (a plan asks thousands of times: np.prod costs ~20x more)

    def describe(self) -> str:
        """A one-line human description, used in error messages."""
        label = f"'{self.name}'" if self.name and self.name != self.op else ""
        return f"{self.op} {label} #{self.id} {self.shape} at {self.source}".replace("  ", " ")


class ReleasedError(RuntimeError):
    """A node's stored value was released by ``graph.collect()`` (no live Tensor reached it)."""


class GraphLoadError(ValueError):
    """``Graph.from_json`` refused a document: what is wrong and, for a node, which one (id, op, name, line)."""


class Graph:
    """An append-only computation graph; also a context manager.

    >>> import asgteach as at
    >>> with at.Graph() as g:
    ...     x = at.input("x", (3,))
    ...     y = at.sum(x * x)
    >>> [n.op for n in g.nodes]
    ['input', 'mul', 'sum']

    Ops called outside any ``with Graph()`` block go to a process-wide default graph
    (``at.default_graph()``), made for notebooks: its session lets a name be re-used (``rebind=True``:
    the newest parameter of a name replaces the old one) and releases by itself what no live Tensor
    can reach (``auto_collect=True``); see session.py. An explicit graph is strict: a second parameter
    of the same name is an error.
    """

    def __init__(self, name: str = "graph", *, rebind: bool = False, auto_collect: bool = False) -> None:
        self.name = name
        self.nodes: list[Node] = []
        #: values of constant nodes, by node id (kept out of Node so JSON stays small)
        self.constants: dict[int, np.ndarray] = {}
        self._phase = "forward"
        self._phase_meta: dict[str, Any] = {}
        #: name -> id of the NEWEST input or parameter of that name
        self._by_name: dict[str, int] = {}
        #: how the graph is used: live Tensors, notebook cells, the rule for names, memory (session.py)
        self.session = Session(rebind=rebind, auto_collect=auto_collect)
        #: ids of nodes that no live Tensor reached at some ``collect()`` (never reachable again)
        self.released: set[int] = set()
        #: how many sweeps ran (backends compare it to know when to drop their plans)
        self.collections = 0
        #: True once ``at.reset()`` replaced this default graph: its Tensors cannot mix with new ones
        self.retired = False
        #: autograd's record of each ``at.grad`` call: the seed, the order the backward sweep visited
        #: forward nodes, which node holds each gradient (read by the step-through view; saved with the graph)
        self.passes: list[dict[str, Any]] = []
        #: the backends' compiled plans (``backends.PlanCache``, theirs to fill), kept here to die with the
        #: graph: a plan refers to its graph, so a table of plans kept elsewhere would keep every graph alive
        self.plan_cache: Any = None

    # -- building ------------------------------------------------------------------
    def add_node(self, op: str, inputs: tuple[int, ...] | list[int], attrs: dict[str, Any] | None,
                 shape: tuple[int, ...], dtype: str, name: str | None = None, source: str | None = None,
                 meta: dict[str, Any] | None = None, value: np.ndarray | None = None,
                 supplied: Supplied | None = None) -> Node:
        """Append a node and return it. Callers (ops) have already checked shapes.

        ``value`` is a constant's array (stored in ``graph.constants``); ``supplied`` declares an input
        whose value the runner supplies (:class:`Supplied`).
        """
        if not isinstance(dtype, str) or dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
        if supplied is not None and (op != "input" or not isinstance(supplied, Supplied)):
            raise ValueError(f"only an input is supplied by the runner (a Supplied), got {op} with {supplied!r}")
        for i in inputs:
            if not 0 <= i < len(self.nodes):
                raise ValueError(f"input id {i} is not a node of this graph")
            if i in self.released:
                raise ReleasedError(
                    f"node #{i} ({self.nodes[i].op} '{self.nodes[i].name}') was released: no Tensor referred "
                    f"to it any more, so graph.collect() dropped its value. Build from Tensors you still hold."
                )
        source = source or user_source()
        self.session.before_add(self, op, name, inputs, value, source)  # may sweep; a parameter's name rule
        node_meta = {**self._phase_meta, **(meta or {})}
        node = Node(id=len(self.nodes), op=op, inputs=tuple(int(i) for i in inputs), attrs=dict(attrs or {}),
                    shape=tuple(int(d) for d in shape), dtype=dtype, name=name or op, phase=self._phase,
                    source=source, meta=node_meta, supplied=supplied)
        self.nodes.append(node)
        if op in ("input", "parameter"):
            self._by_name[node.name] = node.id
        if value is not None:
            self.constants[node.id] = value
        self.session.added(node, value)
        return node

    def unbind(self, node_ids: Collection[int]) -> None:
        """Names that mean one of ``node_ids`` mean nothing now (the nodes stay; a Tensor still names them)."""
        for name, node_id in list(self._by_name.items()):
            if node_id in node_ids:
                del self._by_name[name]

    def collect(self, keep: Any = ()) -> int:
        """Release what no live Tensor can reach; return how many nodes were newly released.

        Constants' arrays are dropped and names unbound; nodes stay, so ids never change.
        ``keep``: more ids to treat as live. The sweep is the session's: :meth:`Session.collect`.
        """
        return self.session.collect(self, keep)

    @contextmanager
    def phase(self, phase: str | None, **meta: Any) -> Iterator[None]:
        """Stamp every node created inside the block with ``phase`` (None: the current one) and ``meta``."""
        phase = self._phase if phase is None else phase
        if phase not in PHASES:
            raise ValueError(f"phase must be one of {PHASES}, got {phase!r}")
        old_phase, old_meta = self._phase, self._phase_meta
        self._phase, self._phase_meta = phase, {**old_meta, **meta}
        try:
            yield
        finally:
            self._phase, self._phase_meta = old_phase, old_meta

    # -- looking things up ---------------------------------------------------------
    def __len__(self) -> int:
        return len(self.nodes)

    def __getitem__(self, node_id: int) -> Node:
        return self.nodes[node_id]

    def find(self, name: str) -> Node:
        """The newest input or parameter called ``name``."""
        node = self.bound(name)
        if node is None:
            known = ", ".join(sorted(self._by_name)) or "none"
            raise KeyError(f"no input or parameter named {name!r} in this graph (known: {known})")
        return node

    def bound(self, name: str) -> Node | None:
        """The node ``name`` means now (the newest input or parameter of that name), or None."""
        node_id = self._by_name.get(name)
        return None if node_id is None else self.nodes[node_id]

    def inputs(self) -> list[Node]:
        return [n for n in self.nodes if n.op == "input"]

    def parameters(self) -> list[Node]:
        return [n for n in self.nodes if n.op == "parameter"]

    def ancestors(self, ids: list[int] | tuple[int, ...]) -> list[int]:
        """Ids of ``ids`` and everything they depend on, in topological (id) order."""
        seen: set[int] = set()
        stack = list(ids)
        while stack:
            i = stack.pop()
            if i in seen:
                continue
            seen.add(i)
            stack.extend(self.nodes[i].inputs)
        return sorted(seen)

    def consumers(self) -> dict[int, list[int]]:
        """For each node id, the ids of the nodes that read it (fan-out)."""
        out: dict[int, list[int]] = {n.id: [] for n in self.nodes}
        for n in self.nodes:
            for i in n.inputs:
                out[i].append(n.id)
        return out

    def extract(self, ids: list[int] | tuple[int, ...], name: str | None = None) -> tuple["Graph", dict[int, int]]:
        """A new graph holding ``ids`` and their ancestors (ids renumbered), and the id map.

        Tools that must add nodes without touching the user's graph (gradcheck, for one)
        work on such a copy.
        """
        keep = self.ancestors(ids)
        g = Graph(name or f"{self.name} (copy)")
        mapping: dict[int, int] = {}
        for i in keep:
            n = self.nodes[i]
            new = g.add_node(n.op, [mapping[j] for j in n.inputs], dict(n.attrs), n.shape, n.dtype,
                             name=n.name, source=n.source, meta={**n.meta, "copied_from": n.id},
                             supplied=n.supplied)
            new.phase = n.phase
            mapping[i] = new.id
            if i in self.constants:
                g.constants[new.id] = self.constants[i]
        for new in g.nodes:     # a running statistic's next value is a later node: in the copy, or not kept
            if new.supplied is not None and new.supplied.next is not None:
                new.supplied = replace(new.supplied, next=mapping.get(new.supplied.next))
        return g, mapping

    # -- context manager: ``with at.Graph() as g:`` ----------------------------------
    def __enter__(self) -> "Graph":
        graph_stack().append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        graph_stack().pop()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """A Graph ending a notebook cell draws itself (see :func:`notebook_display`)."""
        return notebook_display(self, include, exclude)

    def __str__(self) -> str:
        """``print(graph)``: the graph as a program, one line per node (see :meth:`listing`)."""
        return self.listing()

    def listing(self, ids: Any = None) -> str:
        """The graph as a program, one line per node, in order (= a topological order)::

            %3 = matmul %0 %1  (4, 2) float  # model.py:12
            %9 = mul %8 %1  (4, 3) float  backward of %3  # model.py:14

        ``%k`` is node ``k``; leaves show their name, other nodes their inputs and attributes;
        ``ids`` limits the listing to those nodes (e.g. ``graph.ancestors([y.node_id])``).
        """
        ids = range(len(self.nodes)) if ids is None else sorted(ids)
        lines = [repr(self)]
        for i in ids:
            n = self.nodes[i]
            if not n.inputs:
                args = repr(n.name)
            else:
                args = " ".join(f"%{j}" for j in n.inputs)
                if n.name != n.op:
                    args += f"  '{n.name}'"
            attrs = "".join(f" {k}={_short_attr(v)}" for k, v in n.attrs.items())
            notes = []
            if n.phase == "backward":
                of = n.meta.get("vjp_of", n.meta.get("grad_of"))
                notes.append(f"backward of %{of}" if isinstance(of, int) else "backward")
            if i in self.released:
                notes.append("released")
            note = "  " + ", ".join(notes) if notes else ""
            where = os.path.basename(n.source.rsplit(":", 1)[0]) + ":" + n.source.rsplit(":", 1)[-1]
            lines.append(f"  %{i} = {n.op} {args}{attrs}  {n.shape} {n.dtype}{note}  # {where}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        fwd = sum(1 for n in self.nodes if n.phase == "forward")
        return f"<Graph {self.name!r}: {len(self.nodes)} nodes ({fwd} forward, {len(self.nodes) - fwd} backward)>"

    # -- serialisation -------------------------------------------------------------
    def to_json(self, include_constants: bool = True) -> str:
        """The structure as JSON, constants inlined (as nested lists) by default. Parameter *values* are
        not part of the structure; they travel in safetensors files (see the Trainer)."""
        from .graph_json import dump   # (the format and its checks: graph_json.py)

        return dump(self, include_constants)

    @classmethod
    def from_json(cls, text: str | bytes, known_ops: Any) -> "Graph":
        """Rebuild a graph written by :meth:`to_json` (same ids, shapes, metadata), checking all of it.

        A graph file is input like any other: it may have been edited by hand, written by an older
        asgteach or made to do harm. So nothing in it is trusted: every node must be what
        :func:`asgteach.ops.apply` would have made (a registered op, earlier inputs, declared attributes,
        the shape its op's rule gives) and a constant numbers filling its shape, else
        :class:`GraphLoadError` names the node (:func:`asgteach.graph_json.load` says why each check).
        ``known_ops`` maps op names to OpSpecs. The op registry sits one layer above graphs (it is built
        on them), so this layer cannot know it: ``at.load_graph(text)`` (``asgteach.ops``) hands it down.
        """
        from .graph_json import load

        return load(cls, text, known_ops)


def _short_attr(value: Any) -> str:
    """An attribute as it reads in a listing: compact, and never a wall of numbers."""
    text = repr(tuple(value) if isinstance(value, list) else value)
    return text if len(text) <= 40 else text[:37] + "..."


def notebook_display(obj: Any, include: Any = None, exclude: Any = None) -> dict[str, Any]:
    """The notebook display of ``obj`` (a Graph or Tensor): the widgets' picture (``hooks.display``), else its repr."""
    if hooks.display is None:
        return {"text/plain": repr(obj)}
    return hooks.display(obj, include, exclude)
