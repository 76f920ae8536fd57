"""Where asgteach's data files are: WGSL shaders and the lessons.

They live at the repository root (``shaders/``, ``lessons/``) so that a contributor finds them
next to the code, and the wheel carries them *inside* the package (``asgteach/shaders``,
``asgteach/lessons``, see ``[tool.hatch.build.targets.wheel.force-include]`` and the build hook
``hatch_build.py`` in pyproject.toml). So there are two layouts to look in:

* installed from a wheel:       site-packages/asgteach/shaders/*.wgsl
* a checkout (editable install): <repo>/asgteach/../shaders/*.wgsl

The package copy wins when both exist, because that is the one that matches the installed code.

The two layouts do not hold the same lessons. A checkout's ``lessons/`` are the instructor's
notebooks, every solution in place; a wheel holds their *student versions* (the build hook cuts
every solution out, as ``asgteach student`` does) and no answer keys, because a wheel is what a
student installs. :func:`lessons_dir` is whichever this install has; :func:`solutions_dir` is the
instructor's notebooks, or None where there are none (an installed wheel): the solutions then
live in a checkout of the repository, or with the instructor (:data:`WHERE_SOLUTIONS_ARE`).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["package_dir", "shaders_dir", "shader_source", "lessons_dir", "solutions_dir", "holds_solutions",
           "is_checkout", "WHERE_SOLUTIONS_ARE"]

#: a solution block opens with this line (asgteach.grading.student.BEGIN; repeated here to import nothing)
_BEGIN = "### BEGIN SOLUTION"

#: where a learner whose install holds no solutions finds them (printed by `asgteach solution`, `lab --solutions`)
WHERE_SOLUTIONS_ARE = (
    "An installed asgteach (a pip install, a class's hub) holds the student versions of the lessons only: no "
    "solutions and no answer keys, which stay with the instructor. The solutions are in a checkout of the course's "
    "repository: `git clone <the repository> asgteach && cd asgteach && ./scripts/lab --solutions` opens every "
    "lesson with its solutions, `.venv/bin/asgteach solution 03 1` there prints one exercise's, and so does "
    "`asgteach solution 03 1 --lessons <the checkout>/lessons` anywhere. In a class, ask your instructor.")


def package_dir() -> Path:
    """The folder of the ``asgteach`` package itself."""
    return Path(__file__).resolve().parent


def _find(name: str, pattern: str = "*") -> Path:
    here = package_dir()
    for candidate in (here / name, here.parent / name):
        # asgteach/lessons/ is also a Python package (the exercise checks): in a checkout it holds no
        # notebooks, so a folder only counts when it holds files of the kind asked for
        if candidate.is_dir() and next(candidate.glob(pattern), None) is not None:
            return candidate
    raise FileNotFoundError(
        f"asgteach cannot find its {name}/ folder (looked in {here / name} and {here.parent / name}). "
        "The installation is incomplete: reinstall with `pip install --force-reinstall asgteach`, "
        "or from a checkout with `pip install -e .`."
    )


def shaders_dir() -> Path:
    """The folder holding the ``*.wgsl`` kernels (one file per kernel family)."""
    return _find("shaders")


def shader_source(family: str) -> str:
    """The WGSL text of one kernel family, e.g. ``shader_source("elementwise")``."""
    path = shaders_dir() / f"{family}.wgsl"
    if not path.is_file():
        known = sorted(p.stem for p in shaders_dir().glob("*.wgsl"))
        raise FileNotFoundError(f"no shader family {family!r} in {shaders_dir()}; known: {', '.join(known) or 'none'}")
    return path.read_text(encoding="utf-8")


def lessons_dir() -> Path:
    """The folder holding the course notebooks (``NN-topic.ipynb``)."""
    return _find("lessons", "*.ipynb")


def is_checkout() -> bool:
    """True when running from a source checkout (the repo's ``pyproject.toml`` sits next to the package)."""
    return (package_dir().parent / "pyproject.toml").is_file() and next(
        (package_dir() / "lessons").glob("*.ipynb"), None) is None


def holds_solutions(folder: str | Path) -> bool:
    """True when a notebook of ``folder`` still holds a solution block (the instructor's lessons, not student
    versions). Only code cells may hold the marker line (asgteach.grading.student refuses it elsewhere), so
    finding its text in a notebook file is enough."""
    for path in sorted(Path(folder).glob("*.ipynb")):
        try:
            if _BEGIN in path.read_text(encoding="utf-8"):
                return True
        except (OSError, UnicodeDecodeError):
            continue
    return False


def solutions_dir() -> Path | None:
    """The instructor's lessons, every solution in place (a checkout's ``lessons/``), or None when this install
    has only the student versions (a wheel: see the module docstring, and :data:`WHERE_SOLUTIONS_ARE`)."""
    try:
        folder = lessons_dir()
    except FileNotFoundError:
        return None
    return folder if holds_solutions(folder) else None
