"""`asgteach course DIR`: the lessons as an nbgrader course, graded by nbgrader's own CLI.

Fast tests read the metadata `asgteach course` writes. The slow test (module fixture `graded`)
installs nothing: nbgrader comes from the `course` extra, which scripts/setup installs (so
./scripts/test and CI run it). It runs, in a course directory written by `asgteach course`:

* `nbgrader generate_assignment` for every lesson;
* `nbgrader autograde` of the submissions of every lesson, all students in one call, with the course's own
  config (the judge, each submission in its sandbox): "untouched" (the release as handed out: must score 0),
  "solved" (the instructor's source: must score the maximum, > 0), "lazy" (the shortcuts a student could take
  in place of the work, tests/lazy/<lesson>.py's LAZY: each of those exercises must score 0, the others full),
  "lazy2", "lazy3"... (MORE: attempts on the judge itself, which must score 0 with the judge's reason) and
  "honest1", "honest2" (HONEST: right answers in other styles, which must score the maximum);
* `nbgrader export` (the CSV must hold those numbers) and `nbgrader generate_feedback` for
  the lazy student (the HTML must show each failing check's message).
"""

from __future__ import annotations

import csv
import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from asgteach import cli
from asgteach.lessons import ExerciseError, check, exercise
from asgteach.grading import sandbox
from asgteach.grading.nbcourse import FOUND_TAG, POINTS, course_notebook, write_course
from asgteach.grading.student import SolutionMarkerError, marking

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "lessons").glob("*.ipynb"))
STEMS = [p.stem for p in LESSONS]
#: the lessons nbgrader grades in the slow tests: all of them, or those named in ASGTEACH_COURSE_LESSONS
#: (comma-separated stems; for working on one lesson, e.g. ASGTEACH_COURSE_LESSONS=10-higher-order-and-forward-mode)
GRADED = [s for s in STEMS if s in os.environ.get("ASGTEACH_COURSE_LESSONS", s).split(",")]


