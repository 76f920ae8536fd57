"""nbgrader's side of the judge: a preprocessor that replaces each check cell's outputs by the judge's verdict.

Only nbgrader's configuration loads this module (the ``nbgrader_config.py`` that ``asgteach
course`` writes puts :class:`JudgeChecks` into ``c.Autograde.autograde_preprocessors`` right after
Execute), so asgteach itself needs no nbgrader. See :mod:`asgteach.lessons.judge`.
"""

from __future__ import annotations

from typing import Any

from nbformat import from_dict
from nbgrader.preprocessors import NbGraderPreprocessor

from .judge import apply_verdicts, judge_notebook

__all__ = ["JudgeChecks"]


class JudgeChecks(NbGraderPreprocessor):
    """Judge every exercise of the notebook outside the kernel; its check cell shows (and scores) the verdict."""

    def preprocess(self, nb: Any, resources: dict) -> tuple[Any, dict]:
        lesson = resources.get("nbgrader", {}).get("notebook", "")
        verdicts = judge_notebook(nb, lesson)
        for v in verdicts.values():
            self.log.info("asgteach judge: %s exercise %d %s", lesson, v.exercise, "passed" if v.passed else "failed")
        apply_verdicts(nb, verdicts)
        for cell in nb.cells:   # the verdicts are plain dicts: nbgrader reads outputs as NotebookNodes
            if cell.get("cell_type") == "code":
                cell.outputs = [from_dict(o) for o in cell.outputs]
        return nb, resources
