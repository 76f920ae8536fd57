"""What the checks of several lessons share: fresh randomness, a borrowed answer found, a bug hunt's report.

Each lesson's checks live in its own module (``lesson03.py`` ... ``lesson18.py``); the few helpers
that more than one of them needs live here, so that editing one lesson's exercise touches that
lesson's module and its answer key only:

* :func:`fresh`: a random generator seeded from the operating system, so every run of a check draws
  points, shapes and graphs the notebook never printed (a number copied from an output cannot pass);
* :func:`borrowed`: the notebook name under which a student's function holds the library's own answer
  (``from asgteach import jvp``, a default argument), which lessons 10 and 11 refuse;
* :func:`mystery_report`: gradcheck's report on a graph while a lesson's planted bug is in
  (:func:`asgteach.lessons.bugs.mystery`), the truth the bug hunts of lessons 4 and 5 are compared with;
* :func:`call_answer`: the student's function called with numpy's warnings off, its exception an
  ExerciseError naming the call (lessons 14 and 19).

Generic comparisons (an array, a function on cases, a node's values) are the grading engine's, in
:mod:`asgteach.grading.checks`.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

__all__ = ["fresh", "borrowed", "mystery_report", "quiet", "call_answer"]


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


@contextmanager
def quiet() -> Iterator[None]:
    """Warnings off while the student's code runs: a stray RuntimeWarning on stderr would fail an nbgrader test
    cell with no explanation, so the check judges the values (a nan, an inf) and says what is wrong."""
    import warnings

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def call_answer(fn: Callable[..., Any], call: str, *args: Any) -> Any:
    """``fn(*args)`` under :func:`quiet`; an exception of the student's becomes an ExerciseError naming ``call``."""
    from ..grading.exercises import ExerciseError

    try:
        with quiet():
            return fn(*args)
    except (ExerciseError, NotImplementedError):
        raise  # NotImplementedError: the stub of an unfinished exercise; check(n) says "not done yet"
    except Exception as e:  # noqa: BLE001 - the student's function failing is a finding, reported as such
        raise ExerciseError(f"{call} raised {type(e).__name__}: {e}") from e
