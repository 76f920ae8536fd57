"""Lesson 1b, exercise 1's graphs: what a student's ``topo_order`` walks, and how its answer is checked.

A graph of the check is plain data, a :class:`Shape`: node k's name and the indices of its inputs (earlier
nodes), the root last. The nodes the student's sort walks are built from it where that sort runs
(:func:`submission_graph`, fetched with ``on_submission_side``: in a graded course the sandbox's copy, whose
attribute reads the judge could not answer), every read of ``.inputs`` counted and stopped past a budget (a sort
that walks every path of a chain of diamonds would run for hours). The sort's answer is then checked against the
check's own Shape, node by node, by identity with what the builder returned; nothing else the builder says is
believed. :func:`graphs` lists the structure cases (a leaf, x * x, a diamond, a chain of ~30 diamonds, random
graphs with shared nodes, a chain longer than Python's recursion limit); :func:`sorted_by_student` sorts one and
says what is wrong in the words a student needs.

``lesson01b.topo_order_check`` uses these; this file gives the answer away: try the lesson first.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ..grading.exercises import ExerciseError, on_submission_side

__all__ = ["Shape", "submission_graph", "sorted_by_student", "graphs"]

class _TooManyReads(Exception):
    """Raised by a node's ``inputs`` once a topological sort has read far more than it needs."""


class _Counter:
    def __init__(self, budget: int) -> None:
        self.reads, self.budget = 0, budget


class _Node:
    """A node of the check's own graphs: an ``inputs`` tuple (every read counted), and a name for the messages."""

    def __init__(self, name: str, inputs: Sequence[_Node], counter: _Counter) -> None:
        self.name, self.own_inputs, self.counter = name, tuple(inputs), counter

    @property
    def inputs(self) -> tuple[_Node, ...]:
        self.counter.reads += 1
        if self.counter.reads > self.counter.budget:
            raise _TooManyReads(self.name)
        return self.own_inputs

    def __repr__(self) -> str:
        return f"<node {self.name}>"


def submission_graph(names: Sequence[str], inputs: Sequence[Sequence[int]],
                     budget: int) -> tuple[list[_Node], _Counter]:
    """The nodes of a graph the check chose, made where the student's code runs: ``(nodes, counter)``.

    Node k is named ``names[k]`` and its ``inputs`` are the nodes ``inputs[k]`` (indices of earlier nodes);
    ``nodes`` lists them in that order. Every read of ``.inputs`` is counted by ``counter``, and stopped past
    ``budget`` (a sort that walks every path). The check fetches this function with ``on_submission_side``.
    """
    counter = _Counter(int(budget))
    nodes: list[_Node] = []
    for name, ins in zip(names, inputs):
        nodes.append(_Node(str(name), tuple(nodes[int(j)] for j in ins), counter))
    return nodes, counter


class Shape:
    """A graph as plain data: node k's name and the indices of its inputs (always earlier nodes); the root last."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.inputs: list[tuple[int, ...]] = []

    def add(self, name: str, *inputs: int) -> int:
        self.names.append(name)
        self.inputs.append(tuple(inputs))
        return len(self.names) - 1

    def __len__(self) -> int:
        return len(self.names)

    def budget(self) -> int:
        """The reads of ``.inputs`` a sort may make: far more than one visit of each node needs."""
        return 20 * len(self) + 100

    def reachable(self) -> list[int]:
        """The nodes reachable from the root (the root first), found by the check itself."""
        root = len(self) - 1
        seen, todo, found = {root}, [root], [root]
        while todo:
            for child in self.inputs[todo.pop()]:
                if child not in seen:
                    seen.add(child)
                    found.append(child)
                    todo.append(child)
        return found

def _built(shape: Shape, where: str) -> tuple[list[Any], Any]:
    """The nodes of ``shape`` where the student's code runs, and their read counter (see submission_graph)."""
    build = on_submission_side(f"{__name__}.submission_graph")
    made = build(list(shape.names), [list(i) for i in shape.inputs], shape.budget())
    nodes, counter = made if isinstance(made, (list, tuple)) and len(made) == 2 else (None, None)
    if not isinstance(nodes, list) or len(nodes) != len(shape) or len({id(n) for n in nodes}) != len(shape):
        raise ExerciseError(f"the check could not build its graph ({where}) where your code runs: did your answer "
                            "change the check's module?")
    return nodes, counter


