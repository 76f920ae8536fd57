"""``asgteach course DIR``: the lessons as an nbgrader course directory.

nbgrader (https://nbgrader.readthedocs.io) grades notebooks by cell metadata: *solution* cells
hold the code between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` (cut out of the release),
*autograded test* cells are worth points (an error in one scores 0), *read-only* cells are put
back as the instructor wrote them before grading. The lessons carry no such metadata: they carry
the markers of :mod:`asgteach.grading.student`, and :func:`~asgteach.grading.student.marking`
says which cell answers and which cell checks each exercise. From that one marking this module
writes::

    DIR/nbgrader_config.py                       (kept if it exists: it is the instructor's)
    DIR/source/<lesson stem>/<lesson stem>.ipynb  one assignment per lesson, e.g. 04-broadcasting

where, in every notebook,

* an answer cell (``with exercise(N):`` + the markers) is a solution cell, ``grade_id``
  ``exercise-N``;
* a check cell (``with check(N):``) is an autograded test cell worth :data:`POINTS` points,
  ``grade_id`` ``exercise-N-check``; its ``with check(N):`` becomes ``with check(N, graded=True):``,
  so an exercise not done is an error there (0 points), not a printed "not done yet";
* every other code cell is read-only (``grade_id`` ``cell-<the cell's id>``): the checks read the
  names those cells define (data, graphs, imports), so an edited one could change a grade;
  markdown cells stay editable (notes do not change a grade);
* the cell ids are the lesson's own, so the ids (and ``grade_id`` s) are the same on every run.

The notebooks keep their outputs (nbgrader's release clears them). Then
``nbgrader generate_assignment``, ``autograde``, ``generate_feedback`` and ``export`` work as
usual: docs/teaching.md walks through them. The config written here makes ``autograde`` score
each exercise by the judge (:mod:`asgteach.grading.judge`), outside the student's kernel: the
kernel's own run of a check cell only shows the student what happened there.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .student import SolutionMarkerError, cell_source, marking, read_notebooks

__all__ = ["POINTS", "CONFIG", "JUDGE_LINE", "course_notebook", "write_course"]

#: points of one exercise's check cell
POINTS = 1

#: the nbgrader_config.py written into a new course directory (``CONFIG.format(time_limit=300.0)``)
CONFIG = '''\
# nbgrader configuration of the asgteach course, written by `asgteach course`.
# Run nbgrader's commands in this folder; see docs/teaching.md ("Grading with nbgrader").
import getpass
import os
import tempfile

c = get_config()  # noqa: F821 - nbgrader provides get_config() when it reads this file

# nbgrader gives 0 points to a test cell with ANY output on stderr. Mesa's Vulkan driver (probed when a
# lesson looks for a GPU) prints "XDG_RUNTIME_DIR is invalid or not set" there when the variable is
# missing (root shells, containers): give the kernels nbgrader starts a private folder.
if not os.path.isdir(os.environ.get("XDG_RUNTIME_DIR", "")):
    os.environ["XDG_RUNTIME_DIR"] = os.path.join(tempfile.gettempdir(), "asgteach-runtime-" + getpass.getuser())
    os.makedirs(os.environ["XDG_RUNTIME_DIR"], mode=0o700, exist_ok=True)

c.CourseDirectory.course_id = "asgteach"
# what a student sees in place of a solution; `with exercise(N):` reports it as "not done yet"
c.ClearSolutions.code_stub = {{"python": "# YOUR CODE HERE\\nraise NotImplementedError()"}}
# The score of each exercise is the judge's (asgteach.grading.judge), and no submitted code runs outside its
# sandbox: JudgeChecks runs each submission's cells in bubblewrap (new namespaces, no network, no view of this
# folder, limits), runs the checks in a process of its own with the answer keys (keys/answer_keys.py, which the
# sandbox never sees), writes what each cell printed into the notebook for the feedback, and each verdict into
# its check cell. nbgrader's own Execute is left out: it would run the submission in a kernel with no sandbox.
# Without bubblewrap (`apt-get install bubblewrap`) autograde refuses to grade.
from nbconvert.preprocessors import ClearMetadataPreprocessor  # noqa: E402
from nbgrader.preprocessors import (  # noqa: E402
    AssignLatePenalties, CheckCellMetadata, IgnorePattern, LimitOutput, SaveAutoGrades,
)

from asgteach.grading.judge_nbgrader import JudgeChecks  # noqa: E402

c.Autograde.autograde_preprocessors = [
    JudgeChecks, IgnorePattern, ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades, AssignLatePenalties,
    CheckCellMetadata]
# Limits of one submission: wall seconds for all of it and for one cell or call, bytes of memory, CPU seconds,
# processes and threads (`asgteach course DIR --time-limit 120` writes the first)
c.JudgeChecks.time_limit = {time_limit}
c.JudgeChecks.request_time_limit = 120.0
c.JudgeChecks.memory_limit = 8 * 1024**3
c.JudgeChecks.cpu_limit = 600
c.JudgeChecks.process_limit = 64
'''

#: the line of CONFIG that makes the judge score the exercises (an instructor's own config needs it too)
JUDGE_LINE = "from asgteach.grading.judge_nbgrader import JudgeChecks"

_GRADE_ID = re.compile(r"^[A-Za-z0-9_-]+$")
_UNGRADED = re.compile(r"^with check\((\d+)\):", re.MULTILINE)


def _nbgrader(grade_id: str, *, solution: bool = False, grade: bool = False, locked: bool = False,
              points: int | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
                            "solution": solution}
    if points is not None:
        meta["points"] = points
    return meta


#: The tag of a lesson's collapsed "What you should have found" cell after an exercise: a reader of the website
#: or a student practising opens it after trying; an nbgrader assignment leaves it out.
FOUND_TAG = "asgteach-found"


def course_notebook(nb: dict[str, Any], name: str = "notebook", points: int = POINTS) -> tuple[dict[str, Any], int]:
    """Notebook ``nb`` (nbformat 4) with nbgrader's cell metadata, and its total points. Markdown cells tagged
    :data:`FOUND_TAG` (what an exercise should have shown) are left out.

    Raises :class:`~asgteach.grading.student.SolutionMarkerError` when its exercises are not
    marked as :func:`~asgteach.grading.student.marking` expects, or when a code cell has no id.
    """
    mark = marking(nb, name)
    answer_of = {index: n for n, index in mark.answers.items()}
    check_of = {index: n for n, index in mark.checks.items()}
    cells = []
    for index, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") == "markdown" and FOUND_TAG in cell.get("metadata", {}).get("tags", []):
            continue    # "what you should have found": for readers and practice, not in an assignment
        cell = json.loads(json.dumps(cell))  # a deep copy: the lesson's dict stays as it was
        meta = cell.setdefault("metadata", {})
        meta.pop("nbgrader", None)
        if cell.get("cell_type") == "code":
            cell_id = cell.get("id")
            if not cell_id or not _GRADE_ID.match(cell_id):
                raise SolutionMarkerError(f"{name}, cell {index}: a code cell needs an id of letters, digits, '-' and "
                                          f"'_' (nbformat 4.5), got {cell_id!r}")
            if index in answer_of:
                numbers = [n for n, i in mark.answers.items() if i == index]
                meta["nbgrader"] = _nbgrader("exercise-" + "-".join(map(str, numbers)), solution=True)
            elif index in check_of:
                n = check_of[index]
                source = _UNGRADED.sub(lambda m: f"with check({m.group(1)}, graded=True):", cell_source(cell))
                cell["source"] = source.splitlines(keepends=True)
                meta["nbgrader"] = _nbgrader(f"exercise-{n}-check", grade=True, locked=True, points=points)
            else:
                meta["nbgrader"] = _nbgrader(f"cell-{cell_id}", locked=True)
        cells.append(cell)
    return {**nb, "cells": cells}, points * mark.count


def write_course(out_dir: str | Path, lessons: str | Path, keys: str | Path | None = None,
                 time_limit: float = 300.0) -> list[tuple[Path, int]]:
    """Write the nbgrader course of every lesson notebook in ``lessons`` into ``out_dir``.

    ``time_limit`` (wall seconds for one submission, every cell and check in its sandbox) goes into the config
    written for a new course (an existing config is the instructor's and is kept).

    ``keys``: the answer keys file to copy to ``out_dir/keys/answer_keys.py``, where the judge finds it
    (:mod:`asgteach.grading.judge_nbgrader` gives it to the checks that compare with the keys, and to nothing
    else); default :func:`asgteach.grading.keys.keys_path` (``$ASGTEACH_KEYS``, else a checkout's
    ``instructor/answer_keys.py``). The copy is readable by its owner only (it gives every answer away). Where
    there are no keys (an installed wheel carries none) nothing is copied, an earlier copy is kept, and a
    :class:`UserWarning` says that grading the exercises whose checks need the keys will fail without them.

    Returns (written notebook, its points) per lesson. Every lesson is converted before
    anything is written, so a marking error leaves ``out_dir`` untouched. An existing
    ``nbgrader_config.py`` is kept; the source notebooks and the keys are (re)written.
    """
    import os
    import warnings

    from .keys import keys_path

    src, out = Path(lessons), Path(out_dir)
    converted = [(path.stem, *course_notebook(nb, str(path))) for path, nb in read_notebooks(src, "lesson notebooks")]
    out.mkdir(parents=True, exist_ok=True)
    config = out / "nbgrader_config.py"
    if not config.exists():
        config.write_text(CONFIG.format(time_limit=float(time_limit)), encoding="utf-8")
    written = []
    for stem, nb, points in converted:
        folder = out / "source" / stem
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{stem}.ipynb"
        target.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append((target, points))
    source_keys = Path(keys) if keys is not None else keys_path()
    copy = out / "keys" / "answer_keys.py"
    if source_keys is not None and source_keys.is_file():
        copy.parent.mkdir(mode=0o700, exist_ok=True)
        if source_keys.resolve() != copy.resolve():
            data = source_keys.read_bytes()
            with os.fdopen(os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
                f.write(data)   # created readable by its owner only: never a moment readable by others
        os.chmod(copy, 0o600)
    else:
        kept = f" The copy already there ({copy}) is kept, and may be out of date." if copy.is_file() else ""
        missing = f" ({source_keys} does not exist)" if source_keys else ""
        warnings.warn(f"no answer keys to copy to {copy}{missing}: the judge needs them to grade the exercises whose "
                      "checks compare with them (several of the later lessons), which fail without them." + kept
                      + " Write the course from a checkout of the repository (its instructor/answer_keys.py), or set "
                      "ASGTEACH_KEYS to the keys file.", UserWarning, stacklevel=2)
    return written
