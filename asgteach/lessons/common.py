"""What the checks of several lessons share: fresh randomness, a borrowed answer found, a bug hunt's report.

Each lesson's checks live in its own module (``lesson03.py`` ... ``lesson18.py``); the few helpers
that more than one of them needs live here, so that editing one lesson's exercise touches that
lesson's module and its answer key only:

* :func:`fresh`: a random generator seeded from the operating system, so every run of a check draws
  points, shapes and graphs the notebook never printed (a number copied from an output cannot pass);
* :func:`borrowed`: the notebook name under which a student's function holds the library's own answer
  (``from asgteach import jvp``, a default argument), which lessons 10 and 11 refuse;
* :func:`mystery_report`: gradcheck's report on a graph while a lesson's planted bug is in
  (:func:`asgteach.lessons.bugs.mystery`), the truth the bug hunts of lessons 4 and 5 are compared with.

Generic comparisons (an array, a function on cases, a node's values) are the grading engine's, in
:mod:`asgteach.grading.checks`.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["fresh", "borrowed", "mystery_report"]


def fresh(seed: int | None = None) -> np.random.Generator:
    """A random generator; without ``seed``, one the notebook cannot predict."""
    return np.random.default_rng(seed)


def borrowed(fn: Any, *originals: Any) -> str | None:
    """The notebook name under which ``fn``'s globals hold one of ``originals`` (the library's answer), if any."""
    if fn in originals:
        return getattr(fn, "__name__", "it")
    for name, value in getattr(fn, "__globals__", {}).items():
        if any(value is o for o in originals) and name in getattr(getattr(fn, "__code__", None), "co_names", ()):
            return name
    return None


def mystery_report(lesson: int, loss: Any, inputs: Sequence[Any], feeds: Mapping[Any, Any]) -> Any:
    """gradcheck's report on ``loss`` with respect to ``inputs``, inside ``bugs.mystery(lesson)``."""
    from .. import gradcheck
    from . import bugs

    with bugs.mystery(lesson):
        return gradcheck(loss, list(inputs), feeds)
