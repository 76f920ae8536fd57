"""The op registry: one :class:`OpSpec` per op, and the one function that builds nodes.

"One op = one place." Everything asgteach knows about ``mul`` lives in its OpSpec, and
this is true of every op, built in or defined by a student in a notebook cell. The
record's own fields say what the op *means*:

* ``infer``  — the shape rule, run when the node is created (``ShapeError`` otherwise);
* ``numpy``  — the reference kernel that computes the value;
* ``vjp``    — the backward rule, written *in graph ops*: given the output gradient
  ``g`` (a Tensor) it returns the input gradients as Tensors, so the gradient is itself a
  graph that can be drawn, run on any backend and differentiated again;
* ``jvp``    — optional forward-mode rule (autograd derives one from the VJP otherwise);
* ``batch``  — the batching rule ``at.vmap`` uses, in graph ops too: given the node's inputs
  with a batch axis (or none) it builds the node's output for a whole batch at once
  (:class:`BatchContext`; ``not_batchable="why"`` marks an op that has none);
* ``explain`` — what the inspector says about it, per language (built-in ops may keep
  these texts in ``asgteach/explain/<lang>.toml`` instead).

What one layer needs on top is a small record of that layer's, all optional:

* ``gpu=GPU(...)``     — the GPU backend's kernel: a family file in ``shaders/`` or, for
  an elementwise op, the formula itself as one WGSL expression (:class:`GPU`);
* ``view=View(...)``   — how the graph view draws it: broadcasting, glue (:class:`View`);
* ``tools=Tools(...)`` — a sample graph for ``asgteach check`` and the tests, the NaN
  error's advice, the weight initialiser ``nn`` picks (:class:`Tools`).

Backends, autograd, the explainer, the widgets and the tests all read :data:`REGISTRY`;
none of them has a list of ops of its own. So this is a whole new op, from a notebook::

    from asgteach.ops import GPU, OpSpec, register, apply
    register(OpSpec(name="softsign", category="activation", arity=1,
                    infer=lambda s, **_: s,
                    numpy=lambda x: x / (1 + np.abs(x)),
                    vjp=lambda c, g: (g / (1 + at.abs(c.inputs[0])) ** 2,),
                    gpu=GPU(expr="x / (1.0 + abs(x))"),
                    explain={"en": {...}, "ru": {...}}))
    y = apply("softsign", x)

A :class:`Composite` is the other kind of entry: a function built from registered ops
(``hardtanh`` is ``minimum(maximum(x, lo), hi)``), known by name so that
``nn.MLP(activation="hardtanh")`` finds it. It adds no node of its own.
"""

from __future__ import annotations

import keyword
import re
import unicodedata
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import wraps
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from ..graph import Graph, default_graph, user_source
from ..shapes import Shape, ShapeError
from ..tensor import Tensor
from .trace import common_graph

