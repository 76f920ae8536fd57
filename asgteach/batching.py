"""``at.vmap``: a batch axis as a graph-to-graph transformation, like ``grad`` and ``jvp``.

You write a function for ONE example; ``vmap`` turns it into a function of a whole batch::

    def loss(x, y):                         # x: (3,), y: () -- one example
        return (at.tanh(x @ w) - y) ** 2

    per_example = at.vmap(loss)(X, Y)        # X: (B, 3), Y: (B,)  ->  (B,)

It computes nothing (define-then-run): it appends nodes to the graph of ``X`` and ``Y``, and it
appends the SAME number of nodes for a batch of 4 as for a batch of 4,000 -- there is no copy of
``loss`` per example. How? In three steps, the way JAX's autodidax explains its ``vmap``:

1. **Trace.** ``loss`` is called once, on stand-ins of ONE example's shape: an ``at.input`` of
   shape (3,) for ``X``, of shape () for ``Y``. Its ops are recorded in a scratch graph
   (``ops.trace.tracing``), not in yours. The scratch graph starts as your graph's node list
   (the same nodes, the same ids), so ``w``, which ``loss`` closes over, is simply there, and so is
   everything it was computed from. That is why ``loss`` may call ``at.grad`` inside:
   ``at.vmap(lambda x, y: at.grad(loss(x, y), w))`` records the per-example loss AND its backward
   graph in the trace, and batching them gives per-example gradients.

2. **Batch each recorded node with its op's rule.** Every value of the trace is now one of two
   kinds, as autodidax's ``BatchTracer`` says: *batched* -- a Tensor of your graph holding all the
   examples, with one axis (its "batch dim") running over them -- or *not batched* (``None``):
   the same for every example (``w``, a constant). Walking the trace in order:

   * a stand-in is the batched argument you passed (``X``, batch dim ``in_axes``);
   * a node none of whose inputs is batched is copied as it is (``w.T`` stays ``w.T``);
   * any other node calls its op's **batching rule**, ``OpSpec.batch``, which sits beside its VJP:
     ``batch(ctx, args, dims) -> (out, out_dim)``. ``args`` are the inputs as batched (or not)
     Tensors, ``dims`` their batch dims; the rule builds the whole batch's output out of ordinary
     graph ops and says where its batch axis is. ``tanh``'s rule just calls ``tanh``: an
     elementwise op does not care how many examples there are. ``sum(x, axis=0)``'s rule sums
     axis 1 when the batch axis is 0. ``matmul``'s turns B vector-matrix products into one
     matrix-matrix product. Ops share rules by kind (every elementwise op uses
     ``ops.batch_elementwise``, every reduction ``reduce._batch_reduce``).

3. **Outputs.** Each output's batch axis is moved to ``out_axes`` (an output that does not depend
   on the batch is repeated along a new one).

An op with no rule stops vmap with an error that names it and says how to give it one
(``NotBatchableError``; docs/adding-an-op.md, "Batching rules"). Nothing is appended to your graph
then: every rule the trace needs is looked up before the first node is made.

Composition comes for free because each transformation only reads and writes graphs:

* ``at.vmap(f)`` of an ``f`` that calls ``at.grad`` batches the backward nodes like any others
  (per-example gradients);
* ``at.vmap(lambda v: at.grad(y, x, seed=v))(eye)`` runs the VJP for every row of the identity at
  once: the whole Jacobian in one run;
* ``at.vmap(at.vmap(f))``: the inner vmap traces and batches inside the outer one's trace, whose
  batching then batches the inner one's nodes.
"""

from __future__ import annotations

from functools import wraps
from typing import Any, Callable, Sequence

from .graph import Graph, user_source
from .ops import shape as _shape
from .ops.leaves import constant
from .ops.leaves import input as _input
from .ops.registry import BatchContext, apply, spec
from .ops.trace import common_graph, lift, tracing
from .tensor import Tensor

__all__ = ["vmap", "NotBatchableError"]


class NotBatchableError(TypeError):
    """Raised when ``at.vmap`` meets an op it cannot run on a batch: it has no batching rule, or is marked
    ``not_batchable``."""


