"""Lesson 15's checks (asgteach.lessons.checks_memory): they pass the work and name what is wrong in the shortcuts."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

import asgteach as at
from asgteach.lessons import ExerciseError, checks_memory
from asgteach.lessons.checks_memory import budget_check, checkpointed, recompute_check


def _copy_node(new, old, node_id, inputs, phase=None, **meta):
    node = old.nodes[node_id]
    with new.phase(phase or node.phase):
        return new.add_node(node.op, inputs, node.attrs, node.shape, node.dtype, name=node.name, source=node.source,
                            meta={**node.meta, **meta}, value=old.constants.get(node_id)).id


def _rewrite(outputs, segment, when="first reader", wire="all", once=True):
    """The one-segment rewrite, right (the defaults) or wrong in one way."""
    old = outputs[0].graph
    new = at.Graph(name="rewritten")
    ids, copies = {}, {}
    for nid in old.ancestors([t.node_id for t in outputs]):
        node = old.nodes[nid]
        if node.phase == "backward":
            reads_segment = bool(set(segment) & set(node.inputs))
            if (not copies or not once) and (reads_segment if when == "first reader" else True) and \
                    (reads_segment or not copies):
                copies = {}
                for s in segment:
                    reads = [copies.get(i, ids[i]) if wire != "copies read originals" else ids[i]
                             for i in old.nodes[s].inputs]
                    copies[s] = _copy_node(new, old, s, reads, phase="backward")
            if wire == "none" or (wire == "not transposes" and node.op == "transpose"):
                inputs = [ids[i] for i in node.inputs]
            else:
                inputs = [copies.get(i, ids[i]) for i in node.inputs]
        else:
            inputs = [ids[i] for i in node.inputs]
        ids[nid] = _copy_node(new, old, nid, inputs)
    return [at.Tensor(new, ids[t.node_id]) for t in outputs]


def _identity(outputs, segment):
    return _rewrite(outputs, [], wire="none")


def test_the_rewrite_passes() -> None:
    recompute_check(_rewrite)


@pytest.mark.parametrize("wrong, words", [
    (lambda outputs, segment: outputs, "Tensors of the original graph"),
    (_identity, "recomputes nothing"),
    (lambda o, s: _rewrite(o, s, wire="none"), "no backward node reads them"),
    (lambda o, s: _rewrite(o, s, wire="not transposes"), "still reads the original"),
    (lambda o, s: _rewrite(o, s, wire="copies read originals"), "the recomputed node"),
    (lambda o, s: _rewrite(o, s, when="start of the backward"), "the peak of your plan"),
    (lambda o, s: _rewrite(o, s, once=False), "more than once"),
    (lambda o, s: checks_memory.checkpointed(o, [s]), "checkpointed"),
    (lambda o, s: o[:1], "should return a list of"),
])
def test_a_wrong_rewrite_is_named(wrong, words: str) -> None:
    with pytest.raises(ExerciseError, match=words):
        recompute_check(wrong)


def test_the_reference_borrowed_by_name_is_refused() -> None:
    def lazy(outputs, segment):   # `from asgteach.lessons.checks_memory import checkpointed` in the notebook
        return checkpointed(outputs, [segment])

    for fn in (lazy, checkpointed):
        with pytest.raises(ExerciseError, match="hands the work"):
            recompute_check(fn)


def test_the_stub_of_an_unfinished_exercise_passes_through() -> None:
    def stub(outputs, segment):
        raise NotImplementedError("exercise 1")
    with pytest.raises(NotImplementedError):
        recompute_check(stub)


def test_checkpointed_keeps_gradients_and_lowers_the_peak_on_several_segments() -> None:
    outputs, layers, feeds = checks_memory._mlp_step(6, 8, 4, "sigmoid", seed=3)
    rewritten = checkpointed(outputs, checks_memory._every(layers, 2))
    for a, b in zip(at.run(outputs, feeds), at.run(rewritten, feeds)):
        np.testing.assert_array_equal(a, b)
    assert checks_memory._peak(rewritten) < checks_memory._peak(outputs)
    assert checkpointed(outputs, checks_memory._every(layers, 1))[0].graph is not outputs[0].graph
    assert len(at.compile(checkpointed(outputs, checks_memory._every(layers, 1))).steps) == \
        len(at.compile(outputs).steps), "segments of one layer recompute nothing: their copies are pruned"


@lru_cache(maxsize=None)
def _peaks(n_layers: int) -> tuple:
    return tuple(sorted(checks_memory._peaks(n_layers).items()))


def _smallest_fit(n_layers: int, budget: int):
    return next((k for k, peak in _peaks(n_layers) if peak <= budget), None)


def test_the_budget_answer_passes_and_rules_of_thumb_fail() -> None:
    budget_check(_smallest_fit)
    with pytest.raises(ExerciseError, match="Measure the peak of each k"):
        budget_check(lambda n, budget: round(n ** 0.5))
    with pytest.raises(ExerciseError, match="should be 1 .*got None"):
        budget_check(lambda n, budget: None)
    with pytest.raises(ExerciseError, match="should be None"):
        budget_check(lambda n, budget: _smallest_fit(n, budget) or n)
    with pytest.raises(ExerciseError, match="should return a segment length"):
        budget_check(lambda n, budget: "4")
