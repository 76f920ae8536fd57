"""Progress of a long loop: a tqdm bar where someone watches, plain lines where output goes to a log.

tqdm redraws its bar in place: it writes a carriage return (``\\r``) and the new bar over the old
one. In a terminal that is one line that moves. Written to a file or a pipe (a CI log,
``asgteach check 2> log``, a batch job's output, ``nbconvert --execute``'s captured stderr) every
redraw stays, hundreds of bars glued together with ``\\r``. So :class:`Progress` looks at where
its output goes:

* **a terminal**, or **a Jupyter kernel** (its stderr is ipykernel's ``OutStream``; ``tqdm.auto``
  draws its notebook widget there): the tqdm bar, as always;
* **anything else** (a file, a pipe): plain lines, one each time another tenth of the work is
  done and at least one every :data:`EVERY_SECONDS` seconds::

      training: 300/1000 steps (30%), 2.1 s, loss 0.1234

* ``ASGTEACH_NO_PROGRESS=1`` in the environment: nothing at all, anywhere.

The Trainer (``fit``), ``gradcheck``, ``asgteach check`` (``opcheck``) use it; ``asgteach doctor``
says which of the three this terminal gets (:func:`describe`). A leaf: it imports nothing of
asgteach, and tqdm only when it draws a bar.
"""

from __future__ import annotations

import numbers
import os
import sys
import time
from typing import Any, TextIO

__all__ = ["Progress", "mode", "describe", "EVERY_SECONDS", "NO_PROGRESS_ENV"]

#: In a log, a line at least this often (seconds), even when a tenth of the work takes longer.
EVERY_SECONDS = 30.0
#: Set to "1" to turn every progress display off.
NO_PROGRESS_ENV = "ASGTEACH_NO_PROGRESS"
#: With a bar, the values passed to ``update`` are redrawn every this many updates (a redraw costs).
_VALUES_EVERY = 10


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def _is_notebook(stream: Any) -> bool:
    """A Jupyter kernel's output stream (ipykernel.iostream.OutStream): the notebook draws tqdm's widget."""
    return type(stream).__module__.split(".")[0] == "ipykernel"


def mode(stream: TextIO | None = None, *, asked: bool = False) -> str:
    """What a progress display on ``stream`` (default: ``sys.stderr``) is: "bar", "lines" or "off".

    ``asked=True``: the caller asked for progress by name (``gradcheck(..., progress=True)``),
    which ``ASGTEACH_NO_PROGRESS=1`` does not turn off.
    """
    stream = sys.stderr if stream is None else stream
    if stream is None or (os.environ.get(NO_PROGRESS_ENV) == "1" and not asked):
        return "off"
    return "bar" if _is_terminal(stream) or _is_notebook(stream) else "lines"


def describe() -> str:
    """One line for ``asgteach doctor``: what progress looks like from this process."""
    return {"bar": "a tqdm bar (stderr is a terminal or a notebook)",
            "lines": f"plain lines every 10 % or {EVERY_SECONDS:g} s (stderr is a file or a pipe, not a terminal)",
            "off": f"off ({NO_PROGRESS_ENV}=1)"}[mode()]


def _format(value: Any) -> str:
    """4 significant digits for a real number (numpy's float32 too), the text of anything else."""
    real = isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral)
    return f"{value:.4g}" if real else str(value)


class Progress:
    """A progress display over ``total`` units of work (``None``: not known in advance).

    Use it as a context manager, or call :meth:`close` at the end::

        with Progress(1000, "training", "step") as bar:
            for ...:
                bar.update(1, loss=loss)   # values shown beside the count

    ``show``: ``None`` shows progress unless ``ASGTEACH_NO_PROGRESS=1``; ``True`` shows it even
    then (asked for by name); ``False`` shows nothing. ``leave=False`` clears a bar at the end (in a
    log: no closing line); ``delay`` seconds pass before anything is shown, so quick loops stay silent.
    """

    def __init__(self, total: int | None, desc: str, unit: str, *, show: bool | None = None, leave: bool = True,
                 delay: float = 0.0, stream: TextIO | None = None) -> None:
        self.total, self.desc, self.unit, self.leave, self.delay = total, desc, unit, leave, delay
        self.stream = sys.stderr if stream is None else stream
        self.mode = "off" if show is False else mode(self.stream, asked=show is True)
        self.disable = self.mode == "off"
        self.n = 0
        self.values: dict[str, Any] = {}
        self._start = self._last_time = time.monotonic()
        self._last_tenth = 0
        self._printed_n: int | None = None
        self._bar: Any = None
        if self.mode == "bar":
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, desc=desc, unit=unit, leave=leave, delay=delay, file=self.stream)

    def update(self, n: int = 1, **values: Any) -> None:
        """``n`` more units done; ``values`` (``loss=0.12``) are shown beside the count."""
        self.n += n
        if values:
            self.values.update(values)
        if self.mode == "bar":
            self._bar.update(n)
            if values and (self.n % _VALUES_EVERY == 0 or self.n == self.total):
                self._bar.set_postfix({k: _format(v) for k, v in self.values.items()})
        elif self.mode == "lines":
            now = time.monotonic()
            tenth = self.n * 10 // self.total if self.total else 0
            due = tenth > self._last_tenth or now - self._last_time >= EVERY_SECONDS
            self._last_tenth = max(self._last_tenth, tenth)
            if due and now - self._start >= self.delay:
                self._line(now)

    def note(self, text: str) -> None:
        """What is being worked on now (``asgteach check``: the op's name); shown by the bar only."""
        if self.mode == "bar":
            self._bar.set_postfix_str(text)

    def close(self) -> None:
        """The end: a bar closes (and is cleared with ``leave=False``); a log gets its last line."""
        if self.mode == "bar":
            if self.values:
                self._bar.set_postfix({k: _format(v) for k, v in self.values.items()}, refresh=False)
            self._bar.close()
        elif self.mode == "lines" and self.leave and self._printed_n != self.n:
            now = time.monotonic()
            if now - self._start >= self.delay or self._printed_n is not None:
                self._line(now)
        self.mode, self.disable = "off", True  # closing twice does nothing

    def _line(self, now: float) -> None:
        units = self.unit if (self.total or self.n) == 1 else self.unit + "s"
        count = f"{self.n}/{self.total} {units} ({100 * self.n // self.total}%)" if self.total else f"{self.n} {units}"
        extra = "".join(f", {k} {_format(v)}" for k, v in self.values.items())
        self.stream.write(f"{self.desc}: {count}, {now - self._start:.1f} s{extra}\n")
        self.stream.flush()
        self._last_time, self._printed_n = now, self.n

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
