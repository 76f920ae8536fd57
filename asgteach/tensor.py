"""Tensor: a symbolic handle to one node of a graph.

A Tensor holds no numbers. It is a pair (graph, node id) with operator overloads, so
``y = x @ w + b`` reads like numpy but *appends nodes* to the graph. The numbers appear
only when a backend runs the graph (``at.run``).

Two Tensors are ``==`` when they name the same node, which lets Tensors be dict keys
(``at.run(..., {x: X})``). For elementwise comparison use ``at.equal`` / ``at.greater``
(or ``x > y``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .graph import notebook_display
from .source import source_line_text

if TYPE_CHECKING:
    from .graph import Graph, Node

__all__ = ["Tensor"]


def _ops() -> Any:
    # Tensor sits below the ops in the import order; operators reach up lazily.
    from . import ops

    return ops


def _listed(nodes: list["Node"], most: int = 3) -> str:
    names = ", ".join(f"{n.name} {n.shape}" for n in nodes[:most])
    return names + (f" and {len(nodes) - most} more" if len(nodes) > most else "")


def no_value_yet(t: "Tensor", asked: str, then: str) -> TypeError:
    """The error for asking a Tensor for numbers it does not have (``float(t)``, ``t.numpy()``, ``if t:``).

    It says what the Tensor is (its node, shape and the user's line that made it), that its
    numbers exist only once a backend runs the graph, and the call that gives them, with the
    inputs to feed (found by walking back from the node: the leaves it reads).
    """
    n, g = t.node, t.graph
    line = source_line_text(n.source)
    leaves = [g.nodes[i] for i in g.ancestors([n.id])]
    inputs = [m for m in leaves if m.op == "input"]
    params = [m for m in leaves if m.op == "parameter"]
    feeds = ", ".join(f'"{m.name}": ...' for m in inputs[:3]) + (", ..." if len(inputs) > 3 else "")
    label = f"{n.op} '{n.name}'" if n.name != n.op else n.op
    msg = (f"{asked}: a Tensor has no value yet (define-then-run). This one is node #{n.id} ({label}, shape "
           f"{n.shape}) of a graph, made at {n.source}" + (f"\n      {line}" if line else "") +
           "\n  Building the graph computed nothing: its numbers exist once a backend runs it. Run it, then use "
           "the array it returns:\n"
           f"      value = at.run(tensor, {{{feeds}}})\n"
           f"      {then}")
    if inputs:
        msg += f"\n  the inputs it needs fed: {_listed(inputs)}"
    if params:
        msg += (f"\n  it also reads {len(params)} parameter{'s' if len(params) > 1 else ''} ({_listed(params)}): "
                "feed them too, or let the Trainer that holds their values run it: trainer.run([tensor], feeds)")
    return TypeError(msg)


class Tensor:
    """A node of a graph, seen as a value-to-be. Build with ``at.input``, ops, operators."""

    __slots__ = ("graph", "node_id", "__weakref__")
    #: make ``numpy_array * tensor`` call our ``__rmul__`` instead of numpy's loop
    __array_ufunc__ = None

    def __init__(self, graph: "Graph", node_id: int) -> None:
        self.graph = graph
        self.node_id = node_id
        graph.session.track(self)  # a live Tensor keeps its node and ancestors from being released

    # -- what the node is ------------------------------------------------------------
    @property
    def node(self) -> "Node":
        return self.graph.nodes[self.node_id]

    @property
    def shape(self) -> tuple[int, ...]:
        return self.node.shape

    @property
    def ndim(self) -> int:
        return len(self.node.shape)

    @property
    def size(self) -> int:
        return self.node.size

    @property
    def dtype(self) -> str:
        return self.node.dtype

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def op(self) -> str:
        return self.node.op

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """A Tensor ending a notebook cell draws its graph (see :func:`asgteach.graph.notebook_display`)."""
        return notebook_display(self, include, exclude)

    def __repr__(self) -> str:
        n = self.node
        label = f" {n.name!r}" if n.name != n.op else ""
        return f"<Tensor #{n.id} {n.op}{label} shape={n.shape} {n.dtype} {n.phase}>"

    def __hash__(self) -> int:
        return hash((id(self.graph), self.node_id))

    def __eq__(self, other: object) -> bool:  # identity of the node, see module doc
        return isinstance(other, Tensor) and other.graph is self.graph and other.node_id == self.node_id

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    # -- no numbers before a run ----------------------------------------------------------
    # Python and numpy ask an object for its value in many ways: `if t:`, float(t), int(t),
    # range(t), np.asarray(t), f"{t:.3f}", and PyTorch habits, t.item() and t.numpy(). A Tensor
    # has no value to give (define-then-run), so each of them explains that and names the call
    # that gives one (no_value_yet), instead of a bare "not a number" or a silent object array.
    def __bool__(self) -> bool:
        raise no_value_yet(self, "`if`, `and`, `or`, `not` or bool() on a Tensor",
                           "if value > 0: ...    (to choose inside the graph instead: at.where(cond, a, b))")

    def __float__(self) -> float:
        raise no_value_yet(self, "float() of a Tensor", "float(value)")

    def __int__(self) -> int:
        raise no_value_yet(self, "int() of a Tensor", "int(value)")

    def __complex__(self) -> complex:
        raise no_value_yet(self, "complex() of a Tensor", "complex(value)")

    def __index__(self) -> int:
        raise no_value_yet(self, "a Tensor used as an integer (a size, range(), an index)",
                           "range(int(value))    (a size the graph needs must be a Python int when it is built)")

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        raise no_value_yet(self, "np.asarray() / np.array() of a Tensor", "value    # a numpy array")

    def __format__(self, spec: str) -> str:
        if not spec:  # f"{t}" and str.format("{}", t): the repr
            return repr(self)
        raise no_value_yet(self, f"formatting a Tensor as a number (f\"{{t:{spec}}}\")", f'f"{{value:{spec}}}"')

    def numpy(self) -> Any:
        """Not here: a Tensor has no numbers until the graph runs. Raises a TypeError that says what to call."""
        raise no_value_yet(self, "Tensor.numpy()", "value    # a numpy array")

    def item(self) -> Any:
        """Not here: a Tensor has no numbers until the graph runs. Raises a TypeError that says what to call."""
        raise no_value_yet(self, "Tensor.item()", "value.item()")

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d Tensor")
        return self.shape[0]

    def __iter__(self) -> Any:
        raise TypeError("a Tensor cannot be iterated; index it instead (x[0], x[:, 1]), or iterate the array "
                        "at.run(tensor, feeds) returns")

    # -- arithmetic operators --------------------------------------------------------
    def __add__(self, o: Any) -> "Tensor":
        return _ops().add(self, o)

    def __radd__(self, o: Any) -> "Tensor":
        return _ops().add(o, self)

    def __sub__(self, o: Any) -> "Tensor":
        return _ops().sub(self, o)

    def __rsub__(self, o: Any) -> "Tensor":
        return _ops().sub(o, self)

    def __mul__(self, o: Any) -> "Tensor":
        return _ops().mul(self, o)

    def __rmul__(self, o: Any) -> "Tensor":
        return _ops().mul(o, self)

    def __truediv__(self, o: Any) -> "Tensor":
        return _ops().div(self, o)

    def __rtruediv__(self, o: Any) -> "Tensor":
        return _ops().div(o, self)

    def __pow__(self, o: Any) -> "Tensor":
        return _ops().pow(self, o)

    def __rpow__(self, o: Any) -> "Tensor":
        return _ops().pow(o, self)

    def __matmul__(self, o: Any) -> "Tensor":
        return _ops().matmul(self, o)

    def __rmatmul__(self, o: Any) -> "Tensor":
        return _ops().matmul(o, self)

    def __neg__(self) -> "Tensor":
        return _ops().neg(self)

    def __pos__(self) -> "Tensor":
        return self

    def __abs__(self) -> "Tensor":
        return _ops().abs(self)

    def __gt__(self, o: Any) -> "Tensor":
        return _ops().greater(self, o)

    def __lt__(self, o: Any) -> "Tensor":
        return _ops().greater(o, self)

    def __getitem__(self, index: Any) -> "Tensor":
        return _ops().getitem(self, index)

    # -- numpy-style methods ---------------------------------------------------------
    def sum(self, axis: Any = None, keepdims: bool = False) -> "Tensor":
        return _ops().sum(self, axis=axis, keepdims=keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False) -> "Tensor":
        return _ops().mean(self, axis=axis, keepdims=keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> "Tensor":
        return _ops().max(self, axis=axis, keepdims=keepdims)

    def var(self, axis: Any = None, keepdims: bool = False) -> "Tensor":
        return _ops().var(self, axis=axis, keepdims=keepdims)

    def reshape(self, *shape: Any) -> "Tensor":
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return _ops().reshape(self, shape)

    def transpose(self, *axes: Any) -> "Tensor":
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        return _ops().transpose(self, axes or None)

    @property
    def T(self) -> "Tensor":
        return _ops().transpose(self)

    def exp(self) -> "Tensor":
        return _ops().exp(self)

    def log(self) -> "Tensor":
        return _ops().log(self)

    def sqrt(self) -> "Tensor":
        return _ops().sqrt(self)

    def tanh(self) -> "Tensor":
        return _ops().tanh(self)

    def sigmoid(self) -> "Tensor":
        return _ops().sigmoid(self)

    def relu(self) -> "Tensor":
        return _ops().relu(self)

    def softmax(self, axis: int = -1) -> "Tensor":
        return _ops().softmax(self, axis=axis)

    # -- gradient control ------------------------------------------------------------
    def detach(self) -> "Tensor":
        """``at.stop_gradient(self)`` by PyTorch's name: the same values, a constant for ``at.grad`` and ``at.jvp``.

        Unlike PyTorch's, it copies nothing and shares nothing: it appends a stop_gradient node to the
        graph, the wall that the graph view draws and that the gradient does not cross.
        """
        return _ops().stop_gradient(self)
