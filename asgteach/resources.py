"""Where asgteach's data files are: WGSL shaders and the lessons.

They live at the repository root (``shaders/``, ``lessons/``) so that a contributor finds them
next to the code, and the wheel carries them *inside* the package (``asgteach/shaders``,
``asgteach/lessons``, see ``[tool.hatch.build.targets.wheel.force-include]`` in pyproject.toml).
So there are two layouts to look in:

* installed from a wheel:       site-packages/asgteach/shaders/*.wgsl
* a checkout (editable install): <repo>/asgteach/../shaders/*.wgsl

The package copy wins when both exist, because that is the one that matches the installed code.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["package_dir", "shaders_dir", "shader_source", "lessons_dir", "is_checkout"]


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