def _check_order(got: Any, nodes: list[Any], shape: Shape, where: str) -> list[int]:
    """``got`` lists every node of ``shape`` reachable from its root, each once, every node after all of its
    inputs; ``nodes`` are the objects the sort walked, in ``shape``'s order. The indices of ``got``, in its order."""
    if not isinstance(got, (list, tuple)):
        raise ExerciseError(f"topo_order(root) should return a list of the nodes, got {type(got).__name__} "
                            f"({where})")
    want = shape.reachable()
    wanted = set(want)
    index = {id(n): k for k, n in enumerate(nodes)}
    position: dict[int, int] = {}
    order: list[int] = []
    for k, node in enumerate(got):
        i = index.get(id(node))
        if i is None or nodes[i] is not node or i not in wanted:
            raise ExerciseError(f"topo_order(root) returned {node!r:.60} at position {k}, which is not a node "
                                f"reachable from the root through .inputs ({where})")
        if i in position:
            times = sum(1 for n in got if n is node)
            raise ExerciseError(
                f"node {shape.names[i]!r} appears {times} times in topo_order(root) ({where}); every node must "
                "appear exactly once, even one that several nodes use (it is reached along several paths): remember "
                "the nodes already visited (a set) and skip them")
        position[i] = k
        order.append(i)
    missing = [i for i in want if i not in position]
    if missing:
        names = ", ".join(repr(shape.names[i]) for i in missing[:5]) + (" ..." if len(missing) > 5 else "")
        raise ExerciseError(f"topo_order(root) misses {len(missing)} of the {len(want)} nodes reachable from the "
                            f"root ({where}): {names}. Every node reachable through .inputs must be listed, the "
                            "root and the leaves included")
    wrong = [(i, c) for i in want for c in shape.inputs[i] if position[c] > position[i]]
    if wrong:
        node, child = wrong[0]
        raise ExerciseError(f"node {shape.names[node]!r} comes before its input {shape.names[child]!r} in "
                            f"topo_order(root) (positions {position[node]} and {position[child]}, {where}): every "
                            "node must come after all of its inputs, and the root last (backward() walks the list "
                            "from its end). Append a node only once all of its inputs are in the list (post-order): "
                            "push it back, marked, before its inputs, and append it when you meet it again")
    return order


def _over_budget(counter: Any, budget: int) -> bool:
    reads = getattr(counter, "reads", 0)
    return type(reads) is int and reads > budget


def _run_topo(topo_order: Callable[[Any], Any], root: Any, where: str, counter: Any, budget: int) -> Any:
    try:
        result = topo_order(root)
    except NotImplementedError:
        raise
    except _TooManyReads:
        raise
    except RecursionError:
        raise ExerciseError(
            f"topo_order(root) raised RecursionError ({where}): a recursive visit needs one Python call per link "
            f"of the longest chain, and Python stops at sys.getrecursionlimit() = {sys.getrecursionlimit()}. Keep "
            "the nodes still to visit in a list of your own (a stack) instead of in Python's calls") from None
    except Exception as e:  # noqa: BLE001 - the student's function failing is a finding
        if _over_budget(counter, budget):    # stopped by the nodes (in a graded course it arrives as RemoteError)
            raise _TooManyReads from None
        raise ExerciseError(f"topo_order(root) raised {type(e).__name__}: {e} ({where})") from e
    if _over_budget(counter, budget):        # stopped, but the answer swallowed the stop
        raise _TooManyReads
    return result


def _read_budget_message(where: str, budget: int, n: int) -> ExerciseError:
    return ExerciseError(
        f"topo_order(root) read the .inputs of the {n} nodes more than {budget} times ({where}) and was "
        "stopped: it walks every PATH to a node, and their number doubles with each diamond. Visit each node once: "
        "remember the nodes already visited (a set) and skip them")


def sorted_by_student(topo_order: Callable[[Any], Any], shape: Shape, where: str, twice: bool) -> list[int]:
    """Build ``shape`` where the student's sort runs, sort it (twice: marks left on the nodes show), check the
    order; the node indices in the student's order."""
    nodes, counter = _built(shape, where)
    order: list[int] = []
    for attempt in ("", ", called a second time on the same graph")[: 2 if twice else 1]:
        counter.reads = 0
        try:
            got = _run_topo(topo_order, nodes[-1], where + attempt, counter, shape.budget())
        except _TooManyReads:
            raise _read_budget_message(where + attempt, shape.budget(), len(shape)) from None
        try:
            order = _check_order(got, nodes, shape, where + attempt)
        except ExerciseError as e:
            if attempt:
                raise ExerciseError(f"{e}\n  The first call on this graph was right: does topo_order leave marks on "
                                    "the nodes (an attribute such as v.visited) that the next call finds? Keep the "
                                    "visited set inside the call") from None
            raise
    return order


def graphs(rng: np.random.Generator) -> Iterator[tuple[str, Shape]]:
    """(description, graph) for the structure cases, small ones first, made as needed."""
    s = Shape()
    s.add("x")
    yield "a single leaf", s
    s = Shape()
    x = s.add("x")
    s.add("y", x, x)
    yield "y = x * x: x is both inputs of y", s
    s = Shape()
    a = s.add("a")
    b, c = s.add("b", a), s.add("c", a)
    s.add("d", b, c)
    yield "a diamond: d reads b and c, which both read a", s
    depth = int(rng.integers(28, 33))
    s = Shape()
    top = s.add("x0")
    for i in range(depth):
        left, right = s.add(f"l{i}", top), s.add(f"r{i}", top)
        top = s.add(f"x{i + 1}", left, right)
    yield f"a chain of {depth} diamonds: x{depth} reaches x0 along 2**{depth} paths", s
    for k in range(2):
        nodes_count = int(rng.integers(30, 45))
        s = Shape()
        for i in range(4):
            s.add(f"leaf{i}")
        for i in range(nodes_count):
            picks = rng.integers(max(0, len(s) - 8), len(s), size=int(rng.integers(1, 4)))
            s.add(f"v{i}", *(int(j) for j in picks))
        yield f"a random graph of {len(s)} nodes with shared nodes (random graph {k + 1})", s
    length = min(60_000, max(20_000, sys.getrecursionlimit() + 5_000))
    s = Shape()
    top = s.add("c0")
    for i in range(1, length):
        top = s.add(f"c{i}", top)
    yield f"a chain of {length} nodes, c{length - 1} reads c{length - 2} ... reads c0", s
