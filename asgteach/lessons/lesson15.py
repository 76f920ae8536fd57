"""Lesson 15's checks: what the backward pass keeps, and checkpointing as a graph rewrite.

The lesson shows checkpointing with :func:`checkpointed` (the rewrite, for any number of segments)
and asks the student to write it for one segment (exercise 1) and to pick a segment length for a
memory budget (exercise 2). Each check runs the student's function on MLPs of its own (another
depth, width, batch, activation and segment than the lesson's), and judges the result from what a
plan says about it: the values it computes, the kernels it runs, which values they read, and the
bytes alive at the peak (``plan.liveness``); :func:`checkpointed` itself is refused while the answer runs
(practice mode), and ``RULES[1]`` (neither ``checkpointed`` nor the notebook's ``checkpoint_every``, which calls it)
is read from the answer's source, in both modes: in graded mode the function runs in the sandbox, where switching
the judge's copy of :func:`checkpointed` off does nothing, and its result is the reference's to the byte.
So this file gives the answers away: try the lesson first.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from typing import Any, Callable, Sequence

import numpy as np

from ..grading.checks import check_array, without
from ..grading.exercises import ExerciseError
from ..grading.rules import Rule, enforce

__all__ = ["LESSON", "RULES", "checkpointed", "recompute_check", "budget_check", "LESSON_MLP"]

LESSON = "15-memory-and-checkpointing"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {
    # the reference rewrite gives the very graph the check wants, so only its source can tell it: by name (the
    # module's own name, lesson15, is the hands-off rule's), or through the notebook's checkpoint_every, which calls it
    1: Rule(why="write the rewrite yourself, with copy_node: not through the lesson's checkpointed, which the "
                "exercise asks you to write (nor checkpoint_every, which calls it)",
            names=frozenset({"checkpointed", "checkpoint_every"}), attrs=frozenset({"checkpointed"})),
}
# exercise 2 has no source rule: its check judges the answer by the peaks it measures itself

#: the lesson's MLP (section 1's ``mlp_step``): exercise 2's check measures models of this size
LESSON_MLP = {"batch": 256, "width": 16, "activation": "tanh"}


# --- the rewrite -----------------------------------------------------------------------------------

def checkpointed(outputs: Sequence[Any], segments: Sequence[Sequence[int]]) -> list[Any]:
    """A new graph computing ``outputs``, whose backward pass recomputes the forward nodes of ``segments``.

    ``outputs`` are Tensors of one graph (a loss and its gradients, made by ``at.grad``); each
    segment is a list of ids of forward nodes, in graph order. The new graph holds the same nodes
    in the same order (so the forward ids stay the same), with one change: right before the first
    backward node that reads a value of a segment, a copy of the whole segment is inserted
    (phase "backward", ``meta["recomputes"]`` naming the original), computed from what the
    segment reads outside itself (its input: a checkpoint, and the parameters), and from then on
    every backward node reads the copies. The originals are then read by forward nodes only, so
    the plan frees them in the forward pass. Copies that no backward node reads are pruned by
    ``compile``: they cost nothing.

    Returns the new graph's Tensors standing for ``outputs``, in order.
    """
    from .. import Graph, Tensor

    old = outputs[0].graph
    segs = [list(s) for s in segments]
    owner = {nid: k for k, seg in enumerate(segs) for nid in seg}   # forward id -> its segment
    new = Graph(name=f"{old.name}, checkpointed")
    ids: dict[int, int] = {}        # old id -> new id of the node itself
    copies: dict[int, int] = {}     # old id of a segment node -> new id of its recomputed copy
    done: set[int] = set()          # segments already recomputed

    def put(node: Any, inputs: list[int], phase: str, **meta: Any) -> int:
        with new.phase(phase):
            return new.add_node(node.op, inputs, node.attrs, node.shape, node.dtype, name=node.name,
                                source=node.source, meta={**node.meta, **meta},
                                value=old.constants.get(node.id)).id

    for nid in old.ancestors([t.node_id for t in outputs]):   # id order: a topological order
        node = old.nodes[nid]
        if node.phase == "backward":
            for k in sorted({owner[i] for i in node.inputs if i in owner} - done):
                done.add(k)
                for s in segs[k]:   # the segment, in order, from its input (and the copies before it)
                    seg_node = old.nodes[s]
                    copies[s] = put(seg_node, [copies.get(i, ids[i]) for i in seg_node.inputs], "backward",
                                    recomputes=s)
            inputs = [copies.get(i, ids[i]) for i in node.inputs]
        else:
            inputs = [ids[i] for i in node.inputs]
        ids[nid] = put(node, inputs, node.phase)
    return [Tensor(new, ids[t.node_id]) for t in outputs]


# --- models of the check's own ---------------------------------------------------------------------

def _mlp_step(n_layers: int, batch: int, width: int, activation: str = "tanh", seed: int | None = None,
              ) -> tuple[list[Any], list[list[int]], dict[str, np.ndarray]]:
    """The lesson's model: layers h = act(h @ w + b), loss mean((h - t)^2), its gradients; and feeds by name."""
    import asgteach as at

    act = getattr(at, activation)
    with at.Graph(name=f"check: {n_layers}-layer {activation} MLP"):
        x, t = at.input("x", (batch, width)), at.input("t", (batch, width))
        h, params, layers = x, [], []
        for i in range(1, n_layers + 1):
            w, b = at.parameter(f"w{i}", (width, width)), at.parameter(f"b{i}", (width,))
            z = h @ w
            a = z + b
            h = act(a)
            params += [w, b]
            layers.append([z.node_id, a.node_id, h.node_id])
        loss = at.mean((h - t) ** 2)
        grads = at.grad(loss, params)
    rng = np.random.default_rng(seed)
    feeds = {"x": rng.standard_normal((batch, width)), "t": rng.standard_normal((batch, width))}
    for i in range(1, n_layers + 1):
        feeds[f"w{i}"] = rng.standard_normal((width, width)) / np.sqrt(width)
        feeds[f"b{i}"] = 0.1 * rng.standard_normal(width)
    return [loss, *grads], layers, feeds


