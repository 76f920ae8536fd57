"""Module: a named bundle of parameters plus a function that builds graph nodes.

In PyTorch a module *computes*. Here a module *builds*: creating ``Linear(3, 2)`` adds
two parameter nodes to the current graph (carrying layer, role and initialiser
metadata), and calling it on a Tensor appends the nodes of ``x @ w + b``. Calling the
same module twice reuses the same parameter nodes — that is weight sharing, visible in
the graph as one parameter with two consumers.
"""

from __future__ import annotations

from typing import Any, Iterator

from ..graph import Graph, Supplied, default_graph
from ..ops.leaves import input as _input
from ..ops import trace as _trace
from ..ops.leaves import parameter as _parameter
from ..tensor import Tensor

__all__ = ["Module", "Sequential"]


class Module:
    """Base class for layers. Subclasses create parameters in ``__init__`` and build in ``forward``.

    Names are hierarchical ("mlp.0.weight"), so saved weights map back to exactly one
    parameter. In an explicit ``with at.Graph()`` a name already used is an error naming both
    lines; in the default graph (a notebook's) re-building a layer replaces the old one
    (see ``Graph``): re-running a cell never fails on its own names.

    There is no ``train()`` / ``eval()`` switch: a module only builds nodes. Training versus
    evaluation is decided when the graph RUNS — ``Trainer.fit`` feeds fresh dropout masks,
    ``Trainer.run`` feeds masks of ones — so one graph serves both.
    """

    kind = "Module"

    def __init__(self, name: str | None = None, graph: Graph | None = None) -> None:
        self.graph = graph or default_graph()
        self.name = name if name is not None else _fresh_name(self.graph, self.kind.lower())
        self._params: dict[str, Tensor] = {}
        self._children: dict[str, Module] = {}

    # -- building blocks for subclasses ----------------------------------------------------
    def param(self, role: str, shape: tuple[int, ...], init: str, **init_args: Any) -> Tensor:
        """Create this module's parameter ``<name>.<role>`` with layer/role/init metadata."""
        full = f"{self.name}.{role}"
        t = _parameter(full, shape, init=init, layer=self.name, role=role, layer_kind=self.kind, graph=self.graph,
                       **init_args)
        self._params[role] = t
        return t

    def child(self, key: str, module: "Module") -> "Module":
        """Register a sub-module (its parameters become part of this module's)."""
        self._children[key] = module
        return module

    def supplied_input(self, role: str, shape: tuple[int, ...], supplied: Supplied) -> Tensor:
        """An input of this layer whose value the runner supplies (``supplied`` says what: a dropout mask,
        a training flag, a running statistic; :class:`asgteach.graph.Supplied`)."""
        return _input(f"{self.name}.{role}", shape, graph=self.graph, supplied=supplied,
                      meta={"layer": self.name, "layer_kind": self.kind})

    # -- what PyTorch users expect -----------------------------------------------------------
    def parameters(self) -> list[Tensor]:
        """All parameters of this module and its children, in creation order."""
        return sorted(self.named_parameters().values(), key=lambda t: t.node_id)

    def named_parameters(self) -> dict[str, Tensor]:
        out = {t.name: t for t in self._params.values()}
        for c in self._children.values():
            out.update(c.named_parameters())
        return out

    def modules(self) -> Iterator["Module"]:
        yield self
        for c in self._children.values():
            yield from c.modules()

    def forward(self, *args: Any, **kwargs: Any) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Tensor:
        for a in args:
            if isinstance(a, Tensor) and not _trace.extends(a.graph, self.graph):   # (an at.vmap trace of it is fine)
                raise ValueError(f"{self.kind} '{self.name}' was created in another graph than its input")
        # nodes built by forward() remember their module (meta["module"]): graph views group them by layer
        with self.graph.phase(None, module=self.name):
            return self.forward(*args, **kwargs)

    def __repr__(self) -> str:
        lines = [f"{self.kind}('{self.name}')"]
        for role, t in self._params.items():
            lines.append(f"  {role}: {t.shape} init={t.node.meta.get('init')}")
        for c in self._children.values():
            lines.extend("  " + line for line in repr(c).splitlines())
        return "\n".join(lines)


class Sequential(Module):
    """Apply modules (or plain functions such as ``at.relu``) one after another."""

    kind = "Sequential"

    def __init__(self, *layers: Any, name: str | None = None) -> None:
        super().__init__(name)
        self.layers = list(layers)
        for i, layer in enumerate(self.layers):
            if isinstance(layer, Module):
                self.child(str(i), layer)

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def _fresh_name(graph: Graph, base: str) -> str:
    """``base``, or ``base_1``, ``base_2``...: the first one no layer of a bound name uses.

    Only names the graph still binds count, so a notebook cell that is re-run (its old
    names unbound, see ``Session.begin_cell``) gets the same automatic names again.
    """
    taken: set[str] = set()
    for node in graph.nodes:
        if node.op != "parameter" or graph.bound(node.name) is not node:
            continue
        layer = node.meta.get("layer") or ""
        parts = layer.split(".")
        taken.update(".".join(parts[:k]) for k in range(1, len(parts) + 1))  # "mlp.0" takes "mlp" too
    k = 0
    while True:
        name = base if k == 0 else f"{base}_{k}"
        if name not in taken:
            return name
        k += 1
