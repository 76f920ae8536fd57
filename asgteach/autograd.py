"""Automatic differentiation as a graph-to-graph transformation.

``at.grad(y, [x, w])`` does not compute any numbers. It walks the graph from ``y`` back
to the inputs in reverse topological order (the graph's node order, reversed) and, for
each node, calls its op's backward rule (``OpSpec.vjp``). Those rules are written in
graph ops, so what comes out is *more graph*: new nodes, marked ``phase="backward"``,
appended to the same ASG. You can draw them, run them on any backend, and — because they
are ordinary nodes — differentiate them again (``grad`` of ``grad``: Hessian-vector
products).

The algorithm, in the words of the code below (``grad`` holds the sweep itself, on one
screen; each chore has a named helper):

1. Find the nodes that matter (``_on_paths``): those that depend on some ``x`` *and* that
   ``y`` depends on through differentiable edges. Nothing else gets a gradient node.
2. Seed (``_seed``): the gradient of ``y`` with respect to itself is 1 (or the ``seed``
   you give).
3. Visit the nodes from ``y`` backwards. A node's gradient is the SUM of what all its
   consumers sent it (:func:`accumulate`; fan-out: ``x`` used twice gets two
   contributions, added with ``add`` nodes — forgetting the sum, ``=`` instead of ``+=``,
   is a classic bug, and :func:`accumulation` lets a lesson plant it). Then call the
   node's rule to send contributions to its inputs (``_check_rule_result`` checks them).
4. Return the accumulated gradient of each ``x`` as a Tensor, and record the sweep in
   ``graph.passes`` for the step-through view (``_record_pass``).

``at.jvp`` is forward mode: it pushes a tangent from the inputs to the outputs, one node
at a time, in graph order.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from .graph import Graph, user_source
from .ops import shape as _shape
from .ops.leaves import constant
from .ops.reduce import sum as _sum
from .ops.registry import NotDifferentiableError, VjpContext, spec
from .ops.trace import common_graph
from .tensor import Tensor

__all__ = ["grad", "jvp", "hvp", "accumulation", "accumulate", "NotDifferentiableError"]


def _one_graph(tensors: Sequence[Tensor]) -> tuple[Graph, list[Tensor]]:
    """The graph of ``tensors`` and the tensors as Tensors of it (inside ``at.vmap``'s trace, a weight the
    traced function closes over is lifted into the trace, as for any op: ``common_graph``)."""
    try:
        return common_graph(tensors)
    except ValueError:
        raise ValueError("all tensors given to grad/jvp must belong to one graph") from None


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


def accumulate(parts: list[Tensor], node_id: int, graph: Graph) -> Tensor:
    """A node's gradient: the SUM of the contributions its consumers sent it (one per use).

    ``x`` used twice gets two contributions, added with an ``add`` node marked
    ``meta["accumulates"] = node_id`` (the step-through view shows those adds). This is the
    one place where contributions meet; :func:`accumulation` swaps it for a bug hunt.
    """
    total = parts[0]
    for p in parts[1:]:
        with graph.phase("backward", accumulates=node_id):
            total = total + p
    return total


@contextmanager
def accumulation(rule: Callable[[list[Tensor], int, Graph], Tensor]) -> Iterator[None]:
    """Inside the block, ``grad`` combines each node's contributions with ``rule`` instead of summing.

    ``rule(parts, node_id, graph) -> Tensor`` gets the contributions a node received (a
    list of Tensors, in the order they arrived), the node's id and the graph. It is the hook
    the bug-hunt lessons use to plant the classic fan-out bug, ``=`` instead of ``+=``::

        def last_one_wins(parts, node_id, graph):
            return parts[-1]

        with autograd.accumulation(last_one_wins):
            report = at.gradcheck(loss, [x], feeds)   # wrong wherever a value is used twice

    Leaving the block restores the previous rule, also after an error. Blocks nest. The rule lives
    in a context variable of this module, so it holds for this thread (and asyncio task) only: a
    bug planted in one notebook's thread never leaks into a gradient another thread computes.
    """
    token = _RULE.set(rule)
    try:
        yield
    finally:
        _RULE.reset(token)


#: The rule ``grad`` combines a node's contributions with: None means the true one, their sum
#: (:func:`accumulate`); :func:`accumulation` swaps it for a block.
_RULE: ContextVar[Callable[[list[Tensor], int, Graph], Tensor] | None] = ContextVar("asgteach_accumulation",
                                                                                   default=None)


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
    given_seed = [seed] if isinstance(seed, Tensor) else []
    graph, (y, *xs_list) = _one_graph([y, *xs_list, *given_seed])
    if given_seed:
        seed, xs_list = xs_list[-1], xs_list[:-1]
    source = user_source()
    _check_float(xs_list)
    seed_t = _seed(graph, y, seed, source)
    active = _on_paths(graph, xs_list, y)                   # 1. only these nodes get a gradient

    # 2.-3. the reverse sweep: from y back to the xs, in reverse topological order (descending id)
    sent: dict[int, list[Tensor]] = {y.node_id: [seed_t]}   # node id -> contributions its consumers sent
    grads: dict[int, Tensor] = {}                           # node id -> d y / d node, complete
    for node_id in sorted(active, reverse=True):
        if node_id not in sent:
            continue
        combine = _RULE.get() or accumulate                     # (a bug hunt may have swapped the sum)
        g = grads[node_id] = combine(sent[node_id], node_id, graph)    # fan-out: sum, not overwrite
        node = graph.nodes[node_id]
        op = spec(node.op)
        needs = tuple(i in active and op.differentiable_input(k) for k, i in enumerate(node.inputs))
        if not any(needs):                                   # a leaf, or no input leads back to an x
            continue
        with graph.phase("backward", vjp_of=node_id):
            contributions = op.vjp(_context(graph, node_id, needs), g)   # the rule, in graph ops
        _check_rule_result(graph, node, contributions, needs)
        for inp, c, need in zip(node.inputs, contributions, needs):
            if need and c is not None:
                sent.setdefault(inp, []).append(c)

    # 4. results (an x that y does not depend on: exactly zero)
    results = [grads[x.node_id] if x.node_id in grads else _zero_gradient(graph, x, source) for x in xs_list]
    _record_pass(graph, y, seed_t, grads, xs_list, results, source)
    return results[0] if single else results


def _check_float(xs: list[Tensor]) -> None:
    for x in xs:
        if x.dtype != "float":
            raise TypeError(f"grad: {x.node.describe()} holds integers; gradients exist only for float tensors")


def _seed(graph: Graph, y: Tensor, seed: Tensor | np.ndarray | float | None, source: str) -> Tensor:
    """The gradient flowing into ``y``: 1 for a scalar y, else the given seed (of y's shape)."""
    with graph.phase("backward", seed_of=y.node_id):
        if seed is None:
            if y.shape != ():
                raise ValueError(
                    f"grad: y has shape {y.shape}, but a gradient needs a scalar y (e.g. at.sum(y) or a loss)"
                    f" — or pass seed= with shape {y.shape} to get a vector-Jacobian product.\n  at {source}"
                )
            return constant(1.0, name="1 (seed)", graph=graph, source=source)
        seed_t = seed if isinstance(seed, Tensor) else constant(np.asarray(seed, dtype=np.float64), name="seed",
                                                                graph=graph, source=source)
        if seed_t.shape != y.shape:
            raise ValueError(f"grad: seed has shape {seed_t.shape} but y has shape {y.shape}\n  at {source}")
        return seed_t


def _on_paths(graph: Graph, xs: list[Tensor], y: Tensor) -> set[int]:
    """The nodes on a differentiable path from some x to y: the only ones that need a gradient.

    First forward over y's ancestors (in graph order): which of them depend on an x. Then
    back from y along differentiable edges, staying among those (every node on a path from
    an x to y depends on that x). A node on such a path whose op has no backward rule
    (``argmax``) would have to pass the gradient on: an error naming it (the first one).
    An edge that takes no gradient (embedding's ids) is no path.
    """
    from_x = {x.node_id for x in xs}
    for i in _ancestors_since(graph, y.node_id, min(from_x, default=y.node_id + 1)):
        if any(j in from_x for j in graph.nodes[i].inputs):
            from_x.add(i)
    active: set[int] = set()
    blockers: list[int] = []
    stack = [y.node_id]
    while stack:
        i = stack.pop()
        if i in active or i not in from_x:
            continue
        active.add(i)
        node = graph.nodes[i]
        op = spec(node.op)
        if op.not_differentiable is None:
            stack.extend(j for k, j in enumerate(node.inputs) if op.differentiable_input(k))
        elif any(j in from_x for j in node.inputs):
            blockers.append(i)
    if blockers:
        raise _blocked_error(graph, min(blockers), ", ".join(repr(x.name) for x in xs))
    return active


def _ancestors_since(graph: Graph, y: int, first: int) -> list[int]:
    """``y`` and its ancestors made no earlier than node ``first``, in graph order.

    The graph is append-only, so a node depends only on nodes made before it: nothing made before the
    first x can depend on an x, and the walk stops there. ``jvp`` differentiates each node's own small
    rule (:func:`_jvp_from_vjp`) with ``grad``: walking every ancestor of the whole model there, once per
    node, made forward mode quadratic in the graph's length; this walk sees only the rule's few nodes.
    """
    seen = {y}
    stack = [y]
    while stack:
        for j in graph.nodes[stack.pop()].inputs:
            if j >= first and j not in seen:
                seen.add(j)
                stack.append(j)
    return sorted(seen)


def _check_rule_result(graph: Graph, node: Any, contributions: Sequence[Tensor | None],
                       needs: tuple[bool, ...]) -> None:
    """A backward rule returns one gradient (or None) per input, each of its input's shape."""
    if len(contributions) != len(node.inputs):
        raise RuntimeError(f"the backward rule of {node.op} returned {len(contributions)} gradients "
                           f"for {len(node.inputs)} inputs")
    for k, (inp, contrib) in enumerate(zip(node.inputs, contributions)):
        if contrib is None or not needs[k]:
            continue
        want = graph.nodes[inp].shape
        if contrib.shape != want:
            raise ValueError(
                f"the backward rule of {node.op} (node #{node.id}, created at {node.source}) returned a "
                f"gradient of shape {contrib.shape} for its input {k}, which has shape {want}. "
                f"A gradient always has its input's shape; a broadcast input needs sum_to(g, {want})."
            )


def _zero_gradient(graph: Graph, x: Tensor, source: str) -> Tensor:
    with graph.phase("backward", grad_of=x.node_id):
        return _shape.broadcast_to(constant(0.0, graph=graph, source=source), x.shape)


def _record_pass(graph: Graph, y: Tensor, seed: Tensor, grads: dict[int, Tensor], xs: list[Tensor],
                 results: list[Tensor], source: str) -> None:
    """Bookkeeping for the step-through view (widgets/steps.py reads ``graph.passes``).

    Marks each result with the x it is the gradient of, and records the sweep: ``order``
    holds the nodes whose rule was visited (those with a gradient, leaves left out, in visit
    order), ``grads`` maps each node to the node holding its gradient.
    """
    for x, r in zip(xs, results):
        r.node.meta.setdefault("grad_of", x.node_id)
    order = [i for i in grads if not spec(graph.nodes[i].op).leaf]   # grads was filled in visit order
    graph.passes.append({
        "kind": "grad", "y": y.node_id, "seed": seed.node_id, "order": order,
        "grads": {str(k): v.node_id for k, v in grads.items()}, "source": source,
    })


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
    graph, both = _one_graph([*ys_list, *xs_list, *(t for t in tangents_list if isinstance(t, Tensor))])
    ys_list, xs_list = both[:len(ys_list)], both[len(ys_list):len(ys_list) + len(xs_list)]
    lifted_tangents = iter(both[len(ys_list) + len(xs_list):])
    tangents_list = [next(lifted_tangents) if isinstance(t, Tensor) else t for t in tangents_list]
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
    """The tangent J t of one node, from its VJP rule (for an op with no ``jvp`` rule of its own).

    The VJP rule maps a gradient u to J^T u, and it is linear in u. So the scalar
    ``s(u) = <J^T u, t>`` equals ``<u, J t>``, and its gradient with respect to u is exactly
    J t — which ``grad`` can build. Because s is linear, the value of u never matters: a
    constant of zeros stands in for it (``u (linearisation point)``).

    Worked example: ``y = a * b`` (elementwise), tangents ``ta`` and ``tb``.

    * the VJP rule sends ``u * b`` to a and ``u * a`` to b: that is J^T u;
    * ``s = sum(u * b * ta) + sum(u * a * tb)``: the inner product with the tangents;
    * ``ds/du = b * ta + a * tb``: the product rule, the JVP of mul. With a = 2, b = 3,
      ta = 1, tb = 0: J t = 3 (nudging a by 1 moves y by b).

    The same steps turn ``matmul``'s rule (``u @ B.T``, ``A.T @ u``) into ``tA @ B + A @ tB``.
    The nodes this appends are part of the forward-mode graph; ``grad`` of ``s`` is an
    ordinary reverse sweep over the few nodes between u and s.
    """
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
    v_t = v if isinstance(v, Tensor) else constant(np.asarray(v, dtype=np.float64), name="v", graph=g.graph)
    return grad(_sum(g * v_t), x)
