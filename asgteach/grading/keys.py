"""Where the answer keys are, and loading them: the references some checks compare with.

The keys give the answers away, so they are not part of the package a student installs (the wheel holds
no keys, and a graded submission's sandbox never has them in its file system). They live in one file,
``instructor/answer_keys.py`` of the repository. A check finds them, in this order:

1. ``$ASGTEACH_KEYS``: the path of that file (the judge of a graded course sets it to the copy that
   ``asgteach course DIR`` wrote into the course directory, ``DIR/keys/answer_keys.py``);
2. a checkout: ``instructor/answer_keys.py`` beside the ``asgteach`` package folder.

Without either, a check that needs them says so (:class:`KeysMissing`): practice mode in a student's
install checks what it can without them.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from .exercises import ExerciseError

__all__ = ["KeysMissing", "keys_path", "load", "MODULE"]

#: the name the keys module is loaded under (one copy per process)
MODULE = "asgteach_answer_keys"


class KeysMissing(ExerciseError):
    """A check needs the answer keys and this install has none (a student's install carries no keys)."""


def keys_path() -> Path | None:
    """The answer keys file this process would load, or None when there is none."""
    given = os.environ.get("ASGTEACH_KEYS")
    if given:
        path = Path(given)
        return path if path.is_file() else None
    checkout = Path(__file__).resolve().parents[2] / "instructor" / "answer_keys.py"
    return checkout if checkout.is_file() else None


def load() -> ModuleType:
    """The answer keys module (loaded once per process); :class:`KeysMissing` when there are none."""
    if MODULE in sys.modules:
        return sys.modules[MODULE]
    path = keys_path()
    if path is None:
        raise KeysMissing(
            "this check compares your answer with the course's answer keys, which an installed asgteach does not "
            "carry (they stay with the instructor). Check it in a clone of the repository (git clone, then "
            "./scripts/lab), or hand it in: your instructor's grader has the keys.")
    spec = importlib.util.spec_from_file_location(MODULE, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[MODULE]
        raise
    return module