def _nb(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _src(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


# --- what `asgteach course` writes (fast) -------------------------------------------------------------

@pytest.mark.parametrize("lesson", LESSONS, ids=STEMS)
def test_every_code_cell_gets_nbgrader_metadata_from_the_one_marking(lesson: Path) -> None:
    nb = _nb(lesson)
    course, points = course_notebook(nb, lesson.name)
    kept = [c for c in nb["cells"] if FOUND_TAG not in c.get("metadata", {}).get("tags", [])]
    mark = marking({**nb, "cells": kept}, lesson.name)   # (what an exercise should show is not in an assignment)
    assert points == POINTS * mark.count > 0
    grade_ids = []
    for index, cell in enumerate(course["cells"]):
        meta = cell["metadata"].get("nbgrader")
        if cell["cell_type"] != "code":
            assert meta is None, f"cell {index}: markdown stays editable"
            continue
        assert meta["schema_version"] == 3 and re.fullmatch(r"[A-Za-z0-9_-]+", meta["grade_id"])
        grade_ids.append(meta["grade_id"])
        if index in mark.answers.values():
            n = next(k for k, i in mark.answers.items() if i == index)
            assert meta == {"grade": False, "grade_id": f"exercise-{n}", "locked": False, "schema_version": 3,
                            "solution": True}
            assert "### BEGIN SOLUTION" in _src(cell)
        elif index in mark.checks.values():
            n = next(k for k, i in mark.checks.items() if i == index)
            assert meta == {"grade": True, "grade_id": f"exercise-{n}-check", "locked": True, "points": POINTS,
                            "schema_version": 3, "solution": False}
            assert _src(cell).startswith(f"with check({n}, graded=True):")
        else:
            assert meta == {"grade": False, "grade_id": f"cell-{cell['id']}", "locked": True, "schema_version": 3,
                            "solution": False}
            assert "### BEGIN SOLUTION" not in _src(cell)
    assert len(grade_ids) == len(set(grade_ids))
    # stable: the same lesson gives the same notebook (ids, grade ids, everything) on every run
    assert course_notebook(nb, lesson.name)[0] == course
    assert [c["id"] for c in course["cells"]] == [c["id"] for c in kept]


def test_what_you_should_have_found_is_left_out_of_an_assignment() -> None:
    found = {"cell_type": "markdown", "id": "f1", "metadata": {"tags": [FOUND_TAG]},
             "source": "<details><summary>What you should have found</summary>\n\nthe answer\n\n</details>"}
    cells = [{"cell_type": "code", "id": "a1", "metadata": {}, "outputs": [], "execution_count": None,
              "source": "with exercise(1):\n    ### BEGIN SOLUTION\n    x = 1\n    ### END SOLUTION"},
             {"cell_type": "code", "id": "c1", "metadata": {}, "outputs": [], "execution_count": None,
              "source": "with check(1):\n    assert x == 1"}, found,
             {"cell_type": "markdown", "id": "m1", "metadata": {}, "source": "next section"}]
    nb = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    course, _ = course_notebook(nb, "x.ipynb")
    assert [c["id"] for c in course["cells"]] == ["a1", "c1", "m1"]
    assert nb["cells"][2] is found      # the lesson itself keeps it


def test_write_course_lays_out_an_nbgrader_course_and_keeps_the_instructors_config(tmp_path: Path) -> None:
    assert cli.main(["course", str(tmp_path / "course")]) == 0
    config = tmp_path / "course" / "nbgrader_config.py"
    assert "c.CourseDirectory.course_id" in config.read_text()
    for stem in STEMS:
        assert (tmp_path / "course" / "source" / stem / f"{stem}.ipynb").is_file()
    config.write_text("c = get_config()  # mine\n")
    written = write_course(tmp_path / "course", ROOT / "lessons")
    assert config.read_text() == "c = get_config()  # mine\n"
    assert [p.parent.name for p, _ in written] == STEMS


@pytest.mark.parametrize(("cells", "message"), [
    (["with exercise(1):\n    ### BEGIN SOLUTION\n    x = 1\n    ### END SOLUTION"], "exercise 1 has no check cell"),
    (["with check(1):\n    pass"], "checks an exercise that has no solution block"),
    (["with check(1):\n    pass", "with exercise(1):\n    ### BEGIN SOLUTION\n    x = 1\n    ### END SOLUTION"],
     "comes before its answer"),
])
def test_a_marking_the_course_cannot_grade_is_an_error_naming_the_cell(cells: list[str], message: str) -> None:
    nb = {"cells": [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "source": s, "outputs": []}
                    for i, s in enumerate(cells)], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    with pytest.raises(SolutionMarkerError, match=message):
        course_notebook(nb, "x.ipynb")


def test_graded_check_fails_when_not_done_and_a_stub_function_counts_as_not_done(
        capsys: pytest.CaptureFixture) -> None:
    with exercise(81):
        raise NotImplementedError()            # nbgrader's stub: no message
    with pytest.raises(ExerciseError, match="exercise 81: not done yet"):
        with check(81, graded=True):
            pass
    with exercise(82):
        def f(x):
            """A docstring the student keeps."""
            raise NotImplementedError("exercise 82")
    with check(82):                            # ungraded: the student's own run goes on
        f(1)
    assert "exercise 82: not done yet" in capsys.readouterr().out
    with pytest.raises(ExerciseError, match="exercise 82: not done yet"):
        with check(82, graded=True):
            f(1)


def test_a_check_that_needs_the_keys_says_so_in_a_students_install_and_fails_when_graded(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """A student's install has no answer keys: practice mode prints why the check cannot run (the notebook runs on,
    as scripts/release requires of every student lesson); a graded check never passes without them."""
    from asgteach.grading import keys

    monkeypatch.setenv("ASGTEACH_KEYS", "/nonexistent/answer_keys.py")
    monkeypatch.delitem(sys.modules, keys.MODULE, raising=False)
    with exercise(83):
        pass

    def needs_keys() -> None:
        keys.load()

    with check(83):
        needs_keys()
    assert "exercise 83: not checked here: this check compares your answer with the course's answer keys" in \
        capsys.readouterr().out
    with pytest.raises(ExerciseError, match="exercise 83: this check compares"):
        with check(83, graded=True):
            needs_keys()


# --- nbgrader's own CLI on every lesson (slow) --------------------------------------------------------

#: lesson -> honest students, each a submission of its own that must score full marks: [{exercise: answer cell}, ...]
#: (tests/lazy/<lesson>.py's ``HONEST``: right answers in other styles than the reference's)
HONEST: dict[str, list[dict[int, str]]] = {}

#: lesson -> more lazy students, each a submission of its own: [{exercise: (answer cell, words)}, ...]
#: (tests/lazy/<lesson>.py's ``MORE``: the attempts on the judge itself - switching a check off, reusing a
#: reference, a closure or a default argument over one, a library stand-in, a forbidden import)
MORE: dict[str, list[dict[int, tuple[str, str]]]] = {}


def _lazy_files() -> dict[str, dict[int, tuple[str, str]]]:
    """tests/lazy/<lesson stem>.py: each lesson's students in a file of its own (``LAZY = {n: (code, words)}``,
    ``MORE`` and ``HONEST``): editing one lesson's exercise touches that lesson's file only."""
    found = {}
    for path in sorted((ROOT / "tests" / "lazy").glob("*.py")):
        namespace: dict = {}
        exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), namespace)
        found[path.stem] = namespace["LAZY"]
        MORE[path.stem] = namespace.get("MORE", [])
        HONEST[path.stem] = namespace.get("HONEST", [])
    return found


LAZY: dict[str, dict[int, tuple[str, str]]] = _lazy_files()


def test_every_lesson_has_a_lazy_student() -> None:
    assert sorted(LAZY) == STEMS


def _nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    bin_dir = str(Path(sys.executable).parent)   # nbgrader runs `alembic` from PATH: the venv's
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return proc


def _lazy_notebook(source: dict, answers: dict[int, tuple[str, str]], stem: str) -> dict:
    nb = json.loads(json.dumps(source))
    mark = marking(nb, stem)
    for n, (code, _) in answers.items():
        nb["cells"][mark.answers[n]]["source"] = code.splitlines(keepends=True)
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict:
    if shutil.which("nbgrader", path=str(Path(sys.executable).parent)) is None:
        pytest.fail("nbgrader is not installed in this venv: pip install -e '.[course]' (scripts/setup does)")
    ok, why = sandbox.available()
    if not ok:
        if os.environ.get("CI") == "true":
            pytest.fail(f"graded mode's sandbox is missing on this CI machine: {why}")
        print(f"\n!!! SKIPPED: graded mode's sandbox is missing here: {why}", file=sys.stderr)
        pytest.skip(why)
    course = tmp_path_factory.mktemp("course")
    assert cli.main(["course", str(course)]) == 0
    _nbgrader(course, "generate_assignment", "*")
    # every student of every lesson in one course, graded by one `nbgrader autograde` as the course's config does:
    # each submission runs once, in the judge's sandbox (there is no unsandboxed kernel run to leave out)
    for stem in GRADED:
        release = course / "release" / stem / f"{stem}.ipynb"
        source = _nb(course / "source" / stem / f"{stem}.ipynb")
        more = [(f"lazy{k + 2}", _lazy_notebook(source, answers, stem)) for k, answers in enumerate(MORE.get(stem, []))]
        more += [(f"honest{k + 1}", _lazy_notebook(source, {n: (code, "") for n, code in answers.items()}, stem))
                 for k, answers in enumerate(HONEST.get(stem, []))]
        for student, nb in [("untouched", _nb(release)), ("solved", source),
                            ("lazy", _lazy_notebook(source, LAZY[stem], stem)), *more]:
            folder = course / "submitted" / student / stem
            folder.mkdir(parents=True)
            (folder / f"{stem}.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    _nbgrader(course, "autograde", "*", "--create")
    _nbgrader(course, "export", "--to", "grades.csv")
    with (course / "grades.csv").open() as f:
        scores = {(row["assignment"], row["student_id"]): (float(row["score"]), float(row["max_score"]))
                  for row in csv.DictReader(f) if (course / "submitted" / row["student_id"]).is_dir()}
    _nbgrader(course, "generate_feedback", "*", "--student", "lazy")
    return {"course": course, "judged": course, "scores": scores}


@pytest.mark.slow
def test_release_scores_zero_and_the_solved_source_the_maximum(graded: dict) -> None:
    scores = graded["scores"]
    for stem in GRADED:
        exercises = marking(_nb(ROOT / "lessons" / f"{stem}.ipynb"), stem).count
        assert scores[(stem, "untouched")] == (0.0, POINTS * exercises), stem
        assert scores[(stem, "solved")] == (POINTS * exercises, POINTS * exercises) and exercises > 0, stem


def _cell_scores(notebook: Path) -> dict[str, list]:
    nb = _nb(notebook)
    return {c["metadata"]["nbgrader"]["grade_id"]: c.get("outputs", [])
            for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade")}


@pytest.mark.slow
@pytest.mark.parametrize("stem", GRADED)
def test_a_lazy_student_fails_the_checks_and_the_feedback_says_why(graded: dict, stem: str) -> None:
    course, scores = graded["course"], graded["scores"]
    score, max_score = scores[(stem, "lazy")]
    assert score == max_score - POINTS * len(LAZY[stem]), f"{stem}: each lazy exercise scores 0, the others full"
    outputs = _cell_scores(course / "autograded" / "lazy" / stem / f"{stem}.ipynb")
    feedback = (course / "feedback" / "lazy" / stem / f"{stem}.html").read_text(encoding="utf-8")
    text = html.unescape(re.sub(r"<[^>]+>", "", feedback))
    for n, (_, words) in LAZY[stem].items():
        errors = [o for o in outputs[f"exercise-{n}-check"] if o["output_type"] == "error"]
        check_outputs = outputs[f"exercise-{n}-check"]
        assert errors and errors[0]["ename"] == "ExerciseError", f"{stem} exercise {n}: {check_outputs}"
        assert words in errors[0]["evalue"], f"{stem} exercise {n}: {errors[0]['evalue']}"
        assert words in text, f"{stem} exercise {n}: the feedback does not show the check's message"


@pytest.mark.slow
@pytest.mark.parametrize("stem", [s for s in GRADED if MORE.get(s)])
def test_attempts_on_the_judge_score_zero_for_their_exercise(graded: dict, stem: str) -> None:
    """Each further lazy student (tests/lazy's MORE) gets 0 for the exercises it tried and the judge's reason."""
    scores = graded["scores"]
    for k, answers in enumerate(MORE[stem]):
        student = f"lazy{k + 2}"
        score, max_score = scores[(stem, student)]
        assert score == max_score - POINTS * len(answers), f"{stem} {student}: {score}/{max_score}"
        outputs = _cell_scores(graded["judged"] / "autograded" / student / stem / f"{stem}.ipynb")
        for n, (_, words) in answers.items():
            errors = [o for o in outputs[f"exercise-{n}-check"] if o["output_type"] == "error"]
            assert errors and words in errors[0]["evalue"], f"{stem} {student} exercise {n}: {errors}"


@pytest.mark.slow
@pytest.mark.parametrize("stem", [s for s in GRADED if HONEST.get(s)])
def test_honest_answers_in_other_styles_score_full_marks(graded: dict, stem: str) -> None:
    """Each honest student (tests/lazy's HONEST) gets the maximum: the judge accepts every right answer it was shown."""
    scores = graded["scores"]
    for k in range(len(HONEST[stem])):
        student = f"honest{k + 1}"
        score, max_score = scores[(stem, student)]
        if score != max_score:
            outputs = _cell_scores(graded["judged"] / "autograded" / student / stem / f"{stem}.ipynb")
            errors = {g: o[0].get("evalue") for g, o in outputs.items() if o and o[0]["output_type"] == "error"}
            pytest.fail(f"{stem} {student}: {score}/{max_score}: {errors}")


def test_the_lazy_answers_are_not_the_solutions() -> None:
    """Each lazy answer differs from the lesson's solution cell (a guard against a typo making it the real one)."""
    for stem, answers in LAZY.items():
        nb = _nb(ROOT / "lessons" / f"{stem}.ipynb")
        mark = marking(nb, stem)
        for n, (code, _) in answers.items():
            assert "### BEGIN SOLUTION" not in code
            assert code.strip() != _src(nb["cells"][mark.answers[n]]).strip()
