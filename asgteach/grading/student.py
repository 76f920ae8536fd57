"""Student versions of the lessons: the solutions cut out, the outputs cleared.

A solution sits between two marker lines, as in nbgrader (so an instructor can also use
nbgrader on the same notebooks)::

    with exercise(2):
        ### BEGIN SOLUTION
        dc_value = ...
        ### END SOLUTION

:func:`make_student_notebook` replaces each such block by one line,
``raise NotImplementedError("exercise N")`` at the marker's indentation, where N counts the
blocks of the notebook in order (1, 2, ...). Outputs and execution counts are cleared; the
metadata is kept. A marker without its partner, or a block inside ``exercise(K)`` whose K
is not its number N, is an error naming the notebook, the cell and the line.

The marker lines may sit inside a function's body, after its ``def`` line and docstring: the
student then gets the signature and the docstring, and the placeholder is raised when the check
calls the function (``check(N)`` reports "not done yet" for it too).

This one marking serves both ways of handing out the lessons: :func:`marking` says which cell
is the answer of which exercise and which cell checks it, and both this module and
:mod:`asgteach.grading.nbcourse` (``asgteach course``: the nbgrader course) read it.

Notebooks are read and written as plain JSON (nbformat 4), so the package needs no Jupyter
library at run time.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["BEGIN", "END", "SolutionMarkerError", "student_source", "make_student_notebook",
           "write_student_versions", "Marking", "marking", "cell_source", "CHECK_CALL"]

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
_EXERCISE_CALL = re.compile(r"\bexercise\((\d+)\)")
#: a check cell's first statement: ``with check(N):`` (or ``with check(N, graded=True):``) at the start of a line
CHECK_CALL = re.compile(r"^with check\((\d+)(?:, *graded=True)?\):", re.MULTILINE)


class SolutionMarkerError(ValueError):
    """The solution markers of a notebook do not pair up (or do not match the exercise number)."""


def _lines(source: str | list[str]) -> list[str]:
    text = "".join(source) if isinstance(source, list) else source
    return text.splitlines(keepends=True)


def student_source(source: str | list[str], first: int, where: str) -> tuple[str, int]:
    """Cut the solution blocks out of one cell's source; return (new source, exercises cut).

    Blocks under one ``with exercise(N):`` (a function's body, then a line that uses it) are one
    exercise: each becomes the placeholder of exercise N.

    ``first`` is the number of the first exercise in this cell; ``where`` names the cell in
    error messages ("lessons/03-x.ipynb, cell 41").
    """
    out: list[str] = []
    n = first - 1
    begin_line: int | None = None
    declared = None
    for k, line in enumerate(_lines(source), start=1):
        stripped = line.strip()
        if begin_line is None:
            m = _EXERCISE_CALL.search(line)
            if m:
                declared = int(m.group(1))
        if stripped == BEGIN:
            if begin_line is not None:
                raise SolutionMarkerError(f"{where}, line {k}: '{BEGIN}' again before the '{END}' of the block "
                                          f"opened on line {begin_line}")
            begin_line = k
            if not (declared is not None and declared == n and n >= first):  # a second block of one exercise keeps N
                n += 1
            if declared is not None and declared != n:
                raise SolutionMarkerError(f"{where}, line {k}: this is solution block {n} of the notebook, but it "
                                          f"sits in exercise({declared}); number the exercises 1, 2, ... in order")
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f'{indent}raise NotImplementedError("exercise {n}")\n')
        elif stripped == END:
            if begin_line is None:
                raise SolutionMarkerError(f"{where}, line {k}: '{END}' without a '{BEGIN}' before it")
            begin_line = None
        elif BEGIN in line or END in line:
            raise SolutionMarkerError(f"{where}, line {k}: a solution marker must be alone on its line, "
                                      f"got {stripped!r}")
        elif begin_line is None:
            out.append(line)
    if begin_line is not None:
        raise SolutionMarkerError(f"{where}, line {begin_line}: '{BEGIN}' is never closed by '{END}'")
    text = "".join(out)
    if not "".join(_lines(source)).endswith("\n") and text.endswith("\n"):
        text = text[:-1]  # the replacement line ended the cell: keep the cell's own (missing) final newline
    return text, n - first + 1  # exercises, not blocks


def cell_source(cell: dict[str, Any]) -> str:
    """A cell's source as one string (nbformat stores a string or a list of lines)."""
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


@dataclass(frozen=True)
class Marking:
    """What the markers of one notebook say: the answer cell and the check cell of every exercise.

    ``answers[n]`` and ``checks[n]`` are cell indices; exercises are numbered 1, 2, ... in order.
    """

    answers: dict[int, int]
    checks: dict[int, int]

    @property
    def count(self) -> int:
        return len(self.answers)


def marking(nb: dict[str, Any], name: str = "notebook") -> Marking:
    """Read the exercises of notebook ``nb``: which cell answers and which cell checks each one.

    Raises :class:`SolutionMarkerError` (naming the notebook and the cell) when the markers do
    not pair up, when a number is out of order, or when an exercise has no check cell (or two).
    """
    answers: dict[int, int] = {}
    checks: dict[int, int] = {}
    count = 0
    for index, cell in enumerate(nb.get("cells", [])):
        text = cell_source(cell)
        where = f"{name}, cell {index}"
        if cell.get("cell_type") != "code":
            if BEGIN in text or END in text:
                raise SolutionMarkerError(f"{where}: solution markers belong in code cells, "
                                          f"not in a {cell.get('cell_type')} cell")
            continue
        _, cut = student_source(text, count + 1, where)
        for n in range(count + 1, count + cut + 1):
            answers[n] = index
        count += cut
        for m in CHECK_CALL.finditer(text):
            n = int(m.group(1))
            if n in checks:
                raise SolutionMarkerError(f"{where}: a second check of exercise {n} (the first is cell {checks[n]})")
            if cut:
                raise SolutionMarkerError(f"{where}: the check of exercise {n} shares a cell with a solution; "
                                          "give it a cell of its own (it is the graded cell)")
            checks[n] = index
    for n, index in answers.items():
        if n not in checks:
            raise SolutionMarkerError(f"{name}, cell {index}: exercise {n} has no check cell (`with check({n}):`)")
        if checks[n] < index:
            raise SolutionMarkerError(f"{name}, cell {checks[n]}: the check of exercise {n} comes before its answer "
                                      f"(cell {index})")
    for n, index in checks.items():
        if n not in answers:
            raise SolutionMarkerError(f"{name}, cell {index}: `with check({n}):` checks an exercise that has no "
                                      "solution block")
    return Marking(answers, checks)


def make_student_notebook(nb: dict[str, Any], name: str = "notebook") -> tuple[dict[str, Any], int]:
    """The student version of notebook ``nb`` (a dict in nbformat 4) and its number of exercises."""
    cells = []
    count = 0
    for index, cell in enumerate(nb.get("cells", [])):
        cell = dict(cell)
        if cell.get("cell_type") == "code":
            source, cut = student_source(cell.get("source", ""), count + 1, f"{name}, cell {index}")
            count += cut
            cell["source"] = source.splitlines(keepends=True)
            cell["outputs"] = []
            cell["execution_count"] = None
        else:
            text = "".join(cell.get("source", "")) if isinstance(cell.get("source"), list) else cell.get("source", "")
            if BEGIN in text or END in text:
                raise SolutionMarkerError(f"{name}, cell {index}: solution markers belong in code cells, "
                                          f"not in a {cell.get('cell_type')} cell")
        cells.append(cell)
    return {**nb, "cells": cells}, count


def read_notebooks(src: Path, what: str = "notebooks") -> list[tuple[Path, dict]]:
    """Every ``*.ipynb`` of ``src``, sorted, parsed: (path, notebook). A folder without any, or an
    unreadable notebook, is an error naming it (nothing is written before all are read)."""
    paths = sorted(src.glob("*.ipynb"))
    if not paths:
        raise FileNotFoundError(f"no {what} (*.ipynb) in {src}")
    out = []
    for path in paths:
        try:
            out.append((path, json.loads(path.read_text(encoding="utf-8"))))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not a readable notebook: {e}") from None
    return out


def write_student_versions(src_dir: str | Path, out_dir: str | Path) -> list[tuple[Path, int]]:
    """Write the student version of every ``*.ipynb`` of ``src_dir`` into ``out_dir``.

    Returns (written path, number of exercises) per notebook. Every notebook is converted
    before anything is written, so a marker error leaves ``out_dir`` untouched.
    """
    src, out = Path(src_dir), Path(out_dir)
    if not src.is_dir():
        raise FileNotFoundError(f"no such folder: {src}")
    if src.resolve() == out.resolve():
        raise ValueError(f"the output folder is the source folder ({src}): that would overwrite the solutions")
    converted = [(path.name, *make_student_notebook(nb, str(path))) for path, nb in read_notebooks(src)]
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for filename, nb, count in converted:
        target = out / filename
        target.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append((target, count))
    return written
