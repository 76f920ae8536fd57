"""What an answer may not write (asgteach.grading.rules), and the judge that grades outside the kernel.

The rules are read from source text, so their tests are fast; the judge starts a runner process
(marked slow). tests/test_course.py runs the judge through nbgrader on every lesson.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asgteach.lessons import ExerciseError
from asgteach.grading.judge import apply_verdicts, judge_notebook, notebook_cells
from asgteach.grading.nbcourse import course_notebook
from asgteach.grading.rules import HANDS_OFF, all_rules, enforce, lesson_modules, problems, rule_for
from asgteach.grading.student import marking

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "lessons").glob("*.ipynb"))


@pytest.mark.parametrize("source, found", [
    ("lesson16.bfloat16_check = lambda *a, **k: None\n", "uses lesson16"),
    ("from asgteach.lessons import lesson14\n", "imports from asgteach.lessons"),
    ("from asgteach.lessons.common import fresh\n", "imports from asgteach.lessons.common"),
    ("import asgteach.grading.checks as c\n", "imports asgteach.grading.checks"),
    ("at.grading.checks.check_function = print\n", "uses .grading"),
    ("import asgteach.lessons.answer_keys as keys\n", "imports asgteach.lessons.answer_keys"),
    ("m = at.lessons\n", "uses .lessons"),
    ("import sys\nsys.setrecursionlimit(10 ** 6)\n", "imports sys"),
    ("f = getattr(at, 'less' + 'ons')\n", "uses getattr"),
    ("exec(open('x.py').read())\n", "uses exec"),
    ("def f(x, _ref=np.allclose):\n    return _ref.__globals__\n", "uses .__globals__"),
    ("g = (lambda: 0).__code__\n", "uses .__code__"),
    ("check_array = print\n", "uses check_array"),
    ("import ctypes\n", "imports ctypes"),
])
def test_the_hands_off_rule_names_the_line_and_what_it_does(source: str, found: str) -> None:
    bad = problems(source, HANDS_OFF)
    assert bad and found in bad[0], bad


def test_an_ordinary_answer_breaks_no_rule() -> None:
    source = ("with exercise(2):\n    def dot(ws, xs):\n"
              "        out = Value(sum(w.data * x.data for w, x in zip(ws, xs)), (*ws, *xs), 'dot')\n\n"
              "        def _backward():\n            for w, x in zip(ws, xs):\n"
              "                w.grad += x.data * out.grad\n        out._backward = _backward\n        return out\n")
    assert problems(source, HANDS_OFF) == []
    assert problems(source, rule_for("01b-autograd-from-scratch", 2)) == []


@pytest.mark.parametrize("lesson, n, source, found", [
    ("01b-autograd-from-scratch", 1, "import graphlib\n", "imports graphlib"),
    ("03-chain-rule-and-reverse-mode", 1, "d = (g(p + 1e-20j) / 1e-20).imag\n", "complex number"),
    ("03-chain-rule-and-reverse-mode", 1, "y = at.grad(x, x)\n", "uses at"),
    ("16-precision-and-loss-scaling", 1, "import ml_dtypes\n", "imports ml_dtypes"),
    ("14-deep-nets-vanishing-and-exploding", 3, "c = optim.clip_grad_norm(g, 1.0)\n", "uses .clip_grad_norm"),
    ("10-higher-order-and-forward-mode", 3, "return at.jvp(y, x, t)\n", "uses .jvp"),
    ("10b-jacobians-and-vmap", 2, "J = at.jvp(at.softmax(z), z, t)\n", "uses at"),
])
def test_an_exercise_rule_refuses_its_stand_ins(lesson: str, n: int, source: str, found: str) -> None:
    bad = problems(source, rule_for(lesson, n))
    assert bad and found in bad[0], bad


def test_enforce_reads_a_function_source_and_quotes_the_rule() -> None:
    def chain_rule_grads(p, q):
        return complex(p, q).real, 0.0

    with pytest.raises(ExerciseError, match=r"chain_rule_grads line 2: uses .*complex.*numpy only"):
        enforce(chain_rule_grads, rule_for("03-chain-rule-and-reverse-mode", 1), "chain_rule_grads")
    enforce(chain_rule_grads, None)      # no rule: nothing to enforce


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.stem for p in LESSONS])
def test_the_instructors_answers_keep_every_rule(lesson: Path) -> None:
    nb = json.loads(lesson.read_text(encoding="utf-8"))
    mark = marking(nb, lesson.name)
    for n, index in mark.answers.items():
        cell = "".join(nb["cells"][index]["source"])
        for rule in (HANDS_OFF, rule_for(lesson.stem, n)):
            if rule is not None:
                assert problems(cell, rule) == [], f"{lesson.stem} exercise {n}: {problems(cell, rule)}"


def test_every_rule_belongs_to_an_exercise_of_a_lesson() -> None:
    counts = {p.stem: marking(json.loads(p.read_text(encoding="utf-8")), p.name).count for p in LESSONS}
    for lesson, n in all_rules():
        assert 1 <= n <= counts.get(lesson, 0), (lesson, n)


def test_every_lesson_has_its_module_found_by_walking_the_package() -> None:
    """One module per lesson in asgteach.lessons, its LESSON the notebook's stem, its RULES keyed by exercise."""
    modules = lesson_modules()
    assert sorted(modules) == [p.stem for p in LESSONS]
    for stem, module in modules.items():
        assert module.__name__ == "asgteach.lessons.lesson" + stem.split("-")[0], (stem, module.__name__)
        assert module.__doc__ and all(isinstance(n, int) for n in module.RULES), stem
        for n in module.RULES:
            assert rule_for(stem, n) is module.RULES[n]
    assert rule_for("00-welcome", 1) is None and rule_for("no-such-lesson", 1) is None