def vmap(fn: Callable[..., Any], in_axes: int | None | Sequence[int | None] = 0,
         out_axes: int | Sequence[int] = 0) -> Callable[..., Any]:
    """``fn`` for one example -> the same function for a batch of examples, as graph nodes.

    Args:
        fn: takes Tensors of one example's shape and returns a Tensor or a (nested) tuple or list
            of them. It may close over Tensors of the graph (weights), call ``at.grad`` or
            ``at.jvp``, or call ``at.vmap`` itself.
        in_axes: for each argument, the axis of it that runs over the examples, or None for an
            argument every example shares (passed to ``fn`` as it is). One int or None means it for
            every argument.
        out_axes: where each output gets its batch axis (one int, or one per output Tensor).

    Returns:
        A function of the batched arguments that appends the batched computation to their graph
        and returns its output Tensors, in ``fn``'s structure.

    Raises:
        NotBatchableError: an op on the way has no batching rule (the message says how to add one).
    """
    if not callable(fn):
        raise TypeError(f"vmap: fn must be a function of Tensors, got {type(fn).__name__}")

    @wraps(fn)
    def batched(*args: Any, **kwargs: Any) -> Any:
        if kwargs:
            raise TypeError(f"vmap: pass the arguments of {_name(fn)} by position (in_axes counts them); "
                            f"got keywords {sorted(kwargs)}")
        return _vmap_call(fn, args, in_axes, out_axes, user_source())

    return batched


def _name(fn: Any) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


# --- the call: check the arguments, trace, batch, place the outputs -------------------------------------
def _vmap_call(fn: Callable[..., Any], args: tuple, in_axes: Any, out_axes: Any, source: str) -> Any:
    axes = _in_axes(args, in_axes, source)
    base, args = _base_graph(args, axes, source)
    size = _batch_size(args, axes, source)
    with tracing(base, f"vmap({_name(fn)})") as trace:
        stand_ins, standing_for = _stand_ins(trace.graph, args, axes)
        result = fn(*stand_ins)
        outs, rebuild = _flatten(result, _name(fn))
        outs = [_in_trace(t, trace.graph, _name(fn)) for t in outs]
    program = _program(trace.graph, trace.shared, [t.node_id for t in outs])
    _check_rules(trace.graph, program, standing_for, _name(fn))
    values = _batch_program(trace.graph, base, trace.shared, program, standing_for, size)
    placed = [_place(values(t.node_id), o, size) for t, o in zip(outs, _out_axes(out_axes, len(outs)))]
    return rebuild(placed)


def _in_axes(args: tuple, in_axes: Any, source: str) -> list[int | None]:
    """One axis (or None) per argument, non-negative; a bad one is an error naming the argument."""
    if in_axes is None or isinstance(in_axes, int):
        axes = [in_axes] * len(args)
    elif isinstance(in_axes, (tuple, list)):
        if len(in_axes) != len(args):
            raise ValueError(f"vmap: in_axes has {len(in_axes)} entries for {len(args)} arguments (one per "
                             f"argument: an int, or None for one every example shares)\n  at {source}")
        axes = list(in_axes)
    else:
        raise TypeError(f"vmap: in_axes is an int, None, or a tuple of them (one per argument), got "
                        f"{in_axes!r}\n  at {source}")
    out: list[int | None] = []
    for i, (a, ax) in enumerate(zip(args, axes)):
        if ax is None:
            out.append(None)
            continue
        if isinstance(ax, bool) or not isinstance(ax, int):
            raise TypeError(f"vmap: in_axes[{i}] must be an int or None, got {ax!r}\n  at {source}")
        if not isinstance(a, Tensor):
            raise TypeError(f"vmap: argument {i} has in_axes {ax} but is a {type(a).__name__}, not a Tensor "
                            f"(make it one with at.constant, or give it in_axes None)\n  at {source}")
        if not -a.ndim <= ax < a.ndim:
            raise ValueError(f"vmap: in_axes[{i}] = {ax}, but argument {i} ({a.node.describe()}) has "
                             f"{a.ndim} axes\n  at {source}")
        out.append(ax % a.ndim)
    if all(ax is None for ax in out):
        raise ValueError(f"vmap: no argument has a batch axis (in_axes is None for all of them)\n  at {source}")
    return out


def _base_graph(args: tuple, axes: list[int | None], source: str) -> tuple[Graph, tuple]:
    """The graph the batched computation goes to: the batched arguments' (inside another vmap's trace, that
    trace). Shared Tensor arguments join it too."""
    tensors = [a for a in args if isinstance(a, Tensor)]
    try:
        base, lifted = common_graph(tensors)
    except ValueError as e:
        raise ValueError(f"vmap: {e}\n  at {source}") from None
    it = iter(lifted)
    return base, tuple(next(it) if isinstance(a, Tensor) else a for a in args)


