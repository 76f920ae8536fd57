"""Automatic differentiation as a graph-to-graph transformation.

``at.grad(y, [x, w])`` does not compute any numbers. It walks the graph from ``y`` back
to the inputs in reverse topological order (the graph's node order, reversed) and, for
each node, calls its op's backward rule (``OpSpec.vjp``). Those rules are written in
graph ops, so what comes out is *more graph*: new nodes, marked ``phase="backward"``,
appended to the same ASG. You can draw them, run them on any backend, and — because they
are ordinary nodes — differentiate them again (``grad`` of ``grad``: Hessian-vector
products).

The algorithm, in the words of the code below:

1. Find the nodes that matter: those that depend on some ``x`` *and* that ``y`` depends
   on through differentiable edges. Nothing else gets a gradient node.
2. Seed: the gradient of ``y`` with respect to itself is 1 (or the ``seed`` you give).
3. Visit the nodes from ``y`` backwards. A node's gradient is the SUM of what all its
   consumers sent it (fan-out: ``x`` used twice gets two contributions, added with
   ``add`` nodes — forgetting the sum, ``=`` instead of ``+=``, is a classic bug).
   Then call the node's rule to send contributions to its inputs.
4. Return the accumulated gradient of each ``x`` as a Tensor.

``at.jvp`` is forward mode: it pushes a tangent from the inputs to the outputs, one node
at a time, in graph order.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .graph import Graph, user_source
from .ops import shape as _shape
from .ops.leaves import constant
from .ops.reduce import sum as _sum
from .ops.registry import NotDifferentiableError, VjpContext, spec
from .tensor import Tensor

__all__ = ["grad", "jvp", "hvp", "NotDifferentiableError"]


def _graph_of(tensors: Sequence[Tensor]) -> Graph:
    graphs = {id(t.graph): t.graph for t in tensors}
    if len(graphs) != 1:
        raise ValueError("all tensors given to grad/jvp must belong to one graph")
    return tensors[0].graph


def _as_list(xs: Tensor | Sequence[Tensor]) -> tuple[list[Tensor], bool]:
    if isinstance(xs, Tensor):
        return [xs], True
    xs = list(xs)
    for x in xs:
        if not isinstance(x, Tensor):
            raise TypeError(f"grad/jvp need Tensors to differentiate with respect to, got {type(x).__name__}")
    return xs, False


def _context(graph: Graph, node_id: int, needs: tuple[bool, ...]) -> VjpContext:
    node = graph.nodes[node_id]
    return VjpContext(
        inputs=tuple(Tensor(graph, i) for i in node.inputs), out=Tensor(graph, node_id),
        attrs=dict(node.attrs), needs=needs,
    )


def _accumulate(parts: list[Tensor], node_id: int, graph: Graph) -> Tensor:
    """Sum the gradient contributions a node received (one per use of it)."""
    total = parts[0]
    for p in parts[1:]:
        with graph.phase("backward", accumulates=node_id):
            total = total + p
    return total


def _blocked_error(graph: Graph, node_id: int, x_names: str) -> NotDifferentiableError:
    node = graph.nodes[node_id]
    reason = spec(node.op).not_differentiable
    return NotDifferentiableError(
        f"cannot differentiate through {node.op} (node #{node.id} '{node.name}', created at {node.source}): "
        f"{reason}.\n  The gradient with respect to {x_names} would have to flow through it. "
        f"Cut the path (compute that value outside the graph and feed it as an input) or use a "
        f"differentiable op instead."
    )


def grad(
    y: Tensor,
    xs: Tensor | Sequence[Tensor],
    seed: Tensor | np.ndarray | float | None = None,
) -> Tensor | list[Tensor]:
    """Append the backward graph of ``y`` and return d y / d x for each x, as Tensors.

    Args:
        y: what to differentiate; must be a scalar unless ``seed`` is given.
        xs: a Tensor or a list of Tensors (inputs, parameters or any intermediate node).
        seed: the gradient flowing into ``y`` (same shape as ``y``); default 1 for a
            scalar. With a seed, the result is the vector-Jacobian product seed^T J.

    Returns:
        One Tensor per x (a list if ``xs`` was a list). An x that ``y`` does not depend
        on gets zeros.

    Raises:
        NotDifferentiableError: a path from an x to y runs through an op with no backward
            rule; the message names it.
    """
    xs_list, single = _as_list(xs)
    graph = _graph_of([y, *xs_list])
    source = user_source()
    for x in xs_list:
        if x.dtype != "float":
            raise TypeError(f"grad: {x.node.describe()} holds integers; gradients exist only for float tensors")
    with graph.phase("backward", seed_of=y.node_id):
        if seed is None:
            if y.shape != ():
                raise ValueError(
                    f"grad: y has shape {y.shape}, but a gradient needs a scalar y (e.g. at.sum(y) or a loss)"
                    f" — or pass seed= with shape {y.shape} to get a vector-Jacobian product.\n  at {source}"
                )
            seed_t = constant(1.0, name="1 (seed)", graph=graph, source=source)
        else:
            seed_t = seed if isinstance(seed, Tensor) else constant(np.asarray(seed, dtype=np.float64), name="seed",
                                                                    graph=graph, source=source)
            if seed_t.shape != y.shape:
                raise ValueError(f"grad: seed has shape {seed_t.shape} but y has shape {y.shape}\n  at {source}")

    # 1. the nodes that y depends on through differentiable edges ...
    to_y: set[int] = set()
    blockers: set[int] = set()
    stack = [y.node_id]
    while stack:
        i = stack.pop()
        if i in to_y:
            continue
        to_y.add(i)
        node = graph.nodes[i]
        op = spec(node.op)
        if op.leaf:
            continue
        if op.not_differentiable is not None:
            blockers.add(i)
            continue
        stack.extend(inp for k, inp in enumerate(node.inputs) if op.differentiable_input(k))
    # ... and that depend on some x
    x_ids = {x.node_id for x in xs_list}
    from_x: set[int] = set(x_ids)
    for node in graph.nodes[min(x_ids): y.node_id + 1]:
        if node.id not in from_x and any(i in from_x for i in node.inputs):
            from_x.add(node.id)
    for b in sorted(blockers):
        if any(i in from_x for i in graph.nodes[b].inputs):
            raise _blocked_error(graph, b, ", ".join(repr(x.name) for x in xs_list))
    active = to_y & from_x

    # 2.-3. reverse sweep
    grads: dict[int, list[Tensor]] = {y.node_id: [seed_t]}
    order: list[int] = []
    done: dict[int, Tensor] = {}
    for node_id in sorted(active, reverse=True):
        parts = grads.get(node_id)
        if not parts:
            continue
        total = _accumulate(parts, node_id, graph)
        done[node_id] = total
        node = graph.nodes[node_id]
        op = spec(node.op)
        if op.leaf:
            continue
        order.append(node_id)
        needs = tuple(i in active and op.differentiable_input(k) for k, i in enumerate(node.inputs))
        if not any(needs):
            continue
        with graph.phase("backward", vjp_of=node_id):
            contributions = op.vjp(_context(graph, node_id, needs), total)
        if len(contributions) != len(node.inputs):
            raise RuntimeError(f"the backward rule of {node.op} returned {len(contributions)} gradients "
                               f"for {len(node.inputs)} inputs")
        for k, (inp, contrib) in enumerate(zip(node.inputs, contributions)):
            if contrib is None or not needs[k]:
                continue
            want = graph.nodes[inp].shape
            if contrib.shape != want:
                raise ValueError(
                    f"the backward rule of {node.op} (node #{node_id}, created at {node.source}) returned a "
                    f"gradient of shape {contrib.shape} for its input {k}, which has shape {want}. "
                    f"A gradient always has its input's shape; a broadcast input needs sum_to(g, {want})."
                )
            grads.setdefault(inp, []).append(contrib)

    # 4. results
    results = []
    for x in xs_list:
        if x.node_id in done:
            results.append(done[x.node_id])
        else:  # y does not depend on x: the gradient is exactly zero
            with graph.phase("backward", grad_of=x.node_id):
                results.append(_shape.broadcast_to(constant(0.0, graph=graph, source=source), x.shape))
    for x, r in zip(xs_list, results):
        r.node.meta.setdefault("grad_of", x.node_id)
    graph.passes.append({
        "kind": "grad", "y": y.node_id, "seed": seed_t.node_id, "order": order,
        "grads": {str(k): v.node_id for k, v in done.items()}, "source": source,
    })
    return results[0] if single else results


def jvp(
    ys: Tensor | Sequence[Tensor],
    xs: Tensor | Sequence[Tensor],
    tangents: Any,
) -> Tensor | list[Tensor]:
    """Forward mode: the directional derivative of ``ys`` along ``tangents`` (J v), as Tensors.

    ``tangents`` holds one Tensor or array per x, of x's shape. Forward mode costs one
    pass per input *direction*; reverse mode (``grad``) one pass per *output*. So JVPs
    win for few inputs and many outputs, VJPs for the usual many-parameters-one-loss.

    Ops with a ``jvp`` rule use it; for the others the tangent is derived from the VJP
    rule by linearity (the VJP is linear in its gradient, so differentiating
    ``<vjp(u), v>`` with respect to ``u`` gives back ``J v``).
    """
    ys_list, single = _as_list(ys)
    xs_list, _ = _as_list(xs)
    tangents_list = _tangents_for(xs_list, tangents)
    graph = _graph_of([*ys_list, *xs_list])
    source = user_source()
    tan: dict[int, Tensor] = {}
    with graph.phase("backward", mode="jvp"):
        for x, t in zip(xs_list, tangents_list):
            t = t if isinstance(t, Tensor) else constant(np.asarray(t, dtype=np.float64), name="tangent",
                                                         graph=graph, source=source)
            if t.shape != x.shape:
                raise ValueError(f"jvp: tangent for {x.name!r} has shape {t.shape}, expected {x.shape}")
            tan[x.node_id] = t
    last = max(y.node_id for y in ys_list)
    needed = set(graph.ancestors([y.node_id for y in ys_list]))
    x_names = ", ".join(repr(x.name) for x in xs_list)
    # A node with no rule (argmax) only matters if its tangent is *used*: its integer
    # output may feed only inputs that take no gradient (embedding's ids), as in grad().
    blocked: dict[int, int] = {}  # node id -> the op node without a rule it depends on
    for node in graph.nodes[min(tan): last + 1]:
        if node.id in tan or node.id not in needed:
            continue
        op = spec(node.op)
        for k, i in enumerate(node.inputs):
            if i in blocked and op.differentiable_input(k):
                raise _blocked_error(graph, blocked[i], x_names)
        ins = [tan.get(i) for i in node.inputs]
        ins = [t if op.differentiable_input(k) else None for k, t in enumerate(ins)]
        if all(t is None for t in ins):
            continue
        if op.not_differentiable is not None:
            blocked[node.id] = node.id
            continue
        with graph.phase("backward", mode="jvp", jvp_of=node.id):
            ctx = _context(graph, node.id, tuple(t is not None for t in ins))
            out = op.jvp(ctx, tuple(ins)) if op.jvp is not None else _jvp_from_vjp(graph, node.id, ctx, ins)
        if out is not None:
            if out.shape != node.shape:
                out = _shape.broadcast_to(out, node.shape)
            tan[node.id] = out
    results = []
    for y in ys_list:
        if y.node_id in blocked:
            raise _blocked_error(graph, blocked[y.node_id], x_names)
        if y.node_id in tan:
            results.append(tan[y.node_id])
        else:
            with graph.phase("backward", mode="jvp"):
                results.append(_shape.broadcast_to(constant(0.0, graph=graph, source=source), y.shape))
    return results[0] if single else results


def _tangents_for(xs: list[Tensor], tangents: Any) -> list[Any]:
    """One tangent per x. How many tangents there are depends on the *xs*, never on the ys.

    With one x, a bare tangent (a Tensor, an array, a number, or a nested list of numbers of
    x's shape) is that x's tangent, whether ``xs`` was ``x`` or ``[x]`` and whatever the ys:
    ``jvp(y, x, v)``, ``jvp([y1, y2], [x], v)`` and ``jvp(y, [x], [v])`` mean the same. A list
    of Tensors or arrays is a list of tangents, one per x, as it is for several xs.
    """
    def is_tangent_object(t: Any) -> bool:
        return isinstance(t, (Tensor, np.ndarray))

    if not isinstance(tangents, (list, tuple)):
        if len(xs) == 1:
            return [tangents]
        if isinstance(tangents, Tensor) or np.ndim(tangents) == 0:
            raise ValueError(f"jvp: {len(xs)} inputs need a list of {len(xs)} tangents (one per input), got one "
                             f"{type(tangents).__name__}")
        out = list(tangents)  # an array stacked along its first axis: one slice per x
    elif len(xs) == 1 and not all(is_tangent_object(t) for t in tangents):
        # numbers: either the tangent itself written as a list, or [tangent] wrapped
        if np.shape(tangents) == xs[0].shape or len(tangents) != 1:
            return [tangents]
        out = list(tangents)
    else:
        out = list(tangents)
    if len(out) != len(xs):
        raise ValueError(f"jvp: {len(xs)} inputs but {len(out)} tangents (give one tangent per input, in order)")
    return out


def _jvp_from_vjp(graph: Graph, node_id: int, ctx: VjpContext, tangents: list[Tensor | None]) -> Tensor:
    """J t from the VJP rule: J t = d/du <J^T u, t> (the value of u does not matter)."""
    node = graph.nodes[node_id]
    u = constant(np.zeros(node.shape), name="u (linearisation point)", graph=graph)
    pulled = spec(node.op).vjp(ctx, u)
    terms = [_sum(p * t) for p, t in zip(pulled, tangents) if p is not None and t is not None]
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return grad(total, u)


def hvp(y: Tensor, x: Tensor, v: Tensor | np.ndarray) -> Tensor:
    """Hessian-vector product H v of a scalar ``y`` at ``x``, as grad of grad.

    ``grad(y, x)`` is a graph; ``sum(grad(y, x) * v)`` is a scalar graph; its gradient
    with respect to ``x`` is H v. No Hessian is ever formed.
    """
    g = grad(y, x)
    v_t = v if isinstance(v, Tensor) else constant(np.asarray(v, dtype=np.float64), name="v", graph=x.graph)
    return grad(_sum(g * v_t), x)