def _course(stem: str) -> dict:
    nb = json.loads((ROOT / "lessons" / f"{stem}.ipynb").read_text(encoding="utf-8"))
    return course_notebook(nb, stem)[0]


def test_the_judge_reads_the_kinds_of_cells_from_nbgraders_metadata() -> None:
    cells = notebook_cells(_course("03-chain-rule-and-reverse-mode"))
    kinds = [c["kind"] for c in cells]
    assert kinds.count("answer") == 3 and kinds.count("check") == 3 and "other" not in kinds
    assert [c["exercise"] for c in cells if c["kind"] == "check"] == [1, 2, 3]


@pytest.mark.slow
def test_the_judge_passes_the_solution_and_fails_a_switched_off_check() -> None:
    stem = "03-chain-rule-and-reverse-mode"
    nb = _course(stem)
    assert all(v.passed for v in judge_notebook(nb, stem).values())
    mark = marking(nb, stem)
    # exercise 1 wrong, with its check replaced from the answer cell through an alias the rules do not name;
    # exercise 2 wrong, with numpy's comparison replaced at run time: in the sandbox, where the judge never looks
    # (the check compares in its own process, with its own numpy)
    nb["cells"][mark.answers[1]]["source"] = (
        "import asgteach as A\nL = A.__dict__\nP, Q = 0.3, -2.0\nwith exercise(1):\n"
        "    def chain_rule_grads(p, q):\n        return 0.0, 0.0\n")
    nb["cells"][mark.answers[2]]["source"] = (
        "with exercise(2):\n    np.isclose = lambda *a, **k: np.True_\n    MORE_RULES = {**RULES, 'sub': None, "
        "'div': None, 'exp': None}\n")
    verdicts = judge_notebook(nb, stem)
    assert not verdicts[1].passed and "__dict__" in verdicts[1].message
    assert not verdicts[2].passed and verdicts[2].message.startswith("exercise 2: ")
    assert verdicts[3].passed
    out = apply_verdicts(nb, verdicts)
    check = out["cells"][mark.checks[2]]["outputs"]
    assert check[0]["output_type"] == "error" and check[0]["ename"] == "ExerciseError"
