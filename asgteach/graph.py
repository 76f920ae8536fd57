"""The Abstract Semantic Graph (ASG): nodes and the graph that holds them.

asgteach is *define-then-run*: calling ``at.relu(x @ w)`` computes nothing. It appends
nodes to a :class:`Graph`, and only a backend (``at.run``) later turns the graph into
numbers. Keeping the whole computation as data is what lets us draw it, check its
shapes before anything runs, differentiate it into a second graph, and run it on
different hardware.

Two rules keep the graph simple:

* **Append-only.** A node is never changed or removed once added. A node can only use
  nodes that already exist, so the order of ``graph.nodes`` is always a valid
  topological order: walking it front to back evaluates the graph, walking it back to
  front is reverse-mode autodiff.
* **Every node remembers where the user created it** (``node.source``, ``file:line``),
  so an error about a node can point at the line of the user's code that made it.

Names and memory (the rules a notebook needs, written out in docs/DESIGN.md):

* **A name means the newest node of that name.** ``graph.find("x")`` and by-name feeds
  (``{"x": X}``) bind to the most recently created input or parameter called "x". In the
  default graph, re-creating a parameter of an existing name replaces the old one (with a
  one-line notice, unless the same notebook cell made the old one); in an explicit
  ``with at.Graph()`` block two parameters of one name are an error naming both lines.
* **What no live Tensor can reach is released.** Nodes stay (ids never change), but
  ``graph.collect()`` drops the stored values of constants that no live :class:`Tensor`
  depends on; backends drop their compiled plans for such nodes. The default graph
  collects by itself (after each notebook cell, and when its constants grow).

This module is the bottom of the stack: of asgteach it imports only :mod:`asgteach.source`
(which finds the user's line). Whatever sits above and must reach down here comes to it:
the op registry (``registered_ops``) and the notebook display (``display_hook``).
"""

from __future__ import annotations

import math
import os
import threading
import warnings
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np

from .source import source_line_text, user_source  # re-exported: `from asgteach.graph import user_source` still works

if TYPE_CHECKING:
    from .tensor import Tensor

__all__ = [
    "Node", "Graph", "default_graph", "global_default_graph", "reset_default_graph", "PHASES", "DTYPES",
    "NameReboundWarning", "ReleasedError", "GraphLoadError", "notebook_display", "user_source", "source_line_text",
]

#: "forward" nodes are what the user wrote; "backward" nodes were appended by autograd.
PHASES = ("forward", "backward")
#: Element kinds a node can hold. The *precision* of "float" (float32 or float64) is
#: chosen when the graph runs, from the feeds: the same graph runs in float32 for speed
#: and in float64 for gradient checks.
DTYPES = ("float", "int")

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
        meta: free-form facts for tools: a parameter's layer/role/init, which forward
            node a backward node belongs to (``vjp_of``), which node a gradient is of
            (``grad_of``).
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

    @property
    def size(self) -> int:
        return int(math.prod(self.shape))   # (a plan asks thousands of times: np.prod costs ~20x more)

    def describe(self) -> str:
        """A one-line human description, used in error messages."""
        label = f"'{self.name}'" if self.name and self.name != self.op else ""
        return f"{self.op} {label} #{self.id} {self.shape} at {self.source}".replace("  ", " ")