def _segment(layers: list[list[int]], first: int, last: int) -> list[int]:
    """The forward nodes of layers ``first``..``last`` (1-based), all but the last layer's output (the checkpoint)."""
    return [nid for layer in layers[first - 1:last] for nid in layer][:-1]


def _every(layers: list[list[int]], k: int) -> list[list[int]]:
    return [_segment(layers, i + 1, min(i + k, len(layers))) for i in range(0, len(layers), k)]


def _peak(outputs: Sequence[Any]) -> int:
    import asgteach as at

    return max(row["live_bytes"] for row in at.compile(list(outputs)).liveness(4))


# --- exercise 1: the rewrite for one segment -------------------------------------------------------

def _keys(graph: Any, table: dict[Any, int]) -> list[int]:
    """A number per node that only its structure decides (op, attributes, shape, leaf name or constant value,
    and its inputs' numbers): an original and its recomputed copy get the same one, in any graph."""
    out: list[int] = []
    for node in graph.nodes:
        if node.op == "constant":
            value = graph.constants.get(node.id)
            own: Any = ("constant", node.shape, None if value is None else np.asarray(value).tobytes())
        elif not node.inputs:
            own = (node.op, node.name, node.shape)
        else:
            own = (node.op, repr(sorted(node.attrs.items())), node.shape, node.dtype,
                   tuple(out[i] for i in node.inputs))
        out.append(table.setdefault(own, len(table)))
    return out


def _describe(node: Any) -> str:
    return f"#{node.id} {node.op}" + (f" '{node.name}'" if node.name != node.op else "")


