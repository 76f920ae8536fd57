"""What the student's code runs, watched: the library's function and the check's reference, however they are held.

Two guards stand between an exercise and the library that already does it. :func:`~.checks.without`
replaces the library's function *where it is looked up* (the op registry, a module attribute), and
the rules (:mod:`.rules`) read the *names* an answer's source uses. Neither sees the function object
itself held where no name shows: a default argument (``def f(shape, out, _ref=broadcast_strides)``),
a closure made before ``without`` replaced the attribute, a ``functools.partial``, an op's numpy kernel
taken from its spec in the answer cell, an attribute path built from strings when the function runs
(``operator.attrgetter("less" + "ons.answer_keys...")``). What runs can be seen, whatever holds it:
:func:`refusing_calls` sets a profile hook (:func:`sys.setprofile`) while the student's code runs and
notes a call into the code of the functions it is given, or into the answer keys
(``answer_keys.py``, the references the checks load). The call is noted, not stopped, so an answer
that catches the error cannot hide it; the block then fails with :class:`~.exercises.ExerciseError`
naming what ran. An answer that switches the hook off fails too.

A check computes what it expects first, then runs the student's function inside the block, so the
only code of the keys that can run there is code the answer reached for.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from types import CodeType
from typing import Any, Callable, Iterator

from .exercises import ExerciseError

__all__ = ["refusing_calls"]


def _label(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', getattr(fn, '__name__', '?'))}"


@contextmanager
def refusing_calls(name: str, *functions: Callable[..., Any] | tuple[Callable[..., Any], str], keys: bool = True,
                   why: str = "") -> Iterator[None]:
    """Inside the block, a call into ``functions`` (their own code, however it is reached) or, with ``keys``, into
    the answer keys fails the check: ExerciseError when the block ends. ``name`` is the student's function.

    Pass the functions themselves, taken *before* ``without(...)`` replaces their module attribute; a pair
    ``(function, label)`` names it in the message (a lambda's own name says little).

    In the judge of a graded course the student's function runs in its sandbox, out of this hook's sight:
    there the block watches nothing, and the exercise's rules on the answer's source stand in for it.
    """
    from .exercises import in_judge

    if in_judge():
        yield
        return
    refused: dict[CodeType, str] = {}
    for item in functions:
        fn, label = item if isinstance(item, tuple) else (item, _label(item))
        if hasattr(fn, "__code__"):
            refused[fn.__code__] = label
    keys_file = ""
    if keys:
        from .keys import keys_path   # the keys' file, where a call into it can be recognised

        path = keys_path()
        keys_file = os.path.realpath(path) if path is not None else ""
    in_keys: dict[str, bool] = {}          # co_filename -> is it the keys' file (realpath once per file)
    found: list[str] = []

    previous = sys.getprofile()

    def hook(frame: Any, event: str, arg: Any) -> None:
        if previous is not None:       # a watch around this one (nested checks) keeps watching
            previous(frame, event, arg)
        if event != "call" or found:
            return
        code = frame.f_code
        if code in refused:
            found.append(f"your answer calls {refused[code]}, which the exercise asks you to write yourself"
                         + (f": {why}" if why else ""))
        elif keys_file:
            where = code.co_filename
            if where not in in_keys:
                in_keys[where] = os.path.realpath(where) == keys_file
            if in_keys[where]:
                found.append(f"your answer calls the check's own reference ({code.co_name}, in "
                             "instructor/answer_keys.py): the exercise is to write it yourself")

    sys.setprofile(hook)
    try:
        yield
    finally:
        escaped = sys.getprofile() is not hook
        sys.setprofile(previous)
        if found:
            raise ExerciseError(found[0])
        if escaped:
            raise ExerciseError(f"{name} switched off the check's profile hook (sys.setprofile): leave it alone")
