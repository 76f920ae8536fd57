"""Hatchling build hook: the wheel carries the *student versions* of the lessons, never the instructor's notebooks.

``lessons/*.ipynb`` at the repository root are the instructor's notebooks, every solution in place. A wheel is
what a student installs (``pip install``, a hub's image, ``asgteach lab``), so it must hold no solution: this hook
writes the student version of every lesson (``asgteach student``'s cut: each solution block replaced by
``raise NotImplementedError("exercise N")``, outputs and execution counts cleared, metadata kept) into a
temporary folder and force-includes those files as ``asgteach/lessons/<name>.ipynb``. Other files of
``lessons/`` (data a lesson reads) travel as they are; hidden files and Python files do not. The answer keys
(``instructor/``) are outside the ``asgteach`` package, so the wheel never sees them.

The cut is :mod:`asgteach.grading.student`, loaded from this source tree by its file path, not by importing
``asgteach`` (whose ``__init__`` needs numpy and more): the module uses the standard library only, so the hook
runs in any build environment, offline with ``--no-isolation`` (tests/test_packaging.py, scripts/release) or in
pip's isolated one.

An editable install (``pip install -e .``) gets nothing from this hook: a checkout finds its own ``lessons/``.
Configured in pyproject.toml under ``[tool.hatch.build.targets.wheel.hooks.custom]``.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

#: where the lessons go inside the wheel (resources.lessons_dir() looks there first)
TARGET = "asgteach/lessons"


def load_student_module(root: Path) -> ModuleType:
    """``asgteach/grading/student.py`` of the tree at ``root``, loaded on its own (no ``import asgteach``)."""
    path = root / "asgteach" / "grading" / "student.py"
    name = "_asgteach_build_student"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"asgteach build hook: cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module   # dataclasses look their module up while the class is made
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    return module


def write_student_lessons(root: Path, out: Path) -> dict[str, str]:
    """Write the student lessons of ``root/lessons`` (and its data files) into ``out``; return force-include
    entries (file written -> path in the wheel). Raises when a lesson's markers are broken or a solution
    survives the cut: a wheel that would hand one out is not built."""
    student = load_student_module(root)
    src = root / "lessons"
    written = student.write_student_versions(src, out)
    entries: dict[str, str] = {}
    for path, _count in written:
        text = path.read_text(encoding="utf-8")
        if student.BEGIN in text or student.END in text:
            raise RuntimeError(f"asgteach build hook: {path.name} still holds a solution marker after the cut")
        entries[str(path)] = f"{TARGET}/{path.name}"
    for path in sorted(src.iterdir()):
        if path.is_file() and path.suffix not in (".ipynb", ".py", ".pyc") and not path.name.startswith("."):
            copy = out / path.name
            shutil.copy2(path, copy)
            entries[str(copy)] = f"{TARGET}/{path.name}"
    return entries


class StudentLessonsHook(BuildHookInterface):
    """Adds the student versions of the lessons to the wheel (see the module docstring)."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        self._tmp = tempfile.mkdtemp(prefix="asgteach-student-lessons-")
        entries = write_student_lessons(Path(self.root), Path(self._tmp))
        build_data["force_include"].update(entries)
        self.app.display_info(f"asgteach: {sum(p.endswith('.ipynb') for p in entries.values())} student lessons "
                              f"(solutions cut, outputs cleared) -> {TARGET}/")

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        tmp = getattr(self, "_tmp", None)
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
