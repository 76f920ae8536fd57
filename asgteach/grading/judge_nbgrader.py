"""nbgrader's side of the judge: a preprocessor that grades each exercise by the judge, in its sandbox.

Only nbgrader's configuration loads this module (the ``nbgrader_config.py`` that ``asgteach course``
writes makes :class:`JudgeChecks` the first of ``c.Autograde.autograde_preprocessors``, in place of
nbgrader's own Execute, which would run the submission in an unsandboxed kernel), so asgteach itself
needs no nbgrader. See :mod:`asgteach.grading.judge`.

For each submitted notebook it finds, in the course directory nbgrader runs in (its working folder):

* the instructor's notebook ``source/<assignment>/<notebook>.ipynb`` (the context and check cells are
  taken from it, not from the submission's copy);
* the answer keys ``keys/answer_keys.py`` (written there by ``asgteach course``), which only the judge's
  worker reads;

and writes into the notebook what each cell printed in the sandbox and, into each check cell, the verdict.
Without bubblewrap it refuses to grade (nbgrader reports the error), naming what to install.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nbformat import from_dict
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Float, Integer

from .judge import apply_outputs, apply_verdicts, judge_in_worker
from .sandbox import Limits

__all__ = ["JudgeChecks"]


def _course_root(config: Any) -> Path:
    """The course directory nbgrader works in: ``CourseDirectory.root`` when configured, else the working folder."""
    try:
        root = config.CourseDirectory.get("root")
    except (AttributeError, TypeError):
        root = None
    return Path(root) if isinstance(root, str) and root else Path.cwd()


class JudgeChecks(NbGraderPreprocessor):
    """Judge every exercise of the notebook in the sandbox; its check cell shows (and scores) the verdict."""

    time_limit = Float(Limits.time, help="wall seconds for one submission (every cell and check)").tag(config=True)
    request_time_limit = Float(Limits.request_time, help="wall seconds for one cell or call").tag(config=True)
    memory_limit = Integer(Limits.memory, help="bytes of address space per sandboxed process").tag(config=True)
    cpu_limit = Integer(Limits.cpu, help="CPU seconds per sandboxed process").tag(config=True)
    process_limit = Integer(Limits.processes, help="processes and threads a submission may add").tag(config=True)

    def preprocess(self, nb: Any, resources: dict) -> tuple[Any, dict]:
        info = resources.get("nbgrader", {})
        lesson, assignment = info.get("notebook", ""), info.get("assignment", "")
        course = _course_root(self.config)
        source_path = course / "source" / assignment / f"{lesson}.ipynb"
        source_nb = json.loads(source_path.read_text(encoding="utf-8")) if source_path.is_file() else None
        if source_nb is None:
            self.log.warning("asgteach judge: no %s: the submission's own copy of the instructor's cells is used",
                             source_path)
        keys = course / "keys" / "answer_keys.py"
        limits = Limits(time=self.time_limit, request_time=self.request_time_limit, memory=self.memory_limit,
                        cpu=self.cpu_limit, processes=self.process_limit)
        plain = json.loads(json.dumps(nb))
        verdicts, outputs = judge_in_worker(plain, lesson, source_nb, keys if keys.is_file() else None, limits)
        for v in verdicts.values():
            self.log.info("asgteach judge: %s exercise %d %s", lesson, v.exercise, "passed" if v.passed else "failed")
        apply_outputs(nb, outputs)
        apply_verdicts(nb, verdicts)
        for cell in nb.cells:   # the verdicts are plain dicts: nbgrader reads outputs as NotebookNodes
            if cell.get("cell_type") == "code":
                cell.outputs = [from_dict(o) for o in cell.outputs]
        return nb, resources
