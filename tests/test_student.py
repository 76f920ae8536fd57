"""`asgteach student`: student versions of the lessons, and they still run from top to bottom.

The command is run as a subprocess (as an instructor would run it); every student notebook is then
executed in a fresh kernel of this venv, and each exercise's check must say "not done yet" while
every other cell runs without error.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from asgteach.grading.student import marking

# every test runs `asgteach student` or a lesson's kernel (./scripts/test runs it; the inner loop skips it)
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "lessons").glob("*.ipynb"))
CELL_TIMEOUT_S = 120


def _student(src: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "asgteach", "student", str(src), str(out)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _solution_blocks(path: Path) -> int:
    """The number of exercises (an exercise may hold two blocks: a function's body, then a line using it)."""
    return marking(json.loads(path.read_text(encoding="utf-8")), path.name).count


@pytest.fixture(scope="module")
def student_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("student")
    proc = _student(ROOT / "lessons", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def test_every_lesson_has_exercises_and_a_student_version(student_dir: Path) -> None:
    assert len(LESSONS) >= 8
    for lesson in LESSONS:
        blocks = _solution_blocks(lesson)
        assert 2 <= blocks <= 5, f"{lesson.name}: {blocks} exercises (each lesson ends with 2-5)"
        nb = json.loads((student_dir / lesson.name).read_text(encoding="utf-8"))
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        text = "\n".join(_source(c) for c in code)
        assert "### BEGIN SOLUTION" not in text and "### END SOLUTION" not in text
        found = [int(n) for n in re.findall(r'raise NotImplementedError\("exercise (\d+)"\)', text)]
        assert sorted(set(found)) == list(range(1, blocks + 1)) and found == sorted(found), \
            f"{lesson.name}: placeholders {found}"
        assert all(c["outputs"] == [] and c["execution_count"] is None for c in code)
        assert nb["metadata"] == json.loads(lesson.read_text(encoding="utf-8"))["metadata"]


def test_placeholder_keeps_the_indentation_and_the_code_around_it(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# t"),
        nbformat.v4.new_code_cell("A = 1\nwith exercise(1):\n    ### BEGIN SOLUTION\n    x = A + 1\n"
                                  "    ### END SOLUTION\nprint('after')"),
        nbformat.v4.new_code_cell("with exercise(2):\n    ### BEGIN SOLUTION\n    y = 2\n    ### END SOLUTION"),
    ]
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="old\n")]
    nb.cells[1].execution_count = 3
    src = tmp_path / "src"
    src.mkdir()
    nbformat.write(nb, src / "t.ipynb")
    proc = _student(src, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert "1 student notebooks with 2 exercises" in proc.stdout
    out = nbformat.read(tmp_path / "out" / "t.ipynb", as_version=4)
    assert out.cells[1].source == ('A = 1\nwith exercise(1):\n    raise NotImplementedError("exercise 1")\n'
                                   "print('after')")
    assert out.cells[2].source == 'with exercise(2):\n    raise NotImplementedError("exercise 2")'
    assert out.cells[1].outputs == [] and out.cells[1].execution_count is None
    nbformat.validate(out)


@pytest.mark.parametrize("cells, message", [
    (["x = 1\n### BEGIN SOLUTION\ny = 2"], "cell 0, line 2: '### BEGIN SOLUTION' is never closed"),
    (["### END SOLUTION"], "cell 0, line 1: '### END SOLUTION' without a '### BEGIN SOLUTION'"),
    (["### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION"], "cell 0, line 2: '### BEGIN SOLUTION' again"),
    (["a = 1", "with exercise(2):\n    ### BEGIN SOLUTION\n    b = 1\n    ### END SOLUTION"],
     "cell 1, line 2: this is solution block 1 of the notebook, but it sits in exercise(2)"),
])
def test_marker_mismatch_is_an_error_naming_notebook_and_cell(tmp_path: Path, cells: list[str], message: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    src = tmp_path / "src"
    src.mkdir()
    nbformat.write(nb, src / "broken.ipynb")
    proc = _student(src, tmp_path / "out")
    assert proc.returncode == 1
    assert "broken.ipynb" in proc.stderr and message in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists(), "nothing may be written when a notebook is broken"


def test_refuses_to_overwrite_the_solutions(tmp_path: Path) -> None:
    proc = _student(ROOT / "lessons", ROOT / "lessons")
    assert proc.returncode == 1 and "overwrite the solutions" in proc.stderr


@pytest.mark.parametrize("lesson", [p.name for p in LESSONS])
def test_student_notebook_runs_and_reports_not_done(student_dir: Path, lesson: str) -> None:
    nb = nbformat.read(student_dir / lesson, as_version=4)
    # raises CellExecutionError (with the cell and its traceback) if any cell fails
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(student_dir)}})
    client.execute()
    outputs, check_outputs = [], {}
    for cell in nb.cells:
        if cell.cell_type == "code":
            text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
            outputs.append(text)
            m = re.match(r"with check\((\d+)\):", cell.source)
            if m:
                check_outputs[int(m.group(1))] = text
    text = "\n".join(outputs)
    exercises = _solution_blocks(ROOT / "lessons" / lesson)
    for n in range(1, exercises + 1):
        # the check cell says so (the answer cell too, when its placeholder runs there and not in a function)
        assert f"exercise {n}: not done yet" in check_outputs[n], f"exercise {n}:\n{text[-3000:]}"
        assert f"exercise {n} passed" not in text, f"exercise {n}'s check passed without an answer"


def test_a_stub_keeps_the_signature_and_the_docstring(student_dir: Path) -> None:
    nb = json.loads((student_dir / "03-chain-rule-and-reverse-mode.ipynb").read_text(encoding="utf-8"))
    text = "\n".join(_source(c) for c in nb["cells"] if c["cell_type"] == "code")
    assert ('    def chain_rule_grads(p, q):\n        """(dg/dp, dg/dq) of g(p, q) = (p + q) * tanh(p), by the chain '
            'rule, node by node (numpy only)."""\n        raise NotImplementedError("exercise 1")\n') in text
