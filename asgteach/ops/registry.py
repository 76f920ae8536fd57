"""The op registry: one :class:`OpSpec` per op, and the one function that builds nodes.

"One op = one place." Everything asgteach knows about ``mul`` lives in its OpSpec:

* ``infer``  — the shape rule, run when the node is created (``ShapeError`` otherwise);
* ``numpy``  — the reference kernel that computes the value;
* ``vjp``    — the backward rule, written *in graph ops*: given the output gradient
  ``g`` (a Tensor) it returns the input gradients as Tensors, so the gradient is itself a
  graph that can be drawn, run on any backend and differentiated again;
* ``jvp``    — optional forward-mode rule (autograd derives one from the VJP otherwise);
* ``wgsl``   — where its GPU kernel lives (filled by the wgpu backend);
* the explanation lives in ``asgteach/explain/<lang>.toml`` under the op's name.

Backends, autograd, the explainer and the tests all read :data:`REGISTRY`; none of them
has a list of ops of its own.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from .. import graph as _graph_module
from ..graph import Graph, default_graph, user_source
from ..shapes import Shape, ShapeError
from ..tensor import Tensor

__all__ = [
    "OpSpec", "REGISTRY", "CATEGORIES", "register", "apply", "NotDifferentiableError",
    "VjpContext", "patched", "as_tensor", "spec",
]

CATEGORIES = (
    "input", "parameter", "constant", "arithmetic", "activation", "comparison", "reduction",
    "normalisation", "linalg", "shape", "convolution", "loss", "gradient", "output",
)


class NotDifferentiableError(TypeError):
    """Raised when a gradient is asked for through an op that has no backward rule."""


@dataclass
class VjpContext:
    """What a backward rule gets to see about the node it differentiates.

    Attributes:
        inputs: the node's inputs, as Tensors (forward values you may reuse).
        out: the node's own output Tensor (e.g. ``exp``'s rule reuses it: d/dx e^x = e^x).
        attrs: the node's static arguments.
        needs: one bool per input: does anything downstream need that input's gradient?
            Rules skip the inputs that are not needed, so no dead nodes are drawn.
    """

    inputs: tuple[Tensor, ...]
    out: Tensor
    attrs: dict[str, Any]
    needs: tuple[bool, ...]


@dataclass
class OpSpec:
    """Everything about one op. See the module docstring for the meaning of each part.

    ``arity`` is the number of tensor inputs (None: any number, as for ``concat``).
    ``diff_inputs`` marks which inputs a gradient flows into (``embedding``'s integer
    ids and ``where``'s condition do not). ``not_differentiable`` is an explicit mark
    with the reason, for ops that have no backward rule at all. ``zero_gradient`` is an
    explicit mark for piecewise-constant ops (``greater``, ``sign``): their derivative is
    zero wherever it exists, so they stop gradients *by design*, not by omission.
    ``input_kinds`` says which element kind each input must hold ("float", "int" or
    "any"), ``out_kind`` the kind of the result ("same": that of the inputs).
    """

    name: str
    category: str
    arity: int | None
    infer: Callable[..., Shape]
    numpy: Callable[..., np.ndarray] | None
    vjp: Callable[[VjpContext, Tensor], Sequence[Tensor | None]] | None = None
    jvp: Callable[[VjpContext, Sequence[Tensor | None]], Tensor | None] | None = None
    not_differentiable: str | None = None
    zero_gradient: str | None = None
    diff_inputs: tuple[bool, ...] | None = None
    input_kinds: tuple[str, ...] | str = "float"
    out_kind: str = "float"
    attrs: dict[str, Any] = field(default_factory=dict)
    wgsl: str | None = None
    leaf: bool = False
    doc: str = ""

    def kind_of_input(self, i: int) -> str:
        return self.input_kinds if isinstance(self.input_kinds, str) else self.input_kinds[i]

    def differentiable_input(self, i: int) -> bool:
        if self.zero_gradient is not None:
            return False
        return True if self.diff_inputs is None else self.diff_inputs[i]


#: name -> OpSpec for every op asgteach knows. Filled by the op family modules.
REGISTRY: dict[str, OpSpec] = {}
_graph_module.registered_ops = REGISTRY  # Graph.from_json checks op names against it


def register(spec: OpSpec) -> OpSpec:
    """Add ``spec`` to the registry (once per name) and return it."""
    if spec.name in REGISTRY:
        raise ValueError(f"op {spec.name!r} is registered twice")
    if spec.category not in CATEGORIES:
        raise ValueError(f"op {spec.name!r}: unknown category {spec.category!r}")
    if not spec.leaf and spec.vjp is None and spec.not_differentiable is None:
        raise ValueError(f"op {spec.name!r} needs a vjp or an explicit not_differentiable reason")
    REGISTRY[spec.name] = spec
    return spec


def spec(name: str) -> OpSpec:
    """The OpSpec called ``name``, with a helpful error for unknown names."""
    try:
        return REGISTRY[name]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(name, REGISTRY, n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"unknown op {name!r}.{hint}") from None


@contextmanager
def patched(name: str, **changes: Any) -> Iterator[OpSpec]:
    """Temporarily replace parts of an op's spec — for bug hunts and tests.

    >>> with patched("div", vjp=my_buggy_rule):   # doctest: +SKIP
    ...     report = at.gradcheck(loss, [x], feeds)
    """
    original = spec(name)
    REGISTRY[name] = replace(original, **changes)
    try:
        yield REGISTRY[name]
    finally:
        REGISTRY[name] = original


def _graph_of(args: Sequence[Any]) -> Graph:
    graphs = {id(a.graph): a.graph for a in args if isinstance(a, Tensor)}
    if len(graphs) > 1:
        if any(getattr(g, "retired", False) for g in graphs.values()):
            raise ValueError(
                "these tensors live in different graphs: some were made before at.reset(), which started "
                "a fresh default graph; re-run the cells that made them"
            )
        raise ValueError(
            "these tensors live in different graphs; build one computation inside one "
            "`with at.Graph():` block"
        )
    return next(iter(graphs.values())) if graphs else default_graph()


def as_tensor(
    value: Any, graph: Graph | None = None, kind: str = "float", source: str | None = None,
    op: str = "", index: int | None = None,
) -> Tensor:
    """A Tensor for ``value``: Tensors pass through; numbers, arrays and lists become constants.

    Anything else (``None``, text, a ragged list) is an error naming ``op`` (the op the
    value was given to), which input it was (``index``) and the user's line.
    """
    if isinstance(value, Tensor):
        return value
    from .leaves import constant, to_array  # leaves registers the constant op

    what = "the value" if not op else "its input" if index is None else f"input {index}"
    try:
        arr = to_array(value, op or "constant", what, source)
    except (TypeError, ValueError) as e:
        raise e.with_traceback(None) from None  # start the traceback here, not inside the checks
    if kind == "float" and arr.dtype.kind != "f":
        arr = arr.astype(np.float64)
    return constant(arr, graph=graph or default_graph(), source=source)


def apply(name: str, *args: Any, **attrs: Any) -> Tensor:
    """Create a node of op ``name`` reading ``args`` and return its Tensor.

    This is the only way op nodes are made: it converts scalars and arrays to constants,
    checks element kinds, runs the shape rule (attaching the user's line to a
    ShapeError), and appends the node to the graph.
    """
    op = spec(name)
    source = user_source()
    if op.arity is not None and len(args) != op.arity:
        raise TypeError(f"{name} takes {op.arity} tensor inputs, got {len(args)}")
    graph = _graph_of(args)
    from .leaves import to_array

    try:  # x + None, x * "a", a ragged list: the error is raised here, naming this op
        values = [a if isinstance(a, Tensor) else to_array(a, name, f"input {i}", source) for i, a in enumerate(args)]
    except (TypeError, ValueError) as e:
        raise e.with_traceback(None) from None
    tensors = tuple(
        as_tensor(v, graph, kind="float" if op.kind_of_input(i) != "int" else "int", source=source)
        for i, v in enumerate(values)
    )
    for i, t in enumerate(tensors):
        want = op.kind_of_input(i)
        if want != "any" and t.dtype != want:
            raise TypeError(
                f"{name}: input {i} ({t.node.describe()}) holds {t.dtype} values, "
                f"but {name} needs {want} values\n  at {source}"
            )
    full_attrs = {**op.attrs, **attrs}
    try:
        shape = op.infer(*(t.shape for t in tensors), **full_attrs)
    except ShapeError as e:
        raise ShapeError(name, e.detail, e.shapes or [t.shape for t in tensors], source, e.hint) from None
    out_kind = op.out_kind
    if out_kind == "same":  # shape ops keep the element kind of what they move
        kinds = {t.dtype for t in tensors}
        if len(kinds) > 1:
            raise TypeError(f"{name}: inputs mix float and int tensors\n  at {source}")
        out_kind = kinds.pop()
    node = graph.add_node(name, [t.node_id for t in tensors], full_attrs, shape, out_kind, source=source)
    return Tensor(graph, node.id)
