"""The submission's side of a graded run: runs its cells and answers the judge, inside the sandbox.

``python -m asgteach.grading.probe`` is what :mod:`asgteach.grading.sandbox` starts. Its stdin and stdout
are the channel to the judge (:mod:`asgteach.grading.remote`); the cells' own output goes to a file per
cell instead, which the judge reads back (capped) and shows in the feedback. It serves:

* ``cell``: run one cell of the notebook (an instructor's cell, an answer, or a check cell run for the
  names it defines), in one namespace, as a kernel would; the reply is the error it stopped with (as text)
  and what it printed;
* ``status``: what ``exercise(N)`` recorded (not done, done, failed);
* ``name``: a value of the namespace (a check reads ``chain_rule_grads``, ``dZ2``...);
* and, on what it handed out, calls, attributes, items.

Nothing here is trusted. The submission owns this process: it can replace any of this code, answer
anything it likes, or stop. That is the design: the judge never asks this process for a verdict, only
for the submission's values, which it checks itself against references it computed in its own process
(:mod:`asgteach.grading.judge`).
"""

from __future__ import annotations

import io
import os
import sys
import traceback
from typing import Any, BinaryIO

__all__ = ["main", "run_cell"]


def _code(source: str) -> str:
    """A cell's source as Python: IPython's ``%magic`` and ``!shell`` lines become ``pass``."""
    return "\n".join(("pass" if line.lstrip().startswith(("%", "!")) else line) for line in source.splitlines())


def run_cell(source: str, ns: dict, filename: str, out_path: str, limit: int) -> dict:
    """Run one cell in ``ns`` with fd 1 and 2 going to ``out_path``; its error (text) and output (capped)."""
    import linecache

    code = _code(source)
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)  # inspect.getsource
    sys.stdout.flush()
    sys.stderr.flush()
    with open(out_path, "w+b") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        error = None
        try:
            exec(compile(code, filename, "exec"), ns)   # noqa: S102 - running the notebook is this process's job
        except BaseException as e:  # noqa: BLE001 - a failing cell does not stop the notebook (as in nbgrader)
            if isinstance(e, KeyboardInterrupt):
                raise
            error = {"type": type(e).__name__, "text": "".join(traceback.format_exception(type(e), e,
                                                                                            e.__traceback__))[-limit:]}
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - a submission may have replaced them
            pass
        log.seek(0)
        output = log.read(limit).decode("utf-8", errors="replace")
    return {"error": error, "output": output}


def main() -> int:
    channel_in: BinaryIO = os.fdopen(os.dup(0), "rb", buffering=0)
    channel_out: BinaryIO = os.fdopen(os.dup(1), "wb", buffering=0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", buffering=0), write_through=True)
    sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", buffering=0), write_through=True)
    os.environ.setdefault("MPLBACKEND", "Agg")

    import numpy  # noqa: F401 - loaded before the cells, as a kernel would have it

    import asgteach  # noqa: F401

    from .exercises import status
    from .remote import Endpoint

    ns: dict[str, Any] = {"__name__": "__main__"}
    counter = iter(range(1, 10**9))

    def cell(source: str, label: str = "cell", limit: int = 65536) -> dict:
        path = f"/tmp/cell-{next(counter)}.out" if os.path.isdir("/tmp") else os.devnull
        return run_cell(str(source), ns, f"<{label}>", path, int(limit))

    def exercise_status(n: int) -> str | None:
        return status(int(n))

    def helper(name: str) -> Any:
        """An object of the course's package, here (asgteach.grading.exercises.on_submission_side)."""
        import importlib

        name = str(name)
        if not name.startswith("asgteach.lessons."):
            raise PermissionError(f"not an object of the course's package: {name}")
        module, _, attr = name.rpartition(".")
        return getattr(importlib.import_module(module), attr)

    endpoint = Endpoint("sandbox", channel_in, channel_out, namespace=ns,
                        extra={"cell": cell, "status": exercise_status, "helper": helper})
    endpoint.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
