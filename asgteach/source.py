"""Where the user wrote it: the ``file:line`` that errors and the inspector point at.

Every node remembers the line of the user's code that created it (``node.source``), so a
shape error, a NaN or a missing feed can say *your* line, not a line inside asgteach. This
module finds that line and reads its text back. It imports nothing of ours: graph.py,
shapes.py and the ops all use it.
"""

from __future__ import annotations

import linecache
import os
import sys

__all__ = ["user_source", "source_line_text"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def user_source(skip_package: bool = True) -> str:
    """Return ``"file:line"`` of the innermost stack frame outside the asgteach package.

    That frame is the user's line (a notebook cell, a script, a test), which is what an
    error message should point at: the user never wrote ``ops/elementwise.py``.
    """
    frame = sys._getframe(1)
    while frame is not None:
        if not (skip_package and _in_package(frame.f_code.co_filename)):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>:0"


_INSIDE: dict[str, bool] = {}   # file name as the code object has it -> is it one of asgteach's files?


def _in_package(filename: str) -> bool:
    """Is ``filename`` inside the asgteach package? (Remembered per name: every node asks, and building a
    transformer's training graph walks ~14 000 frames, each an ``os.path.abspath`` call otherwise.)"""
    inside = _INSIDE.get(filename)
    if inside is None:
        inside = _INSIDE[filename] = os.path.abspath(filename).startswith(_PACKAGE_DIR + os.sep)
    return inside


def source_line_text(source: str) -> str:
    """The text of the user's line for a ``file:line`` source, or "" if unavailable."""
    path, _, line = source.rpartition(":")
    if not path or not line.isdigit():
        return ""
    return linecache.getline(path, int(line)).strip()
