"""The judge of a graded course: each exercise's verdict, from outside the student's kernel.

``nbgrader autograde`` runs a submission in a kernel and scores a test cell by its outputs, so
whatever the submission's code does in that kernel (replace a check, ``np.allclose``, the
``check`` context manager, IPython's exception handler) decides the grade. The course that
``asgteach course`` writes adds :class:`~asgteach.lessons.judge_nbgrader.JudgeChecks` to
autograde's preprocessors, right after nbgrader's own Execute: it calls :func:`judge_notebook`
and writes each exercise's verdict into its check cell (:func:`apply_verdicts`), replacing the
kernel's outputs there, so the score is the judge's.

:func:`judge_notebook`, in the nbgrader process (which never runs submitted code):

1. reads each answer cell's *source* with :mod:`asgteach.lessons.rules`: the hands-off rule of
   every graded answer (no checker names, no ``sys``/``getattr``/``__globals__``...) and the
   exercise's own rule (its library stand-ins, "no asgteach", complex steps); a cell that breaks
   one fails its exercise, whatever its numbers;
2. starts :mod:`asgteach.lessons.runner` in a fresh Python, in an empty temporary folder, and
   hands it the notebook's code cells: the instructor's (read-only, which nbgrader has put back
   as written), the submission's, and the checks; the runner runs them in order and each check
   in a fork that first puts back anything the submission changed in the checker or the
   libraries (see its docstring);
3. reads one verdict per check; an exercise whose verdict is missing (the runner died, ran out
   of time or was ended by the submission) fails.

See docs/teaching.md ("What graded mode guarantees") for what this does and does not exclude.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

from .rules import HANDS_OFF, problems, rule_for

__all__ = ["Verdict", "notebook_cells", "judge_notebook", "apply_verdicts", "TIMEOUT"]

#: seconds the runner may take for one notebook (every cell and every check)
TIMEOUT = 900

_CHECK_ID = re.compile(r"^exercise-(\d+)-check$")
_ANSWER_ID = re.compile(r"^exercise-(\d+)(?:-\d+)*$")


@dataclass(frozen=True)
class Verdict:
    """One exercise's result: passed or not, the message a student reads, the check's printed output."""

    exercise: int
    passed: bool
    message: str = ""
    output: str = ""


def _source(cell: Any) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def notebook_cells(nb: dict[str, Any]) -> list[dict[str, Any]]:
    """The code cells of a course notebook as the runner takes them: kind, source, exercise.

    Kinds from nbgrader's metadata: a solution cell is an ``answer`` (of the exercise its
    ``grade_id`` names), a locked grade cell ``exercise-N-check`` a ``check``, any other locked
    cell ``context``, and a cell without metadata (added by the student) ``other``: it runs as
    submitted code, counted with the next exercise.
    """
    out: list[dict[str, Any]] = []
    next_exercise: int | None = None
    for cell in reversed(nb.get("cells", [])):   # an added cell belongs to the exercise that follows it
        if cell.get("cell_type") != "code":
            continue
        meta = (cell.get("metadata") or {}).get("nbgrader") or {}
        grade_id = meta.get("grade_id", "")
        check, answer = _CHECK_ID.match(grade_id), _ANSWER_ID.match(grade_id)
        if meta.get("grade") and meta.get("locked") and check:
            kind, n = "check", int(check.group(1))
            next_exercise = n
        elif meta.get("solution") and answer:
            kind, n = "answer", int(answer.group(1))
        elif meta.get("locked"):
            kind, n = "context", None
        else:
            kind, n = "other", next_exercise
        out.append({"kind": kind, "source": _source(cell), "exercise": n})
    return out[::-1]


def _rule_problems(cells: list[dict[str, Any]], lesson: str) -> dict[int, str]:
    found: dict[int, str] = {}
    for cell in cells:
        n = cell["exercise"]
        if cell["kind"] not in ("answer", "other") or n is None or n in found:
            continue
        for rule in (HANDS_OFF, rule_for(lesson, n)):
            if rule is None:
                continue
            bad = problems(cell["source"], rule)
            if bad:
                found[n] = (f"exercise {n}: your answer cell {bad[0]}, which a graded answer may not: {rule.why}")
                break
    return found


def judge_notebook(nb: dict[str, Any], lesson: str, timeout: float = TIMEOUT,
                   python: str | None = None) -> dict[int, Verdict]:
    """Every exercise's verdict for the course notebook ``nb`` of ``lesson`` (its stem, e.g. "03-chain-rule...")."""
    cells = notebook_cells(nb)
    exercises = sorted({c["exercise"] for c in cells if c["kind"] == "check"})
    broken = _rule_problems(cells, lesson)
    verdicts: dict[int, Verdict] = {}
    with tempfile.TemporaryDirectory(prefix="asgteach-judge-") as work:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JPY_", "JUPYTER"))}
        env.update(MPLBACKEND="Agg", ASGTEACH_NO_PROGRESS="1", PYTHONDONTWRITEBYTECODE="1")
        try:
            proc = subprocess.run([python or sys.executable, "-m", "asgteach.lessons.runner", work],
                                  input=json.dumps({"cells": cells}), capture_output=True, text=True,
                                  timeout=timeout, cwd=work, env=env)
            stdout, why = proc.stdout, f"the runner stopped (exit code {proc.returncode})"
        except subprocess.TimeoutExpired as e:
            stdout = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            why = f"the notebook took longer than {timeout:.0f} s"
        for line in stdout.splitlines():
            try:
                v = json.loads(line)
                n = int(v["exercise"])
            except (ValueError, KeyError, TypeError):
                continue
            if n in exercises and n not in verdicts:   # the first reply for each exercise counts
                verdicts[n] = Verdict(n, bool(v.get("passed")), str(v.get("message", "")), str(v.get("output", "")))
    for n in exercises:
        if n in broken:
            verdicts[n] = Verdict(n, False, broken[n], verdicts[n].output if n in verdicts else "")
        elif n not in verdicts:
            verdicts[n] = Verdict(n, False, f"exercise {n}: no verdict: {why}")
    return verdicts


def apply_verdicts(nb: dict[str, Any], verdicts: dict[int, Verdict]) -> dict[str, Any]:
    """Write each verdict into its check cell's outputs (in place; returns ``nb``).

    A pass: the check's printed lines and ``exercise N passed``; a failure: one error output,
    ``ExerciseError`` with the message (nbgrader scores a test cell with an error 0).
    """
    for cell in nb.get("cells", []):
        meta = (cell.get("metadata") or {}).get("nbgrader") or {}
        m = _CHECK_ID.match(meta.get("grade_id", ""))
        if cell.get("cell_type") != "code" or not (meta.get("grade") and m) or int(m.group(1)) not in verdicts:
            continue
        v = verdicts[int(m.group(1))]
        if v.passed:
            text = v.output if v.output.endswith("\n") or not v.output else v.output + "\n"
            cell["outputs"] = [{"output_type": "stream", "name": "stdout",
                                "text": text + f"exercise {v.exercise} passed (graded in a fresh process)\n"}]
        else:
            cell["outputs"] = [{"output_type": "error", "ename": "ExerciseError", "evalue": v.message,
                                "traceback": [f"ExerciseError: {v.message}"]}]
    return nb
