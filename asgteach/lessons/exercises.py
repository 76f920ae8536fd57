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
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

__all__ = ["ExerciseError", "exercise", "check", "status", "NOT_DONE", "DONE", "FAILED"]

NOT_DONE, DONE, FAILED = "not done", "done", "failed"

#: exercise number -> NOT_DONE / DONE / FAILED, for the exercises run in this kernel.
#: One lesson per kernel, so the number alone is the key (re-running a cell overwrites it).
_STATUS: dict[int, str] = {}


class ExerciseError(AssertionError):
    """A wrong answer. The message says what is wrong and where: which node or element, expected vs got."""


def status(n: int) -> str | None:
    """The recorded state of exercise ``n`` in this kernel: "not done", "done", "failed" or None (never run)."""
    return _STATUS.get(n)


def _not_done_message(n: int, why: str = "") -> str:
    return (f"exercise {n}: not done yet{why} - write your answer in place of "
            f"`raise NotImplementedError(\"exercise {n}\")`, run that cell, then this one")


@contextmanager
def exercise(n: int) -> Iterator[None]:
    """Wrap the answer of exercise ``n``: a ``NotImplementedError("exercise n")`` means "not done yet"."""
    _STATUS[n] = FAILED  # until the block finishes: an error in the student's code leaves it failed
    try:
        yield
    except NotImplementedError as e:
        if str(e) not in (f"exercise {n}", ""):
            raise  # a NotImplementedError of something else is a real error, not the placeholder
        _STATUS[n] = NOT_DONE
        print(_not_done_message(n))
        return
    _STATUS[n] = DONE


@contextmanager
def check(n: int) -> Iterator[None]:
    """Wrap the check of exercise ``n``: report "not done yet", a clear failure, or "passed".

    A name the answer should have defined but did not becomes an ExerciseError that says
    so; a wrong value is the check's own ExerciseError, raised as it is.
    """
    state = _STATUS.get(n)
    try:
        yield
    except Exception as e:  # noqa: BLE001 - sorted below: "not done yet", a named gap, or the check's verdict
        if state == NOT_DONE:  # whatever the check tripped on, the answer is not there yet
            print(_not_done_message(n))
            return
        if isinstance(e, NameError):
            if state is None:
                print(_not_done_message(n, " (its answer cell has not been run in this kernel)"))
                return
            if state == FAILED:
                raise ExerciseError(f"exercise {n}: the answer cell stopped with an error before it defined "
                                    f"everything ({e}); fix that error first") from None
            raise ExerciseError(f"exercise {n}: your answer ran but did not define what the check needs: "
                                f"{e}") from None
        if isinstance(e, ExerciseError):
            raise ExerciseError(f"exercise {n}: {e}") from None
        raise
    if state == NOT_DONE:  # the check found old values (from an earlier run): still not done
        print(_not_done_message(n))
        return
    print(f"exercise {n} passed")