def _judge(got: Any, outputs: list[Any], segment: list[int], feeds: dict[str, np.ndarray], where: str) -> None:
    import asgteach as at

    old = outputs[0].graph
    if not isinstance(got, (list, tuple)) or len(got) != len(outputs) or not all(isinstance(t, at.Tensor) for t in got):
        raise ExerciseError(f"{where}: recompute_segment should return a list of {len(outputs)} Tensors (one per "
                            f"output, in order), got {type(got).__name__}: {got!r:.100}")
    new = got[0].graph
    if any(t.graph is not new for t in got):
        raise ExerciseError(f"{where}: the Tensors returned belong to different graphs: return them all from the "
                            "one new graph")
    if new is old:
        raise ExerciseError(f"{where}: recompute_segment returned Tensors of the original graph. Build a NEW "
                            "at.Graph and copy the nodes into it (section 3's copy_graph): a plan runs nodes in id "
                            "order, so a node appended to the old graph after at.grad would run after the backward "
                            "nodes that need it")
    for k, (t, o) in enumerate(zip(got, outputs)):
        if t.shape != o.shape:
            raise ExerciseError(f"{where}: output {k} should have shape {o.shape} (that of {_describe(o.node)}), "
                                f"got {t.shape}: return the new graph's Tensors in the order of `outputs`")
    of = [old.nodes[o.node_id].meta.get("grad_of") for o in outputs[1:]]
    names = ["the loss"] + [f"d loss / d {old.nodes[i].name}" if isinstance(i, int) else f"output {k + 1}"
                            for k, i in enumerate(of)]
    want = at.run(list(outputs), feeds)
    try:
        values = at.run(list(got), feeds)
    except Exception as e:  # noqa: BLE001 - a graph that cannot run is the finding
        raise ExerciseError(f"{where}: your rewritten graph could not be run with the feeds by name "
                            f"({', '.join(sorted(feeds))}): {type(e).__name__}: {e}. Copy each node with its name, "
                            "op, attributes and shape (constants with their value)") from e
    for name, v, w in zip(names, values, want):
        check_array(v, w, name=name, where=f"{where}, your rewritten graph vs the original", rtol=1e-12, atol=1e-14)

    table: dict[Any, int] = {}
    old_keys, new_keys = _keys(old, table), _keys(new, table)
    seg_keys = {old_keys[s]: s for s in segment}
    forward = set(new.ancestors([got[0].node_id]))           # what the loss needs: the forward pass
    originals = {i: seg_keys[new_keys[i]] for i in forward if new_keys[i] in seg_keys}
    plan, before = at.compile(list(got)), at.compile(list(outputs))
    later = [st.node for st in plan.steps if st.node.id not in forward]   # the backward pass (and recomputation)
    copies = [n for n in later if new_keys[n.id] in seg_keys]
    made = [n for n in new.nodes if n.id not in forward and new_keys[n.id] in seg_keys]
    readers = [(n, i) for n in later for i in n.inputs if i in originals]
    if readers:
        n, i = readers[0]
        orig = old.nodes[originals[i]]
        if not made:
            raise ExerciseError(f"{where}: your rewritten graph recomputes nothing: it is a copy of the original "
                                f"(the backward node {_describe(n)} reads the forward pass's own {_describe(orig)}, "
                                "which therefore stays alive into the backward pass). Insert copies of the segment's "
                                "nodes before the first backward node that reads one, and make the backward nodes "
                                "read the copies")
        if not copies:
            raise ExerciseError(f"{where}: your graph holds {len(made)} recomputed node(s), but no backward node reads "
                                f"them, so the plan prunes them away: the backward pass still reads the originals "
                                f"(e.g. {_describe(n)} reads {_describe(orig)}). Rewire the backward nodes' inputs "
                                "to the copies")
        who = ("the recomputed node" if new_keys[n.id] in seg_keys else "the backward node") + f" {_describe(n)}"
        raise ExerciseError(f"{where}: {who} still reads the original {_describe(orig)} of the segment "
                            f"({len(readers)} such read(s) in all), so the original stays alive into the backward "
                            "pass. Every node after the forward pass (the copies included) must read the recomputed "
                            "copy of a segment value")
    made_of = [new_keys[n.id] for n in copies]
    twice = sorted({seg_keys[key] for key in made_of if made_of.count(key) > 1})
    if twice:
        raise ExerciseError(f"{where}: segment node {_describe(old.nodes[twice[0]])} is recomputed more than once; "
                            "make each copy once, before the first backward node that reads a segment value, and "
                            "let every backward reader use it")
    ref = checkpointed(outputs, [segment])
    extra, want_extra = len(plan.steps) - len(before.steps), len(at.compile(ref).steps) - len(before.steps)
    if extra != want_extra:
        raise ExerciseError(f"{where}: the plan of your graph runs {extra} kernel(s) more than the original's; "
                            f"recomputing the segment values that the backward pass reads takes {want_extra}. "
                            "Recompute the segment only (from its input, which stays alive), nothing outside it")
    peak, ref_peak, old_peak = _peak(got), _peak(ref), _peak(outputs)
    if peak > ref_peak:
        first = min(n.id for n in copies)
        raise ExerciseError(f"{where}: the peak of your plan is {peak} bytes (the original's: {old_peak}); "
                            f"recomputing right before the first backward node that reads a segment value gives "
                            f"{ref_peak}. Your copies start at node #{first}: made earlier than needed, they are "
                            "alive alongside the backward pass of the layers after the segment")