def _batch_size(args: tuple, axes: list[int | None], source: str) -> int:
    sizes = {i: a.shape[ax] for i, (a, ax) in enumerate(zip(args, axes)) if ax is not None}
    if len(set(sizes.values())) > 1:
        told = ", ".join(f"argument {i}: {sizes[i]} (axis {axes[i]} of {args[i].shape})" for i in sizes)
        raise ValueError(f"vmap: the batched arguments hold different numbers of examples: {told}\n  at {source}")
    return next(iter(sizes.values()))


def _stand_ins(scratch: Graph, args: tuple, axes: list[int | None]) -> tuple[list[Any], dict[int, tuple]]:
    """What ``fn`` is called with: for a batched argument, an input of ONE example's shape in the scratch
    graph (remembered: stand-in id -> (the batched Tensor, its batch axis)); a shared one as it is."""
    stand_ins: list[Any] = []
    standing_for: dict[int, tuple[Tensor, int]] = {}
    for i, (a, ax) in enumerate(zip(args, axes)):
        if ax is None:
            stand_ins.append(a)
            continue
        one = a.shape[:ax] + a.shape[ax + 1:]
        name = a.name if a.op in ("input", "parameter") else f"argument {i}"
        t = _input(f"{name} (one example)", one, dtype=a.dtype, graph=scratch)
        standing_for[t.node_id] = (a, ax)
        stand_ins.append(t)
    return stand_ins, standing_for


def _flatten(result: Any, fn_name: str) -> tuple[list[Tensor], Callable[[list[Tensor]], Any]]:
    """The output Tensors of ``fn`` in order, and how to rebuild its (nested) tuples and lists from new ones."""
    if isinstance(result, Tensor):
        return [result], lambda ts: ts[0]
    if isinstance(result, (tuple, list)):
        parts = [_flatten(r, fn_name) for r in result]
        counts = [len(p[0]) for p in parts]

        def rebuild(ts: list[Tensor]) -> Any:
            out, k = [], 0
            for (_, again), n in zip(parts, counts):
                out.append(again(ts[k: k + n]))
                k += n
            return type(result)(out) if type(result) in (tuple, list) else tuple(out)

        return [t for p in parts for t in p[0]], rebuild
    raise TypeError(f"vmap: {fn_name} must return a Tensor or a tuple or list of Tensors, got "
                    f"{type(result).__name__}: {result!r:.60}")


def _in_trace(t: Tensor, scratch: Graph, fn_name: str) -> Tensor:
    lifted = lift(t, scratch)
    if lifted is None:
        raise ValueError(f"vmap: {fn_name} returned {t.node.describe()}, a Tensor of another graph than the "
                         f"batched arguments'")
    return lifted


def _out_axes(out_axes: Any, n: int) -> list[int]:
    axes = [out_axes] * n if isinstance(out_axes, int) else list(out_axes) \
        if isinstance(out_axes, (tuple, list)) else None
    if axes is None or len(axes) != n or any(isinstance(a, bool) or not isinstance(a, int) for a in axes):
        raise TypeError(f"vmap: out_axes is an int, or one int per output Tensor ({n} here); got {out_axes!r}")
    return axes


# --- step 2: the recorded program, batched node by node -----------------------------------------------------
def _program(scratch: Graph, shared: int, out_ids: list[int]) -> list[int]:
    """The nodes ``fn`` recorded that its outputs need, in graph order (the shared ones are not part of it)."""
    seen: set[int] = set()
    stack = [i for i in out_ids if i >= shared]
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        stack.extend(j for j in scratch.nodes[i].inputs if j >= shared)
    return sorted(seen)


def _check_rules(scratch: Graph, program: list[int], standing_for: dict[int, tuple], fn_name: str) -> None:
    """Every node that will see a batched input has a rule: said before anything is appended to the graph."""
    batched = set(standing_for)
    for i in program:
        node = scratch.nodes[i]
        op = spec(node.op)
        if op.leaf:
            if i not in standing_for and node.op != "constant":
                raise ValueError(_leaf_made_inside(node, fn_name))
            continue
        if not any(j in batched for j in node.inputs):
            continue
        batched.add(i)
        if op.not_batchable is not None:
            raise NotBatchableError(
                f"vmap: op {node.op!r} cannot be batched: {op.not_batchable}.\n  It is reached from a batched "
                f"argument at {node.source} ({node.op} of shape {node.shape} for one example). Run {fn_name} "
                f"once per example for this part, or give it in_axes None if it does not depend on the batch.")
        if op.batch is None:
            raise NotBatchableError(
                f"vmap: op {node.op!r} has no batching rule, so vmap cannot run it on a batch (it is reached "
                f"from a batched argument at {node.source}).\n  Give its OpSpec one: batch=... (docs/adding-an-op.md, "
                f"'Batching rules'); an elementwise op can share the built-in rule:\n"
                f"      from asgteach.ops import batch_elementwise\n"
                f"      register(OpSpec(name={node.op!r}, ..., batch=batch_elementwise))\n"
                f"  or mark it not_batchable='why' to say that it cannot have one.")


