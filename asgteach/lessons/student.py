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

Notebooks are read and written as plain JSON (nbformat 4), so the package needs no Jupyter
library at run time.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

__all__ = ["BEGIN", "END", "SolutionMarkerError", "student_source", "make_student_notebook",
           "write_student_versions"]

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
_EXERCISE_CALL = re.compile(r"\bexercise\((\d+)\)")


class SolutionMarkerError(ValueError):
    """The solution markers of a notebook do not pair up (or do not match the exercise number)."""


def _lines(source: str | list[str]) -> list[str]:
    text = "".join(source) if isinstance(source, list) else source
    return text.splitlines(keepends=True)


def student_source(source: str | list[str], first: int, where: str) -> tuple[str, int]:
    """Cut the solution blocks out of one cell's source; return (new source, blocks cut).

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
            declared = None
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
    return text, n - first + 1


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
    paths = sorted(p for p in src.glob("*.ipynb"))
    if not paths:
        raise FileNotFoundError(f"no notebooks (*.ipynb) in {src}")
    converted = []
    for path in paths:
        try:
            nb = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not a readable notebook: {e}") from None
        converted.append((path.name, *make_student_notebook(nb, str(path))))
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for filename, nb, count in converted:
        target = out / filename
        target.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append((target, count))
    return written