class NameReboundWarning(UserWarning):
    """A parameter name of the default graph now means a newer parameter (see :class:`Graph`)."""


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
    (``at.default_graph()``), which is made for notebooks: it lets a name be re-used
    (``rebind=True``: the newest parameter of a name replaces the old one) and it releases
    by itself what no live Tensor can reach (``auto_collect=True``). An explicit graph is
    strict: a second parameter of the same name is an error.
    """

    #: the default graph collects when its constants grew by this much since the last sweep
    #: (or by as much as survived that sweep, if more): memory stays within ~2x of what is live
    COLLECT_BYTES = 64 * 2**20

    def __init__(self, name: str = "graph", *, rebind: bool = False, auto_collect: bool = False) -> None:
        self.name = name
        self.nodes: list[Node] = []
        #: values of constant nodes, by node id (kept out of Node so JSON stays small)
        self.constants: dict[int, np.ndarray] = {}
        self._phase = "forward"
        self._phase_meta: dict[str, Any] = {}
        #: name -> id of the NEWEST input or parameter of that name
        self._by_name: dict[str, int] = {}
        self.rebind = rebind
        self.auto_collect = auto_collect
        #: the Tensors alive right now (weakly held): what they reach is what must be kept
        self._tensors: weakref.WeakSet[Tensor] = weakref.WeakSet()
        #: ids of nodes that no live Tensor reached at some ``collect()`` (never reachable again)
        self.released: set[int] = set()
        #: how many sweeps ran (backends compare it to know when to drop their plans)
        self.collections = 0
        self._const_bytes_new = 0        # constant bytes added since the last sweep
        self._const_bytes_kept = 0       # constant bytes that survived the last sweep
        #: the notebook cell running now (set by asgteach.cells), and the names each cell bound
        self._cell: Any = None
        self._bound_by_cell: dict[Any, list[tuple[str, int]]] = {}
        self._noticed: set[tuple[str, str]] = set()   # (name prefix, source) already told about
        #: one record per ``at.grad`` call: the seed, the order in which the backward
        #: sweep visited forward nodes, and which node holds each gradient (read by
        #: the step-through view).
        self.passes: list[dict[str, Any]] = []

    # -- building ------------------------------------------------------------------
    def add_node(
        self,
        op: str,
        inputs: tuple[int, ...] | list[int],
        attrs: dict[str, Any] | None,
        shape: tuple[int, ...],
        dtype: str,
        name: str | None = None,
        source: str | None = None,
        meta: dict[str, Any] | None = None,
        value: np.ndarray | None = None,
    ) -> Node:
        """Append a node and return it. Callers (ops) have already checked shapes.

        ``value`` is a constant's array (stored in ``graph.constants``).
        """
        if not isinstance(dtype, str) or dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
        for i in inputs:
            if not 0 <= i < len(self.nodes):
                raise ValueError(f"input id {i} is not a node of this graph")
            if i in self.released:
                raise ReleasedError(
                    f"node #{i} ({self.nodes[i].op} '{self.nodes[i].name}') was released: no Tensor referred "
                    f"to it any more, so graph.collect() dropped its value. Build from Tensors you still hold."
                )
        source = source or user_source()
        if (value is not None and self.auto_collect
                and self._const_bytes_new + value.nbytes > max(self.COLLECT_BYTES, self._const_bytes_kept)):
            self.collect(keep=inputs)  # before appending: the new node has no Tensor yet
        if op == "parameter" and name:
            self._check_parameter_name(name, source)
        node_meta = dict(self._phase_meta)
        node_meta.update(meta or {})
        node = Node(
            id=len(self.nodes),
            op=op,
            inputs=tuple(int(i) for i in inputs),
            attrs=dict(attrs or {}),
            shape=tuple(int(d) for d in shape),
            dtype=dtype,
            name=name or op,
            phase=self._phase,
            source=source,
            meta=node_meta,
        )
        self.nodes.append(node)
        if op in ("input", "parameter"):
            self._by_name[node.name] = node.id
            if self._cell is not None:
                self._bound_by_cell.setdefault(self._cell, []).append((node.name, node.id))
        if value is not None:
            self.constants[node.id] = value
            self._const_bytes_new += value.nbytes
        return node

    def _check_parameter_name(self, name: str, source: str) -> None:
        """The naming rule for parameters (see the class docstring)."""
        old_id = self._by_name.get(name)
        if old_id is None or self.nodes[old_id].op != "parameter":
            return
        old = self.nodes[old_id]
        if not self.rebind:
            raise ValueError(
                f"a parameter named {name!r} already exists in this graph:\n"
                f"  first  #{old.id} made at {_at(old.source)}\n"
                f"  second made at {_at(source)}\n"
                f"  two parameters of one name cannot be saved, loaded or fed apart: give one of them "
                f"another name (a layer's name=)"
            )
        # one notice per re-built layer and line, not one per parameter of it
        prefix = name.split(".")[0]
        if (prefix, source) in self._noticed:
            return
        self._noticed.add((prefix, source))
        if "." in name:
            text = (f"asgteach: the parameters of {prefix!r} now mean the new ones made here; the old ones "
                    f"(made at {old.source}) stay with the tensors built from them")
        else:
            text = (f"asgteach: parameter {name!r} now means the new one made here; the old one "
                    f"(made at {old.source}) stays with the tensors built from it")
        path, _, line = source.rpartition(":")
        warnings.warn_explicit(
            text, NameReboundWarning, path or source,
            int(line) if line.isdigit() else 0,
        )

    # -- notebook cells and memory ---------------------------------------------------
    def begin_cell(self, key: Any) -> None:
        """A notebook cell ``key`` starts running: the names its previous run bound are unbound.

        So re-running a cell re-creates ``mlp.0.weight`` as if for the first time (no notice,
        the same automatic layer names), while names bound by other cells stay. Tensors made
        by the previous run keep working: only the *names* move on.
        """
        for name, node_id in self._bound_by_cell.pop(key, []):
            if self._by_name.get(name) == node_id:
                del self._by_name[name]
        self._cell = key

    def end_cell(self) -> None:
        self._cell = None

    def _track(self, tensor: "Tensor") -> None:
        """Called by every new Tensor: live Tensors are the roots that ``collect`` keeps."""
        self._tensors.add(tensor)

    def live_ids(self) -> set[int]:
        """Ids of the nodes some live Tensor depends on (itself included)."""
        return set(self.ancestors({t.node_id for t in list(self._tensors)}))

    def collect(self, keep: Any = ()) -> int:
        """Release what no live Tensor can reach; return how many nodes were newly released.

        A node nobody can name any more (no Tensor of it or of anything built from it is
        alive) can never be run again, so its constant's array is dropped and its name
        unbound. The node itself stays, so ids (and the graph's drawing) do not change.
        Backends see ``collections`` change and drop their plans for released nodes.
        ``keep``: more ids to treat as live (the inputs of a node being added).
        """
        live = self.live_ids() | set(self.ancestors(list(keep)))
        newly = [i for i in range(len(self.nodes)) if i not in live and i not in self.released]
        self.released.update(newly)
        for i in newly:
            self.constants.pop(i, None)
        for name, node_id in list(self._by_name.items()):
            if node_id in self.released:
                del self._by_name[name]
        self._const_bytes_kept = sum(v.nbytes for v in self.constants.values())
        self._const_bytes_new = 0
        self.collections += 1
        return len(newly)

    @contextmanager
    def phase(self, phase: str, **meta: Any) -> Iterator[None]:
        """Stamp every node created inside the block with ``phase`` (and ``meta``)."""
        if phase not in PHASES:
            raise ValueError(f"phase must be one of {PHASES}, got {phase!r}")
        old_phase, old_meta = self._phase, self._phase_meta
        self._phase = phase
        self._phase_meta = {**old_meta, **meta}
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
        try:
            return self.nodes[self._by_name[name]]
        except KeyError:
            known = ", ".join(sorted(self._by_name)) or "none"
            raise KeyError(f"no input or parameter named {name!r} in this graph (known: {known})")

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
                             name=n.name, source=n.source, meta={**n.meta, "copied_from": n.id})
            new.phase = n.phase
            mapping[i] = new.id
            if i in self.constants:
                g.constants[new.id] = self.constants[i]
        return g, mapping

    # -- context manager: ``with at.Graph() as g:`` ----------------------------------
    def __enter__(self) -> "Graph":
        _stack().append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _stack().pop()

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
        """The structure as JSON. Constants are inlined (as nested lists) by default.

        Parameter *values* are not part of the structure; they travel in safetensors
        files (see the Trainer).
        """
        from .graph_json import dump   # (the format and its checks: graph_json.py)

        return dump(self, include_constants)

    @classmethod
    def from_json(cls, text: str | bytes, known_ops: Any = None) -> "Graph":
        """Rebuild a graph written by :meth:`to_json` (same ids, shapes, metadata), checking all of it.

        A graph file is input like any other: it may have been edited by hand, written by an
        older asgteach or made to do harm. So nothing in it is trusted. Every node must be
        what :func:`asgteach.ops.apply` would have made: an op that is registered here, inputs
        that are *earlier* nodes, attributes the op declares, and the shape and element kind
        that the op's own shape rule (``infer``) gives for those inputs and attributes. A
        node declared ``(2,)`` whose rule says ``(3,)`` would otherwise run as ``(3,)`` on
        numpy and as ``(2,)`` on the GPU, whose buffers are sized from the declared shape.
        A constant's data must be numbers of a numeric or bool type, exactly as many as its
        declared shape holds, checked before any array is made: a ``dtype`` of "U50000000"
        would turn a few bytes of JSON into hundreds of MiB, and "object" would load
        arbitrary Python values. Anything else raises :class:`GraphLoadError` naming the node
        (id, op, name and the line that made it) and what is wrong with it.

        ``known_ops`` maps op names to their :class:`~asgteach.ops.OpSpec`; it defaults to the
        registry, which ``asgteach.ops`` hands to this module as ``registered_ops`` when it loads.
        """
        from .graph_json import load

        ops = registered_ops if known_ops is None else known_ops
        return load(cls, text, ops)


def _short_attr(value: Any) -> str:
    """An attribute as it reads in a listing: compact, and never a wall of numbers."""
    text = repr(tuple(value) if isinstance(value, list) else value)
    return text if len(text) <= 40 else text[:37] + "..."


def _at(source: str) -> str:
    """``file:line`` and, when it can be read, the text of that line."""
    text = source_line_text(source)
    return f"{source}  ({text})" if text else source


_local = threading.local()


def _stack() -> list[Graph]:
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


_DEFAULT = Graph("default", rebind=True, auto_collect=True)

#: The op registry (name -> OpSpec), set by ``asgteach.ops`` when it loads; ``from_json`` checks
#: op names against it. (This module imports nothing of ours: the registry comes to it.)
registered_ops: Any = None

#: How a Graph or Tensor that ends a notebook cell draws itself: ``(obj, include, exclude) -> mime
#: bundle``. ``asgteach.widgets.show`` sets it when it loads (``import asgteach`` loads it); the
#: widgets sit far above this module, so the drawing comes to it, as the registry does.
display_hook: Callable[[Any, Any, Any], dict[str, Any]] | None = None


def notebook_display(obj: Any, include: Any = None, exclude: Any = None) -> dict[str, Any]:
    """The notebook display data of ``obj`` (a Graph or Tensor): its picture, or the plain repr without widgets."""
    if display_hook is None:
        return {"text/plain": repr(obj)}
    return display_hook(obj, include, exclude)


#: Called whenever the default graph is handed out. ``asgteach.cells`` sets it, to notice a
#: notebook shell and hook its cells; this module itself knows nothing of IPython.
on_default_use: Callable[[], None] | None = None


def default_graph() -> Graph:
    """The graph that ops use right now: the innermost ``with Graph()``, else the default."""
    stack = _stack()
    if stack:
        return stack[-1]
    if on_default_use is not None:
        on_default_use()
    return _DEFAULT


def global_default_graph() -> Graph:
    """The default graph itself, even inside a ``with Graph()`` block: the graph whose names the
    notebook cells own (:mod:`asgteach.cells`). Unlike :func:`default_graph` it notices no shell."""
    return _DEFAULT


def reset_default_graph() -> Graph:
    """Start a fresh, empty default graph (``at.reset()``) and return it.

    Tensors made before keep their old graph and still run; they cannot be mixed with
    new ones (the error says so).
    """
    global _DEFAULT
    _DEFAULT.retired = True  # type: ignore[attr-defined]
    _DEFAULT = Graph("default", rebind=True, auto_collect=True)
    return _DEFAULT
