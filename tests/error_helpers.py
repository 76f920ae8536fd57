"""Helpers of the error-message tests: where the test is, and the text of what was raised."""

from __future__ import annotations

import sys
from typing import Any, Callable

import pytest


def caller_line() -> int:
    """The line number of the test line that calls this (the message must name it)."""
    return sys._getframe(1).f_lineno


def raises_text(exc: type[BaseException], make: Callable[[], Any]) -> str:
    """Call ``make``, expect ``exc``, return its message."""
    with pytest.raises(exc) as e:
        make()
    return str(e.value)
