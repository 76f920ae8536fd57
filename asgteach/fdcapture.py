"""Keep what C libraries print to stderr out of a notebook cell, and remember it for ``asgteach doctor``.

Probing the GPU loads the Vulkan drivers, and some of them print to the process's stderr
directly (file descriptor 2, below Python's ``sys.stderr``). On a server where
``XDG_RUNTIME_DIR`` is unset, common on hubs and in containers, Mesa's drivers try to reach a
Wayland display and print four times ``error: XDG_RUNTIME_DIR is invalid or not set in the
environment.`` A Jupyter kernel forwards fd 2 into the cell's output, so every ``at.show``
showed four red lines that had nothing to do with the graph (the GPU's compute path never
needs a display).

:func:`captured_stderr` points fd 2 at a temporary file for the length of a ``with`` block
(``os.dup2``, so C code writing to fd 2 lands there too), then puts the real stderr back and
keeps what was written under a label; :func:`messages` hands it to ``asgteach doctor``. Nothing
is thrown away silently: it moves from the cell to the doctor's report.

fd 2 belongs to the whole process: while a block runs, whatever any thread writes to fd 2 is
captured too. Blocks are meant to be short (a probe of a few milliseconds) and take turns.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from contextlib import contextmanager
from typing import Iterator

__all__ = ["captured_stderr", "messages"]

_LOCK = threading.RLock()
_MESSAGES: dict[str, str] = {}


@contextmanager
def captured_stderr(label: str) -> Iterator[None]:
    """Run the block with file descriptor 2 writing to a temporary file; keep its text as ``messages()[label]``.

    Python's own ``sys.stderr`` is flushed first, so text printed before the block still reaches
    the real stderr. Where fd 2 cannot be duplicated (closed, or no such descriptor), the block
    runs as it is.
    """
    with _LOCK:
        try:
            sys.stderr.flush()
        except (AttributeError, OSError, ValueError):   # no sys.stderr, or a closed one
            pass
        try:
            saved = os.dup(2)
        except OSError:
            yield
            return
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield
            finally:   # also when the block raised: a driver that fails often says why on stderr
                os.dup2(saved, 2)
                os.close(saved)
                sink.seek(0)
                text = sink.read().decode("utf-8", errors="replace")
                if text.strip():
                    _MESSAGES[label] = text


def messages() -> dict[str, str]:
    """What each captured block wrote to stderr (the last time a block of that label wrote anything)."""
    with _LOCK:
        return dict(_MESSAGES)
