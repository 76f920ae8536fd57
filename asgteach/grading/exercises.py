"""The two context managers every exercise uses: ``exercise(n)`` around the answer, ``check(n)`` around its check.

A lesson's exercise is two cells::

    with exercise(1):                      # the answer cell
        ### BEGIN SOLUTION
        df_value = ...
        ### END SOLUTION

    with check(1):                         # the check cell
        check_array(df_value, expected, name="df/da")

``asgteach student`` replaces the lines between the markers by
``raise NotImplementedError("exercise 1")``. Then:

* ``exercise(1)`` catches that NotImplementedError, prints ``exercise 1: not done yet``
  and records it, so the notebook runs on (a student can run all cells at any time);
* ``check(1)`` sees the record and prints ``exercise 1: not done yet`` instead of failing
  on the names the answer should have defined;
* once the answer is written, ``check(1)`` lets a wrong answer's :class:`ExerciseError`
  through (it says what is wrong, where, expected vs got), and prints
  ``exercise 1 passed`` for a right one.

Any other error in the answer cell is the student's to see: it is not caught.

An answer may also be a function whose *body* is the solution (the stub keeps its signature
and docstring): the placeholder is then raised when the check calls it, and ``check(n)``
reports that as "not done yet" too.

Graded: ``asgteach course`` writes the check cells of an nbgrader course as
``with check(n, graded=True):``. There "not done yet" is an :class:`ExerciseError` (an error in
an autograded test cell scores 0), not a printed line.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

__all__ = ["ExerciseError", "exercise", "check", "status", "is_placeholder", "in_judge", "on_submission_side",
           "NOT_DONE", "DONE", "FAILED"]

NOT_DONE, DONE, FAILED = "not done", "done", "failed"

#: True in the judge of a graded course (:mod:`asgteach.grading.judge`), where a check's student function is a
#: handle into the sandbox: a check's runtime watches (what the function calls while it runs) see only the
#: channel there, so they stand down, and the exercise's rules on the answer's *source* decide instead
IN_JUDGE = False


def in_judge() -> bool:
    """Is this process the judge of a graded course (the student's code runs elsewhere, in a sandbox)?"""
    return IN_JUDGE


#: set by the judge while a check runs (and by tests that play the judge): dotted name -> that object of the
#: course's package, in the sandbox
SUBMISSION_SIDE: Any = None


def on_submission_side(dotted: str) -> Any:
    """An object of the course's own package (``"asgteach.lessons.lesson01b.scalar_graph"``) where the
    student's code runs: in practice mode the object itself; in the judge, a handle to the sandbox's copy.

    A check uses it to build what the student's function must take apart (objects it walks with its own
    attribute reads, which a judge-side object would refuse), then checks the result against what it built,
    by identity: the handles of one sandbox object are one handle. The sandbox is the student's: what such a
    helper returns is checked like any answer, never trusted.
    """
    if not dotted.startswith("asgteach.lessons."):
        raise ValueError(f"only objects of the course's package are fetched this way, not {dotted!r}")
    if IN_JUDGE:
        if SUBMISSION_SIDE is None:
            raise RuntimeError("on_submission_side: no submission is being judged")
        return SUBMISSION_SIDE(dotted)
    import importlib

    module, _, attr = dotted.rpartition(".")
    return getattr(importlib.import_module(module), attr)


#: exercise number -> NOT_DONE / DONE / FAILED, for the exercises run in this kernel.
#: One lesson per kernel, so the number alone is the key (re-running a cell overwrites it).
_STATUS: dict[int, str] = {}


#: exercise number -> the notebook's cell count (IPython's ``In [n]``) when its answer cell last ran, in this kernel
_ANSWERED_AT: dict[int, int] = {}


def _cell_count() -> int | None:
    """IPython's count of the cell running now (``In [n]``), or None outside IPython."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    count = getattr(shell, "execution_count", None)
    return count if isinstance(count, int) else None


def _stale_hint(n: int) -> str:
    """When cells ran between exercise ``n``'s answer and its failing check, what that may mean.

    A notebook is run out of order: a student re-runs a cell above an answer (it draws a new random point, or
    makes a new graph), and the answer's old values no longer belong with it. The check then rightly fails, but
    its message speaks of the answer; this says what else may be going on. Only in a student's kernel.
    """
    then, now = _ANSWERED_AT.get(n), _cell_count()
    if IN_JUDGE or then is None or now is None or now - then <= 1:
        return ""
    return (f"\n  (Cells have run since your answer cell, In [{then}]. If one of them re-made something your answer "
            f"uses, a graph or a random point, the answer's values belong to the old one: run that section's cells "
            f"again in order, then your answer cell, then this one.)")


class ExerciseError(AssertionError):
    """A wrong answer. The message says what is wrong and where: which node or element, expected vs got."""


def status(n: int) -> str | None:
    """The recorded state of exercise ``n`` in this kernel: "not done", "done", "failed" or None (never run)."""
    return _STATUS.get(n)


def _not_done_message(n: int, why: str = "") -> str:
    return (f"exercise {n}: not done yet{why} - write your answer in place of "
            f"`raise NotImplementedError(\"exercise {n}\")`, run that cell, then this one")


def is_placeholder(e: BaseException, n: int) -> bool:
    """Is ``e`` the stub of exercise ``n`` (``asgteach student``'s, or nbgrader's message-less one)?"""
    return type(e) is NotImplementedError and str(e) in (f"exercise {n}", "")


@contextmanager
def exercise(n: int) -> Iterator[None]:
    """Wrap the answer of exercise ``n``: a ``NotImplementedError("exercise n")`` means "not done yet"."""
    _STATUS[n] = FAILED  # until the block finishes: an error in the student's code leaves it failed
    count = _cell_count()
    if count is not None:
        _ANSWERED_AT[n] = count
    try:
        yield
    except NotImplementedError as e:
        if not is_placeholder(e, n):
            raise  # a NotImplementedError of something else is a real error, not the placeholder
        _STATUS[n] = NOT_DONE
        print(_not_done_message(n))
        return
    _STATUS[n] = DONE


@contextmanager
def check(n: int, graded: bool = False) -> Iterator[None]:
    """Wrap the check of exercise ``n``: report "not done yet", a clear failure, or "passed".

    A name the answer should have defined but did not becomes an ExerciseError that says
    so; a wrong value is the check's own ExerciseError, raised as it is. With ``graded=True``
    (an nbgrader test cell) "not done yet" is raised as an ExerciseError instead of printed.
    """
    state = _STATUS.get(n)

    def not_done(why: str = "") -> None:
        if graded:
            raise ExerciseError(_not_done_message(n, why)) from None
        print(_not_done_message(n, why))

    try:
        yield
    except Exception as e:  # noqa: BLE001 - sorted below: "not done yet", a named gap, or the check's verdict
        if state == NOT_DONE or is_placeholder(e, n):  # the answer (or the function the check called) is a stub
            not_done()
            return
        if isinstance(e, NameError):
            if state is None:
                not_done(" (its answer cell has not been run in this kernel)")
                return
            if state == FAILED:
                raise ExerciseError(f"exercise {n}: the answer cell stopped with an error before it defined "
                                    f"everything ({e}); fix that error first") from None
            raise ExerciseError(f"exercise {n}: your answer ran but did not define what the check needs: "
                                f"{e}") from None
        if isinstance(e, ExerciseError):
            from .keys import KeysMissing

            if isinstance(e, KeysMissing) and not graded:   # a student's install: say so, the notebook runs on
                print(f"exercise {n}: not checked here: {e}")
                return
            said = "then this one" in str(e)          # (a check that found the stale part itself says what to run)
            raise ExerciseError(f"exercise {n}: {e}{'' if graded or said else _stale_hint(n)}") from None
        raise
    if state == NOT_DONE:  # the check found old values (from an earlier run): still not done
        not_done()
        return
    print(f"exercise {n} passed")
