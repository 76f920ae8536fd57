"""Lesson 15's checks (asgteach.lessons.lesson15): they pass the work and name what is wrong in the shortcuts."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

import asgteach as at
from asgteach.lessons import ExerciseError, lesson15
from asgteach.grading.rules import problems
from asgteach.lessons.lesson15 import budget_check, checkpointed, recompute_check


# --- the lesson's model and its peaks, built here from public names (an oracle apart from the check's own) ---
def _mlp_step(n_layers, batch, width, activation="tanh", seed=None):
    """Layers h = act(h @ w + b), loss mean((h - t)^2) and its gradients; each layer's (z, a, h) ids; feeds."""
    act = getattr(at, activation)
    with at.Graph(name=f"test: {n_layers}-layer {activation} MLP"):
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


def _every(layers, k):
    """Segments of k layers: their forward nodes, all but each segment's last output (its checkpoint)."""
    return [[nid for layer in layers[i:i + k] for nid in layer][:-1] for i in range(0, len(layers), k)]


def _peak(outputs):
    return max(row["live_bytes"] for row in at.compile(list(outputs)).liveness(4))


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
    (lambda o, s: lesson15.checkpointed(o, [s]), "checkpointed"),
    (lambda o, s: o[:1], "should return a list of"),
])
def test_a_wrong_rewrite_is_named(wrong, words: str) -> None:
    with pytest.raises(ExerciseError, match=words):
        recompute_check(wrong)


def test_the_reference_borrowed_by_name_is_refused() -> None:
    def lazy(outputs, segment):   # `from asgteach.lessons.lesson15 import checkpointed` in the notebook
        return checkpointed(outputs, [segment])

    for fn in (lazy, checkpointed):
        with pytest.raises(ExerciseError, match="hands the work"):
            recompute_check(fn)


def test_the_notebooks_checkpoint_every_is_refused_by_the_exercises_rule() -> None:
    """Section 5's checkpoint_every calls checkpointed: handed one segment it is the reference's rewrite. The rule
    (read from the source, as the judge of a graded course reads the answer cell) refuses it by name."""
    def checkpoint_every(outputs, layers, k):      # the notebook's, as section 5 writes it
        segments = [[nid for layer in layers[i:i + k] for nid in layer][:-1] for i in range(0, len(layers), k)]
        return checkpointed(outputs, segments)

    def lazy(outputs, segment):
        return checkpoint_every(outputs, [list(segment) + [-1]], 1)

    with pytest.raises(ExerciseError, match="checkpointed, which the exercise asks you to write"):
        recompute_check(lazy)
    assert problems("every = checkpoint_every\n", lesson15.RULES[1])
    assert problems("y = lesson15.checkpointed(o, [s])\n", lesson15.RULES[1])


def test_the_stub_of_an_unfinished_exercise_passes_through() -> None:
    def stub(outputs, segment):
        raise NotImplementedError("exercise 1")
    with pytest.raises(NotImplementedError):
        recompute_check(stub)


def test_checkpointed_keeps_gradients_and_lowers_the_peak_on_several_segments() -> None:
    outputs, layers, feeds = _mlp_step(6, 8, 4, "sigmoid", seed=3)
    rewritten = checkpointed(outputs, _every(layers, 2))
    for a, b in zip(at.run(outputs, feeds), at.run(rewritten, feeds)):
        np.testing.assert_array_equal(a, b)
    assert _peak(rewritten) < _peak(outputs)
    assert checkpointed(outputs, _every(layers, 1))[0].graph is not outputs[0].graph
    assert len(at.compile(checkpointed(outputs, _every(layers, 1))).steps) == \
        len(at.compile(outputs).steps), "segments of one layer recompute nothing: their copies are pruned"


@lru_cache(maxsize=None)
def _peaks(n_layers: int) -> tuple:
    """(k, peak bytes) of the lesson's n-layer step checkpointed every k layers, k = 1..n."""
    m = lesson15.LESSON_MLP
    outputs, layers, _ = _mlp_step(n_layers, m["batch"], m["width"], m["activation"])
    return tuple((k, _peak(checkpointed(outputs, _every(layers, k)))) for k in range(1, n_layers + 1))


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
