"""Where a student's copy of the lessons lives: a writable folder, filled on first use.

The lessons ship inside the package (``asgteach/lessons/*.ipynb`` in the wheel: their student
versions, every solution cut out) or sit in a checkout's ``lessons/`` (the instructor's, solutions
in place). A student edits and saves notebooks, so they must not be opened
where the package is installed: on a JupyterHub or in a system-wide install that folder is
read-only (and a ``pip install --upgrade`` would wipe the edits anyway). So ``asgteach lab``
opens a *copy*:

1. ``--dir DIR`` when given (used as it is);
2. a checkout's own ``lessons/`` when it is writable (a contributor edits the real thing);
3. otherwise ``$ASGTEACH_LESSONS_DIR``, else ``./asgteach-lessons`` when the current folder
   is writable, else ``~/asgteach-lessons``: created on first use by copying the notebooks.
   Later runs copy only lessons that are new (a course update) and never overwrite a file,
   so a student's work survives.

``lessons_workspace(solutions=True)`` (``asgteach lab --solutions``) wants the instructor's lessons:
a checkout's own ``lessons/`` (its copy, when that folder is read-only, goes to a folder named
``...-solutions`` beside the usual one, so it never mixes with the exercises). An install without
them (a wheel) raises :class:`SolutionsNotHere`, whose message says where the solutions are.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from . import resources

__all__ = ["lessons_workspace", "default_copy_target", "copy_lessons", "SolutionsNotHere"]


class SolutionsNotHere(FileNotFoundError):
    """This install holds the student versions of the lessons only; the message says where the solutions are."""


def _writable(folder: Path) -> bool:
    return folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)


def default_copy_target() -> Path:
    """Where the student copy goes when no folder is named (see the module docstring, step 3)."""
    env = os.environ.get("ASGTEACH_LESSONS_DIR", "").strip()
    if env:
        return Path(env).expanduser().resolve()
    here = Path.cwd()
    return (here if _writable(here) else Path.home()) / "asgteach-lessons"


def copy_lessons(source: Path, target: Path) -> list[str]:
    """Copy the notebooks (and data files) of ``source`` that ``target`` lacks; return the names copied.

    Only notebooks and their data travel: ``asgteach/lessons`` is also the Python package of
    the exercise checks, whose ``.py`` files are no part of a student's folder.
    """
    target.mkdir(parents=True, exist_ok=True)
    copied = []
    for path in sorted(source.iterdir()):
        if not path.is_file() or path.suffix in (".py", ".pyc") or path.name.startswith("."):
            continue
        dest = target / path.name
        if not dest.exists():
            shutil.copy2(path, dest)
            os.chmod(dest, 0o644)  # a read-only install must not make the student's copy read-only
            copied.append(path.name)
    return copied


def lessons_workspace(requested: str | os.PathLike | None = None, *,
                      solutions: bool = False) -> tuple[Path, str]:
    """The folder ``asgteach lab`` opens, and one line saying where it came from.

    ``solutions``: the instructor's lessons, every solution in place (:class:`SolutionsNotHere` where this
    install has none); otherwise the lessons this install has (a wheel's are the student versions).
    """
    if requested:
        return Path(requested).expanduser().resolve(), "the folder you asked for"
    if solutions:
        found = resources.solutions_dir()
        if found is None:
            raise SolutionsNotHere(f"this install has no solutions to open. {resources.WHERE_SOLUTIONS_ARE}")
        source = found
    else:
        source = resources.lessons_dir()
    if resources.is_checkout() and _writable(source):
        return source, "the lessons of this checkout"
    target = default_copy_target()
    if solutions:
        target = target.with_name(target.name + "-solutions")   # never into the exercises' folder
    try:
        copied = copy_lessons(source, target)
    except OSError as e:
        raise OSError(f"cannot copy the lessons from {source} to {target} ({e}). Name a folder you can write to: "
                      f"`asgteach lab --dir ~/my-lessons` or set ASGTEACH_LESSONS_DIR.") from e
    if copied and len(copied) == sum(1 for p in target.iterdir() if p.is_file()):
        return target, f"your copy of the lessons, made now from {source} (your edits stay here)"
    if copied:
        return target, f"your copy of the lessons ({len(copied)} new lesson file(s) added: {', '.join(copied)})"
    return target, "your copy of the lessons (made earlier; your edits are kept)"
