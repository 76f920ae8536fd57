"""Lesson 13's checks (asgteach.lessons.lesson13): the lesson's own cells need no keys, and an answer that reaches
for the keys fails, in a kernel (the check's watch) and where it runs without them (a graded answer's sandbox)."""

from __future__ import annotations

import string

import pytest

import asgteach as at
from asgteach.grading import keys as keys_module
from asgteach.grading.keys import KeysMissing
from asgteach.lessons import ExerciseError, lesson13

#: the course's answer keys (instructor/answer_keys.py): the references the checks compare with
answer_keys = keys_module.load()


def _plans() -> list:
    with at.Graph(name="mlp"):
        x, t = at.input("x", (16, 8)), at.input("t", (16, 3))
        w1, b1, w2 = at.parameter("w1", (8, 12)), at.parameter("b1", (12,)), at.parameter("w2", (12, 3))
        loss = at.mean((at.tanh(x @ w1 + b1) @ w2 - t) ** 2)
        mlp = at.compile([loss, *at.grad(loss, [w1, b1, w2])])
    with at.Graph(name="chain"):
        a, b = at.input("a", (4, 5)), at.input("b", (4, 5))
        c = at.tanh(a * b + 1.0)
        d = at.exp(c) * at.sigmoid(c)
        chain = at.compile([at.sum(at.relu(d - b) * (d + a))])
    return [mlp, chain, *lesson13.check_plans()]


def test_show_fusion_runs_without_the_keys_and_shows_the_keys_chains(monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture) -> None:
    """Section 6's cell runs where a student's code runs (their install, a graded answer's sandbox): no keys there."""
    plans = _plans()
    expected = []
    for p in plans:
        chains = answer_keys.fusion_chains(p)
        g = p.graph
        expected.append([" -> ".join(f"#{i} {g.nodes[i].op}" for i in c) for c in chains])
        assert sum(g.nodes[i].size for c in chains for i in c[:-1]) == sum(
            g.nodes[i].size for i in answer_keys.fusible_values(p))
    monkeypatch.setenv("ASGTEACH_KEYS", "/nonexistent/answer_keys.py")
    monkeypatch.delitem(__import__("sys").modules, keys_module.MODULE)
    with pytest.raises(KeysMissing):
        keys_module.load()
    for p, chains in zip(plans, expected):
        lesson13.show_fusion(p)
        shown = [line.split("   (shape")[0] for line in capsys.readouterr().out.splitlines()[:-1]]
        assert shown == chains and chains


def test_an_answer_reaching_for_the_keys_fails_in_a_kernel_and_where_there_are_none() -> None:
    """The keys by an attribute path built from strings (no name a rule reads): in a kernel the watch refuses the
    call; where the answer runs without keys (KeysMissing, which crosses from the sandbox as an ExerciseError with
    its words) the check says what the answer reached for, not that the student's code broke."""
    path = "0.grad" + "ing.keys.load"

    def through_strings(plan: object) -> dict:
        return string.Formatter().get_field(path, [at], {})[0]().kept_for_backward(plan)

    with pytest.raises(ExerciseError, match="the check's own reference"):
        lesson13.kept_check(through_strings)

    def no_keys_here(plan: object, *_: object) -> object:
        raise ExerciseError("this check compares your answer with the course's answer keys, which an installed "
                            "asgteach does not carry")

    def no_file_here(plan: object, *_: object) -> object:
        raise FileNotFoundError("/work/instructor/answer_keys.py not found.")

    for check_fn in (lesson13.alive_check, lesson13.kept_check, lesson13.fusible_check):
        for answer in (no_keys_here, no_file_here):
            with pytest.raises(ExerciseError, match="reaches for the check's own reference"):
                check_fn(answer)


def test_fusible_check_refuses_the_plans_own_chains() -> None:
    """show_fusion asks the numpy plan for its chains (Plan.fusion_chains): an answer that asks it too is refused,
    by the exercise's rule on the source and, in a kernel, by the check's watch however the answer holds it."""
    from asgteach.grading.rules import problems

    assert problems("def my_fusible(plan):\n    return plan.fusion_chains()\n", lesson13.RULES[3])
    holder = {"chains": lambda p: p.fusion_chains()}
    with pytest.raises(ExerciseError, match="fusion_chains\\(\\), which the exercise asks you to write yourself"):
        lesson13.fusible_check(lambda p: [i for c in holder["chains"](p) for i in c[:-1]])


def test_the_plans_fusion_chains_are_the_rule_section_6_states() -> None:
    """The library's analysis agrees with the answer keys' reference on the check's plans."""
    answer_keys = keys_module.load()
    for p in lesson13.check_plans():
        assert p.fusion_chains() == answer_keys.fusion_chains(p)
