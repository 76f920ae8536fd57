"""Practice mode: every honest student of tests/lazy/ passes every check in a real kernel, as a learner runs it.

Graded mode (tests/test_course.py) runs the checks in the judge with the submission in its sandbox; practice mode
runs the same check cells in the learner's own Jupyter kernel, where the runtime watches (``without(...)``, the
profile hooks) are active and the rules are read from the functions' source. An answer right in one mode must be
right in the other: each honest student's notebook (the lesson with their answer cells in place of the solution)
is executed top to bottom by nbclient in a fresh kernel, and each of their exercises' check cell must print
"exercise N passed" with no error.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from asgteach.grading.student import marking

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
CELL_TIMEOUT_S = 300


def _students() -> list[tuple[str, int, dict[int, str]]]:
    out = []
    for path in sorted((ROOT / "tests" / "lazy").glob("*.py")):
        namespace: dict = {}
        exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), namespace)
        for k, answers in enumerate(namespace.get("HONEST", [])):
            out.append((path.stem, k + 1, answers))
    return out


STUDENTS = _students()


def test_every_lesson_has_two_honest_students() -> None:
    lessons = sorted(p.stem for p in (ROOT / "lessons").glob("*.ipynb"))
    counts = {stem: sum(1 for s, _, _ in STUDENTS if s == stem) for stem in lessons}
    assert all(n >= 2 for n in counts.values()), counts


@pytest.mark.parametrize(("stem", "k", "answers"), STUDENTS, ids=[f"{s}-honest{k}" for s, k, _ in STUDENTS])
def test_an_honest_student_passes_every_check_in_a_kernel(stem: str, k: int, answers: dict[int, str],
                                                          tmp_path: Path) -> None:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(ROOT / "lessons" / f"{stem}.ipynb", as_version=4)
    mark = marking(nb, stem)
    for n, code in answers.items():
        nb["cells"][mark.answers[n]]["source"] = code
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(tmp_path)}})
    executed = client.execute()
    problems = []
    for n in sorted(answers):
        cell = executed.cells[mark.checks[n]]
        text = "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")
        errors = [f"{o.get('ename')}: {o.get('evalue')}" for o in cell.outputs if o.get("output_type") == "error"]
        if errors or f"exercise {n} passed" not in text:
            problems.append(f"exercise {n}: {errors or text[-500:]}")
    assert not problems, f"{stem} honest{k} in practice mode:\n" + "\n".join(problems)