def _leaf_made_inside(node: Any, fn_name: str) -> str:
    if node.op == "parameter":
        return (f"vmap: {fn_name} made parameter {node.name!r} (at {node.source}) while it was traced. Every "
                f"example would share it: make the layer or parameter before vmap and use it inside.")
    return (f"vmap: {fn_name} made input {node.name!r} (at {node.source}) while it was traced: pass it as an "
            f"argument instead (in_axes None if every example shares it).")


def _batch_program(scratch: Graph, base: Graph, shared: int, program: list[int],
                   standing_for: dict[int, tuple], size: int) -> Callable[[int], tuple[Tensor, int | None]]:
    """Batch every node of ``program`` into ``base``; return the lookup: trace node id -> (Tensor, batch dim)."""
    env: dict[int, tuple[Tensor, int | None]] = {}

    def value(i: int) -> tuple[Tensor, int | None]:
        if i < shared:                                  # a node of the graph itself: the same for every example
            return Tensor(base, i), None
        return env[i]

    for i in program:
        node = scratch.nodes[i]
        if i in standing_for:
            env[i] = standing_for[i]
            continue
        if node.op == "constant":
            env[i] = constant(scratch.constants[i], name=node.name, graph=base, source=node.source), None
            continue
        ins = [value(j) for j in node.inputs]
        tensors, dims = tuple(t for t, _ in ins), tuple(d for _, d in ins)
        with base.phase("backward" if node.phase == "backward" else None):
            if all(d is None for d in dims):            # nothing batched reaches it: the op as it was
                env[i] = apply(node.op, *tensors, **node.attrs), None
                continue
            ctx = BatchContext(op=node.op, attrs=dict(node.attrs), size=size,
                               in_shapes=tuple(scratch.nodes[j].shape for j in node.inputs), out_shape=node.shape)
            result = spec(node.op).batch(ctx, tensors, dims)
        env[i] = _checked(result, node, base, size)
    return value


def _checked(result: Any, node: Any, base: Graph, size: int) -> tuple[Tensor, int | None]:
    """A rule returns (Tensor of the batch, its batch axis): the node's shape for one example, with ``size`` there."""
    rule = f"the batching rule of {node.op!r} (batch=...)"
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], Tensor)):
        raise TypeError(f"{rule} must return (out, out_dim): a Tensor and the axis of it that runs over the "
                        f"examples (None if none); got {type(result).__name__}")
    out, d = result
    if d is None:
        want = node.shape
    elif isinstance(d, bool) or not isinstance(d, int) or not 0 <= d <= len(node.shape):
        raise ValueError(f"{rule} returned batch axis {d!r} for an output of {len(node.shape) + 1} axes")
    else:
        want = node.shape[:d] + (size,) + node.shape[d:]
    if out.graph is not base or out.shape != want or out.dtype != node.dtype:
        raise ValueError(f"{rule} returned {out.node.describe()} ({out.dtype}) with batch axis {d}; for a batch of "
                         f"{size} it must be a {node.dtype} Tensor of shape {want} in the batched arguments' graph "
                         f"(one example's output has shape {node.shape})")
    return out, d


# --- step 3: outputs ---------------------------------------------------------------------------------------
def _place(value: tuple[Tensor, int | None], out_axis: int, size: int) -> Tensor:
    """The batch axis of an output moved to ``out_axis``; an output the same for every example is repeated."""
    t, d = value
    if d is None:
        t, d = _shape.broadcast_to(t, (size,) + t.shape), 0
    if not -t.ndim <= out_axis < t.ndim:
        raise ValueError(f"vmap: out_axes {out_axis} is out of range for an output of {t.ndim} axes "
                         f"(batch axis included)")
    return _shape.moveaxis(t, d, out_axis)