__all__ = [
    "OpSpec", "GPU", "View", "Tools", "Composite", "REGISTRY", "COMPOSITES", "CATEGORIES", "register", "unregister",
    "registered", "apply", "NotDifferentiableError", "VjpContext", "BatchContext", "patched", "as_tensor", "spec",
    "lookup", "activation", "activations", "wgsl_input_names", "check_name",
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
class BatchContext:
    """What a batching rule gets to see about the node it batches (``OpSpec.batch``, read by ``at.vmap``).

    A rule is ``batch(ctx, args, dims) -> (out, out_dim)``. ``args`` are the node's inputs as Tensors
    that hold a whole batch: ``dims[i]`` is the axis of ``args[i]`` that runs over the examples, or
    None when that input is the same for every example (then it has its per-example shape). At least
    one input is batched (``vmap`` runs a node with none as it is). The rule returns the output for
    the whole batch, built from graph ops, and the axis of it that runs over the examples.

    Attributes:
        op: the op's name.
        attrs: the node's static arguments, as they were for ONE example (``axis`` counts per-example axes).
        size: how many examples (the batch axis' length).
        in_shapes: the shape of each input for one example.
        out_shape: the shape of the output for one example.

    The helpers :meth:`moved` and :meth:`aligned` do what most rules start with: put the batch axis
    where the op wants it (an unbatched input is broadcast to the batch).
    """

    op: str
    attrs: dict[str, Any]
    size: int
    in_shapes: tuple[Shape, ...]
    out_shape: Shape

    def moved(self, x: Tensor, dim: int | None, to: int = 0) -> Tensor:
        """``x`` with its batch axis at position ``to``; an unbatched ``x`` is repeated ``size`` times there."""
        from . import shape as _shape  # (the shape ops register after this module)

        if dim is not None:
            return _shape.moveaxis(x, dim, to)
        stretched = x.shape[:to] + (self.size,) + x.shape[to:]
        if to == 0:   # numpy broadcasting adds axes on the left: no reshape needed
            return _shape.broadcast_to(x, stretched)
        return _shape.broadcast_to(_shape.reshape(x, x.shape[:to] + (1,) + x.shape[to:]), stretched)

    def aligned(self, x: Tensor, dim: int | None, rank: int) -> Tensor:
        """``x`` ready to broadcast against a batch of per-example rank ``rank``: the elementwise rule's move.

        A batched ``x`` gets its batch axis first and, when it has fewer per-example axes than ``rank``,
        size-1 axes after it: numpy would pad the *per-example* shape on the left, and it must not line
        the batch axis up with a per-example one. An unbatched ``x`` stays as it is: padded on the left, it
        lines up with the per-example axes by itself.
        """
        from . import shape as _shape

        if dim is None:
            return x
        x = _shape.moveaxis(x, dim, 0)
        missing = rank - (x.ndim - 1)
        return _shape.reshape(x, (x.shape[0],) + (1,) * missing + x.shape[1:]) if missing > 0 else x


def wgsl_input_names(arity: int) -> tuple[str, ...]:
    """How an elementwise op's inputs are called in its GPU formula (``GPU.expr``): x; a, b; a, b, c."""
    return ("x",) if arity == 1 else ("a", "b", "c", "d", "e", "f", "g")[:arity]


@dataclass(frozen=True)
class GPU:
    """What the GPU backend needs to know about an op: which kernel runs it, and how.

    ``kernel`` names the kernel family: a file in ``shaders/`` (``"reduce"``, ``"matmul"``).
    An elementwise op gives ``expr`` instead: its formula as ONE WGSL expression of its
    inputs (called ``x`` when there is one, ``a``, ``b`` when there are two, ``a, b, c`` for
    three) and of its number attributes, each by its own name (``"f_softplus(x, beta)"``);
    ``kernel`` is then ``"elementwise"``. A formula that depends on a non-number attribute is
    a function of the attributes returning the expression (``gelu``'s ``approximate``).
    ``entry`` names the kernel inside a family file when that is not the op's name (``mean``
    is a sum scaled by 1/n: entry "mean" of reduce.wgsl). ``reduced_axes(shape, **attrs)``:
    the axes a reduction removes (the reduce kernels are laid out by them).
    ``index_bound(shapes, **attrs)``: for ops reading integer row ids, how many rows there
    are: a kernel cannot raise, so the backend checks fed ids against it before running.
    """

    kernel: str | None = None
    expr: str | Callable[..., str] | None = None
    entry: str | None = None
    reduced_axes: Callable[..., tuple[int, ...]] | None = None
    index_bound: Callable[..., int] | None = None


@dataclass(frozen=True)
class View:
    """What the graph view needs to know to draw an op's nodes and edges.

    ``broadcasts``: the op's inputs broadcast against each other (the view labels the
    stretched edges; the sample builder gives such an op a row to stretch). ``glue``: the op
    only moves or copies data (reshape, transpose, broadcast_to, sum_to: one input, no
    arithmetic worth a node of its own), so the view may fold it into an edge label when its
    "details" are off.
    """

    broadcasts: bool = False
    glue: bool = False


@dataclass(frozen=True)
class Tools:
    """What the tools around an op ask about it; none of it changes what the op computes.

    ``sample(b)``: builds a small graph whose output is this op, from the sample builder
    ``b`` (``asgteach.opsamples.SampleInputs``): ``asgteach check`` and the tests use it;
    without one a sample is derived from the category and arity. ``nan_hint``: why this op
    can produce a NaN and what to do (the backends' NaN error says it). ``weight_init``: for
    activations, the initialiser ``nn`` gives the weights feeding them (Kaiming for
    relu-like ones; Xavier when not said).
    """

    sample: Callable[[Any], Tensor] | None = None
    nan_hint: str | None = None
    weight_init: str | None = None


#: keywords OpSpec (and Composite) took before each layer's facts became a record of their own -> how to write them now
_MOVED = {
    "wgsl": "gpu=GPU(kernel=...)", "wgsl_expr": "gpu=GPU(expr=...)", "wgsl_entry": "gpu=GPU(entry=...)",
    "reduced_axes": "gpu=GPU(reduced_axes=...)", "index_bound": "gpu=GPU(index_bound=...)",
    "broadcasts": "view=View(broadcasts=...)", "glue": "view=View(glue=...)",
    "sample": "tools=Tools(sample=...)", "nan_hint": "tools=Tools(nan_hint=...)",
    "weight_init": "tools=Tools(weight_init=...)",
}


@dataclass
class OpSpec:
    """Everything about one op. Give the parts by keyword; only the first five are needed.

    What the op means:
        name, category (one of :data:`CATEGORIES`: the colour of its nodes), ``arity`` (the
        number of tensor inputs; None: any number, as for ``concat``), ``infer(*shapes,
        **attrs) -> shape``, ``numpy(*arrays, **attrs) -> array`` and ``attrs`` (the static
        arguments with their defaults: ``{"beta": 1.0}``).
    Its derivative:
        ``vjp(ctx, g)`` and optionally ``jvp(ctx, tangents)``, in graph ops. Or an explicit
        mark: ``not_differentiable="why"`` (asking for a gradient raises) or
        ``zero_gradient="why"`` for piecewise-constant ops (``greater``, ``sign``): their
        derivative is zero wherever it exists, so they stop gradients *by design*.
        ``diff_inputs`` marks which inputs a gradient flows into (``embedding``'s integer ids
        and ``where``'s condition do not).
    Its batching rule (``at.vmap``):
        ``batch(ctx, args, dims) -> (out, out_dim)`` (:class:`BatchContext`), in graph ops; an
        elementwise op can use the shared ``batch_elementwise``. Or ``not_batchable="why"``. Without
        either, vmap through the op raises an error naming it.
    Element kinds:
        ``input_kinds``: the kind each input must hold ("float", "int" or "any");
        ``out_kind``: the kind of the result ("same": that of the inputs).
    How it is told:
        ``explain``: ``{"en": {"headline", "what", "formula", "vjp", "why", "pitfalls"},
        "ru": {...}}``, what the inspector shows (LaTeX in ``formula`` and ``vjp``).
        ``doc``: one line (default: the English headline). ``leaf``: input, parameter and
        constant only.
    What each layer needs on top, one small record per layer (all optional):
        ``gpu=GPU(expr="x / (1.0 + abs(x))")`` the GPU backend's kernel (:class:`GPU`);
        ``view=View(broadcasts=True)`` the graph view's hints (:class:`View`);
        ``tools=Tools(sample=..., nan_hint=..., weight_init=...)`` what ``asgteach check``,
        the NaN errors and ``nn`` ask about it (:class:`Tools`).

    Positional order is kept for old code (``OpSpec("neg", "arithmetic", 1, infer, np.negative)``);
    new fields are only ever added at the end.
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
    leaf: bool = False
    doc: str = ""
    explain: dict[str, dict[str, str]] | None = None
    gpu: GPU = field(default_factory=GPU)
    view: View = field(default_factory=View)
    tools: Tools = field(default_factory=Tools)
    batch: Callable[[BatchContext, tuple[Tensor, ...], tuple[int | None, ...]], tuple[Tensor, int | None]] | None = None
    not_batchable: str | None = None

    def __post_init__(self) -> None:
        for part, kind in (("gpu", GPU), ("view", View), ("tools", Tools)):
            if not isinstance(getattr(self, part), kind):
                raise TypeError(f"op {self.name!r}: {part} is a {kind.__name__} record, {part}={kind.__name__}(...); "
                                f"got {type(getattr(self, part)).__name__}")
        if self.gpu.expr is not None and self.gpu.kernel is None:
            self.gpu = replace(self.gpu, kernel="elementwise")   # a formula IS an elementwise kernel
        if not self.doc and self.explain:
            english = self.explain.get("en") or next(iter(self.explain.values()), {})
            self.doc = str(english.get("headline", ""))

    @property
    def float_attrs(self) -> tuple[str, ...]:
        """The attributes that are numbers (``beta``, ``negative_slope``): a kernel reads them as f32 values."""
        return tuple(k for k, v in self.attrs.items()
                     if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)))

    def kind_of_input(self, i: int) -> str:
        return self.input_kinds if isinstance(self.input_kinds, str) else self.input_kinds[i]

    def differentiable_input(self, i: int) -> bool:
        if self.zero_gradient is not None:
            return False
        return True if self.diff_inputs is None else self.diff_inputs[i]


@dataclass(frozen=True)
class Composite:
    """A function made of registered ops, known by name: ``hardtanh`` = ``minimum(maximum(x, lo), hi)``.

    It has no kernel, no backward rule and no node of its own: calling it appends the nodes
    of the ops it is made of, and autograd differentiates those. Registering it only makes
    the name known (``apply("hardtanh", x)``, ``nn.MLP(activation="hardtanh")``).
    ``tools=Tools(weight_init=...)`` as for an op (``relu6`` wants Kaiming weights).
    """

    name: str
    category: str
    build: Callable[..., Tensor]
    doc: str = ""
    tools: Tools = field(default_factory=Tools)


def _refuse_moved_keywords(cls: type) -> None:
    """Make ``cls(wgsl_expr=...)`` (an older spelling) say what to write now, instead of Python's bare
    "unexpected keyword argument". The dataclass's own ``__init__`` does all the rest."""
    made_by_dataclass = cls.__init__

    @wraps(made_by_dataclass)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        for old in kwargs:
            if old in _MOVED:
                raise TypeError(f"{cls.__name__}({old}=...) is now written {_MOVED[old]}: what one layer needs "
                                f"to know about an op is one small record (from asgteach.ops import GPU, View, Tools)")
        made_by_dataclass(self, *args, **kwargs)

    cls.__init__ = __init__  # type: ignore[method-assign]


_refuse_moved_keywords(OpSpec)
_refuse_moved_keywords(Composite)


#: name -> OpSpec for every op asgteach knows. Filled by the op family modules (and by you).
REGISTRY: dict[str, OpSpec] = {}
#: name -> Composite: functions of registered ops that are known by name.
COMPOSITES: dict[str, Composite] = {}

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def check_name(name: Any, what: str = "op") -> None:
    """Refuse a name that could not stand for an op in generated Python code; say what is allowed.

    The numpy backend writes a plan out as Python source, one line per kernel, calling each
    kernel by its op's name: ``v1 = softsign(v0)``. So an op's name must read back as that
    same name in Python:

    * an identifier (letters, digits and ``_``, not starting with a digit): ``my-op`` or
      ``2x`` would not even parse;
    * not a keyword: ``v1 = not(v0)`` parses, but as Python's ``not`` (one bool for the
      whole array), and ``lambda(v0)`` or ``class(v0)`` are syntax errors. Soft keywords
      (``match``, ``case``, ``type``, ``_``) are fine: they are keywords only at the start of
      a statement, and a call is never there;
    * written the way Python reads it: Python folds identifiers to Unicode NFKC form, so the
      ligature ``ﬁ`` would be looked up as ``fi``, and full-width ``ｎｏｔ`` as ``not``.
      Names in any script are fine in that form (``σ``, ``сигмоида``).

    Names that Python allows but that mean something else (``print``, ``sum_``, ``np``) are
    fine too: the generated code renames a kernel whose name it uses for itself (``env``,
    ``v0``), and it calls nothing else by name.
    """
    if not isinstance(name, str):
        raise TypeError(f"{what} name must be text, got {type(name).__name__}: {name!r}")
    allowed = (f"{what} names must be Python identifiers (letters, digits and _, not starting with a digit) "
               "that are not Python keywords, e.g. 'softsign' or 'my_op'")
    if not name.isidentifier():
        raise ValueError(f"{what} name {name!r} is not an identifier: {allowed}")
    if keyword.iskeyword(name):
        raise ValueError(f"{what} name {name!r} is a Python keyword: generated code calling {name}(...) would "
                         f"not call your kernel. Pick another name ({name}_ or my_{name}); {allowed}")
    folded = unicodedata.normalize("NFKC", name)
    if folded != name:
        raise ValueError(f"{what} name {name!r} reads as {folded!r} in Python code (Unicode NFKC form): "
                         f"write it as {folded!r}" + (" (a keyword: pick another name)" if keyword.iskeyword(folded)
                                                      else "") + f"; {allowed}")


def _check(spec: OpSpec) -> None:
    """The mistakes ``register`` refuses, each with a message that says what to write instead."""
    name = spec.name
    if spec.category not in CATEGORIES:
        raise ValueError(f"op {name!r}: unknown category {spec.category!r}; choose one of {', '.join(CATEGORIES)}")
    if not spec.leaf and spec.vjp is None and spec.not_differentiable is None:
        raise ValueError(f"op {name!r} needs a vjp or an explicit not_differentiable reason")
    if not spec.leaf and not callable(spec.numpy):
        raise ValueError(f"op {name!r} needs a numpy kernel: numpy=lambda x, **attrs: ...")
    if spec.batch is not None and not callable(spec.batch):
        raise ValueError(f"op {name!r}: a batching rule is a function, batch=lambda ctx, args, dims: (out, out_dim); "
                         f"an elementwise op can use batch=batch_elementwise (from asgteach.ops)")
    if spec.batch is not None and spec.not_batchable is not None:
        raise ValueError(f"op {name!r} has a batching rule and a not_batchable mark: give one of them")
    gpu = spec.gpu
    if gpu.kernel == "elementwise":
        if gpu.expr is None:
            raise ValueError(f"op {name!r}: an elementwise kernel needs its formula, gpu=GPU(expr='...')")
        if spec.arity is None or not 1 <= spec.arity <= 3:
            raise ValueError(f"op {name!r}: an elementwise WGSL formula takes 1 to 3 inputs, not {spec.arity}")
        clash = set(spec.float_attrs) & set(wgsl_input_names(spec.arity))
        if clash:
            raise ValueError(f"op {name!r}: attribute {sorted(clash)[0]!r} has the name of an input in the GPU "
                             f"formula (gpu=GPU(expr=...)); rename the attribute")
        bad = [a for a in spec.float_attrs if not _IDENT.match(a)]
        if bad:
            raise ValueError(f"op {name!r}: attribute {bad[0]!r} cannot be named in WGSL (letters, digits, _)")
    elif gpu.expr is not None:
        raise ValueError(f"op {name!r}: GPU(expr=...) is the formula of an elementwise kernel, but "
                         f"kernel={gpu.kernel!r}; give one of them")
    if spec.explain is not None:
        if not isinstance(spec.explain, Mapping) or not all(isinstance(r, Mapping) for r in spec.explain.values()):
            raise ValueError(f"op {name!r}: explain is one record per language: {{'en': {{'headline': ...}}, ...}}")
        for lang, rec in spec.explain.items():
            odd = [k for k, v in rec.items() if not isinstance(v, str)]
            if odd:
                raise ValueError(f"op {name!r}: explain[{lang!r}][{odd[0]!r}] must be text")
    if spec.tools.sample is not None and not callable(spec.tools.sample):
        raise ValueError(f"op {name!r}: a sample is a function of the sample builder: "
                         f"tools=Tools(sample=lambda b: ...)")


#: how many times register/unregister changed the registry: a compiled plan holds the kernels of the ops as they
#: were, so a backend's plan cache compares this number and recompiles after an op was replaced
_GENERATION = [0]


def generation() -> int:
    """A number that changes whenever an op is registered or unregistered (backends key their plan caches on it)."""
    return _GENERATION[0]


def register(entry: OpSpec | Composite) -> OpSpec | Composite:
    """Make an op (or a composite) known by its name, once, and return it.

    Everything else — kernels on every backend, gradients, the inspector, ``asgteach check``
    — reads the registry, so this one call is all a new op needs. The name must be a Python
    identifier and not a keyword (:func:`check_name` says why). ``unregister(name)`` (or
    the ``registered(...)`` context manager) takes it away again.
    """
    check_name(entry.name, "composite" if isinstance(entry, Composite) else "op")
    if entry.name in REGISTRY or entry.name in COMPOSITES:
        raise ValueError(f"op {entry.name!r} is registered twice (unregister({entry.name!r}) first to replace it)")
    if isinstance(entry, Composite):
        if entry.category not in CATEGORIES:
            raise ValueError(f"composite {entry.name!r}: unknown category {entry.category!r}")
        if not isinstance(entry.tools, Tools):
            raise ValueError(f"composite {entry.name!r}: tools is a Tools record: tools=Tools(weight_init=...)")
        COMPOSITES[entry.name] = entry
        return entry
    _check(entry)
    REGISTRY[entry.name] = entry
    _GENERATION[0] += 1
    return entry


def unregister(name: str) -> OpSpec | Composite:
    """Forget op (or composite) ``name``; return what was registered. Graphs that use it can no longer run."""
    if name in COMPOSITES:
        return COMPOSITES.pop(name)
    if spec(name).leaf:
        raise ValueError(f"{name!r} is a leaf of every graph; it cannot be unregistered")
    _GENERATION[0] += 1
    return REGISTRY.pop(name)


@contextmanager
def registered(*entries: OpSpec | Composite) -> Iterator[OpSpec | Composite | tuple]:
    """Register ops for the length of a ``with`` block, then unregister them (also after an error).

    >>> with registered(OpSpec(name="softsign", ...)) as s:   # doctest: +SKIP
    ...     y = apply("softsign", x)
    """
    done: list[str] = []
    try:
        for e in entries:
            register(e)
            done.append(e.name)
        yield entries[0] if len(entries) == 1 else entries
    finally:
        for name in reversed(done):
            if name in REGISTRY or name in COMPOSITES:
                unregister(name)


def spec(name: str) -> OpSpec:
    """The OpSpec called ``name``, with a helpful error for unknown names."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r}.{_close_names(name)}") from None


def lookup(name: str) -> OpSpec | Composite:
    """The op or composite called ``name`` (``spec`` knows only ops, which are what nodes hold)."""
    if name in COMPOSITES:
        return COMPOSITES[name]
    return spec(name)


def _close_names(name: str, among: Sequence[str] | None = None) -> str:
    import difflib

    close = difflib.get_close_matches(name, among if among is not None else [*REGISTRY, *COMPOSITES], n=3)
    return f" Did you mean {', '.join(close)}?" if close else ""


def activations() -> list[str]:
    """The names ``nn.MLP(activation=...)`` accepts: ops and composites of category "activation" on one tensor."""
    ops = [n for n, s in REGISTRY.items() if s.category == "activation" and s.arity == 1]
    return ops + [n for n, c in COMPOSITES.items() if c.category == "activation"]


def activation(name: str) -> Callable[[Tensor], Tensor]:
    """The activation called ``name`` as a function of one Tensor (default attributes)."""
    if name not in activations():
        raise ValueError(f"unknown activation {name!r}; known: {', '.join(activations())}."
                         f"{_close_names(name, activations())}")
    if name in COMPOSITES:
        return COMPOSITES[name].build
    return lambda x: apply(name, x)


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
    if name in COMPOSITES:  # a function of other ops: it appends their nodes, none of its own
        return COMPOSITES[name].build(*args, **attrs)
    op = spec(name)
    source = user_source()
    if op.arity is not None and len(args) != op.arity:
        raise TypeError(f"{name} takes {op.arity} tensor inputs, got {len(args)}")
    graph, args = common_graph(args)   # (inside at.vmap's trace: Tensors of the graphs it extends are lifted)
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