def recompute_check(fn: Callable[..., Any]) -> None:
    """``fn(outputs, segment)``: the one-segment rewrite, on two MLPs the lesson never built.

    It must compute the same loss and gradients (to round-off), run no backward node on an
    original value of the segment, recompute each segment value the backward reads exactly once,
    and peak no higher than recomputing right before the first backward reader.
    """
    this = sys.modules[__name__]
    names = getattr(getattr(fn, "__code__", None), "co_names", ())
    found = getattr(fn, "__name__", "it") if fn is checkpointed else next(
        (k for k, v in getattr(fn, "__globals__", {}).items() if v is checkpointed and k in names), None)
    if found:
        raise ExerciseError(f"recompute_segment hands the work to the lesson's checkpointed() (as {found!r}): write "
                            "the rewrite yourself")
    enforce(fn, RULES[1], "recompute_segment")
    cases = [(6, 7, 5, "relu", 2, 4), (5, 9, 4, "tanh", 1, 3)]
    for n_layers, batch, width, activation, first, last in cases:
        outputs, layers, feeds = _mlp_step(n_layers, batch, width, activation)
        segment = _segment(layers, first, last)
        old = outputs[0].graph
        shape = [(n.op, n.inputs) for n in old.nodes]
        where = (f"on the check's {n_layers}-layer {activation} MLP (batch {batch}, width {width}), segment = "
                 f"layers {first}-{last} (nodes {segment})")
        with without(attrs=[(this, "checkpointed")], why="it is the answer; build your new graph with copy_node"):
            try:
                got = fn(list(outputs), list(segment))
            except (ExerciseError, NotImplementedError):
                raise
            except Exception as e:  # noqa: BLE001 - the student's function failing is a finding
                raise ExerciseError(f"{where}: recompute_segment raised {type(e).__name__}: {e}") from e
        if [(n.op, n.inputs) for n in old.nodes] != shape:
            raise ExerciseError(f"{where}: recompute_segment changed the original graph (it now has "
                                f"{len(old.nodes)} nodes, it had {len(shape)}): leave it as it is, build a new one")
        _judge(got, outputs, segment, feeds, where)


# --- exercise 2: a segment length for a memory budget ----------------------------------------------

@lru_cache(maxsize=8)
def _peaks(n_layers: int) -> dict[int, int]:
    """The peak bytes of the lesson's n-layer training step, checkpointed every k layers, for k = 1..n.

    Only structure decides them (not the values), so they are measured once per depth.
    """
    outputs, layers, _ = _mlp_step(n_layers, LESSON_MLP["batch"], LESSON_MLP["width"], LESSON_MLP["activation"])
    return {k: _peak(checkpointed(outputs, _every(layers, k))) for k in range(1, n_layers + 1)}


def budget_check(fn: Callable[..., Any]) -> None:
    """``fn(n_layers, budget)``: the smallest k whose checkpointed step peaks within ``budget`` bytes, else None.

    On depths the lesson did not tabulate, with budgets around the measured peaks (a loose one, a
    tight one, one just below the least peak), so a rule of thumb such as round(sqrt(n)) fails.
    """
    for n_layers in (8, 14):
        peaks = dict(_peaks(n_layers))
        least = min(peaks.values())
        # loose (no checkpointing needed), half-way, just above the least peak, just below it (nothing fits):
        # each at least 0.5% away from every peak, so that no answer hangs on a few bytes
        budgets = [int(peaks[1] * 1.01), (peaks[1] + least) // 2, int(least * 1.01), int(least * 0.99)]
        for budget in budgets:
            fits = [k for k in sorted(peaks) if peaks[k] <= budget]
            want = fits[0] if fits else None
            call = f"segment_for_budget({n_layers}, {budget})"
            try:
                got = fn(n_layers, budget)
            except (ExerciseError, NotImplementedError):
                raise
            except Exception as e:  # noqa: BLE001 - the student's function failing is a finding
                raise ExerciseError(f"{call} raised {type(e).__name__}: {e}") from e
            if got is not None and not isinstance(got, (int, np.integer)):
                raise ExerciseError(f"{call} should return a segment length (an int from 1 to {n_layers}) or None, "
                                    f"got {type(got).__name__}: {got!r:.60}")
            if got == want:
                continue
            if want is None:
                raise ExerciseError(f"{call} should be None: no segment length fits (the least peak, over k = 1.."
                                    f"{n_layers}, is {least} bytes), but you answered k = {got}, whose peak is "
                                    f"{peaks.get(int(got), '?')} bytes")
            if got is None:
                raise ExerciseError(f"{call} should be {want} (its peak is {peaks[want]} bytes), got None")
            mine = peaks.get(int(got))
            if mine is None:
                raise ExerciseError(f"{call}: k = {got} is not a segment length of a {n_layers}-layer MLP (1 to "
                                    f"{n_layers})")
            why = (f"k = {got} peaks at {mine} bytes, over the budget" if mine > budget else
                   f"k = {got} fits ({mine} bytes) but k = {want} fits too ({peaks[want]} bytes) and recomputes "
                   "fewer layers")
            raise ExerciseError(f"{call} should be {want}, got {got}: {why}. Measure the peak of each k from "
                                "the plan; do not guess it from a rule")
