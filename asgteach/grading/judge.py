"""The judge of a graded course: each exercise's verdict, computed where the submission cannot reach.

A graded submission is hostile code. The judge keeps everything that decides a grade on its own side and
runs the submission somewhere that cannot touch it:

* **The submission** runs in a sandbox (:mod:`asgteach.grading.sandbox`: bubblewrap, new namespaces, its
  own read-only view of Python and asgteach, a private scratch folder, limits), in a process of its own,
  :mod:`asgteach.grading.probe`, which runs the notebook's cells one by one when the judge says so: the
  instructor's cells (from the course's ``source/`` notebook, not the submission's copy), the answers,
  the cells the student added.
* **The checks** run here, in the judge's process (a worker started for this one notebook), with the
  judge's own numpy and asgteach, which the submission never touched, and the answer keys, which the
  sandbox never has. A check cell's code runs as written; the names it reads that the instructor's cells
  imported (``np``, ``at``, ``check_array``, ``lesson16``...) are the judge's own imports, every other name
  (``to_bfloat16``, ``dZ2``, ``model16``...) is read from the submission's process, as plain data
  (:mod:`asgteach.grading.wire`: numbers, arrays, graphs as JSON) or as a handle to call
  (:mod:`asgteach.grading.remote`). When a check calls the student's function, the arguments travel to the
  sandbox as data, the function runs there, its result comes back as data, and the comparison with the
  reference happens here.
* **The verdict** is the check's outcome here: it passed when the check cell ran to its end, else its
  :class:`~asgteach.grading.exercises.ExerciseError` says why. There is no channel from the submission to
  a verdict: the sandbox is asked for values, never for a result.
* **The answer's source** is read first (:mod:`asgteach.grading.rules`): the hands-off rule of every graded
  answer and the exercise's own rule (its library stand-ins, "no asgteach", complex steps, Python loops).
  A cell that breaks one fails its exercise, whatever its numbers, and does not run at all (so nothing it
  imports or binds reaches a later exercise's answer). Rules are read from source text because what the
  sandbox reports about itself cannot be trusted.

Time: each cell and each call into the submission has :attr:`Limits.request_time`, the whole submission
:attr:`Limits.time`. A cell or call that runs past it ends the sandbox (every process in it) and fails the
exercise it belongs to; a new sandbox replays the cells before the next check (skipping the answers of the
exercises that already failed that way), so one hang costs one exercise, never the next student.

``python -m asgteach.grading.judge`` is the worker: it reads a job (the notebook, the lesson, the course's
source notebook and keys) as JSON on stdin and writes the verdicts and the cells' outputs as JSON on stdout.
:func:`judge_in_worker` starts it (nbgrader's preprocessor, :mod:`asgteach.grading.judge_nbgrader`, calls that).
See docs/teaching.md, "What graded mode guarantees".
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from .rules import HANDS_OFF, problems, rule_for
from .sandbox import Limits, require
from .wire import IMPORTABLE

__all__ = ["Verdict", "Limits", "notebook_cells", "judge_notebook", "judge_in_worker", "apply_verdicts",
           "apply_outputs", "TIMEOUT"]

#: seconds the worker may take for one notebook, on top of the submission's own limit (starting, checking)
TIMEOUT = 900

_CHECK_ID = re.compile(r"^exercise-(\d+)-check$")
_ANSWER_ID = re.compile(r"^exercise-(\d+)(?:-\d+)*$")


@dataclass(frozen=True)
class Verdict:
    """One exercise's result: passed or not, the message a student reads, the check's printed output."""

    exercise: int
    passed: bool
    message: str = ""
    output: str = ""


def _source(cell: Any) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def notebook_cells(nb: dict[str, Any], source_nb: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The code cells of a course notebook as the judge runs them: kind, source, exercise, index, id.

    Kinds from nbgrader's metadata: a solution cell is an ``answer`` (of the exercise its ``grade_id``
    names), a locked grade cell ``exercise-N-check`` a ``check``, any other locked cell ``context``, and a
    cell without metadata (added by the student) ``other``: it runs as submitted code, counted with the
    next exercise. With ``source_nb`` (the instructor's notebook), ``context`` and ``check`` cells take their
    source from it, by cell id: what the submission's copy says of them does not matter.
    """
    instructor = {}
    if source_nb is not None:
        instructor = {c.get("id"): _source(c) for c in source_nb.get("cells", []) if c.get("cell_type") == "code"}
    out: list[dict[str, Any]] = []
    next_exercise: int | None = None
    code_cells = [(i, c) for i, c in enumerate(nb.get("cells", [])) if c.get("cell_type") == "code"]
    for index, cell in reversed(code_cells):   # an added cell belongs to the exercise that follows it
        meta = (cell.get("metadata") or {}).get("nbgrader") or {}
        grade_id = meta.get("grade_id", "")
        check, answer = _CHECK_ID.match(grade_id), _ANSWER_ID.match(grade_id)
        if meta.get("grade") and meta.get("locked") and check:
            kind, n = "check", int(check.group(1))
            next_exercise = n
        elif meta.get("solution") and answer:
            kind, n = "answer", int(answer.group(1))
        elif meta.get("locked"):
            kind, n = "context", None
        else:
            kind, n = "other", next_exercise
        source = _source(cell)
        if kind in ("context", "check") and source_nb is not None:
            if cell.get("id") not in instructor:
                kind, n = "other", next_exercise     # a "locked" cell the course never had: the student's
            else:
                source = instructor[cell.get("id")]
        out.append({"kind": kind, "source": source, "exercise": n, "index": index, "id": cell.get("id")})
    return out[::-1]


def _rule_problems(cells: list[dict[str, Any]], lesson: str) -> dict[int, str]:
    """exercise -> why it fails on its source: its own cells break a rule, or use what an earlier cell smuggled in."""
    found: dict[int, str] = {}
    for cell in cells:
        n = cell["exercise"]
        if cell["kind"] not in ("answer", "other") or n is None or n in found:
            continue
        for rule in (HANDS_OFF, rule_for(lesson, n)):
            if rule is None:
                continue
            bad = problems(cell["source"], rule)
            if bad:
                found[n] = (f"exercise {n}: your answer cell {bad[0]}, which a graded answer may not: {rule.why}")
                break
    for i, cell in enumerate(cells):
        n = cell["exercise"]
        rule = rule_for(lesson, n) if n is not None and cell["kind"] in ("answer", "other") else None
        if rule is None or n in found:
            continue
        smuggled = _smuggled(cells[:i], n, rule)
        used = _names_read(cell["source"]) & set(smuggled)
        if used:
            name = sorted(used)[0]
            found[n] = (f"exercise {n}: your answer uses {name}, which an earlier cell made from what this exercise's "
                        f"answer may not use ({smuggled[name]}): {rule.why}")
    return found


def _smuggled(earlier: list[dict[str, Any]], n: int, rule: Any) -> dict[str, str]:
    """Names that earlier answer cells (of other exercises) bind to what exercise ``n``'s rule refuses: a function or
    class whose code uses it, an alias of it (``go = at.run``, an import, a default argument), not a plain value
    computed with it (``s_value = at.run(s, feeds)`` is data). name -> the problem, as problems() words it."""
    out: dict[str, str] = {}
    for cell in earlier:
        if cell["kind"] not in ("answer", "other") or cell["exercise"] == n:
            continue
        try:
            tree = ast.parse("\n".join(("pass" if ln.lstrip().startswith(("%", "!")) else ln)
                                       for ln in cell["source"].splitlines()))
        except SyntaxError:
            continue
        todo: list[ast.stmt] = list(tree.body)
        while todo:
            stmt = todo.pop(0)
            if isinstance(stmt, (ast.With, ast.If, ast.For, ast.While, ast.Try)):
                todo.extend(c for c in ast.iter_child_nodes(stmt) if isinstance(c, ast.stmt))
                continue
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
                parts, names = [stmt], _bound_by(stmt)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                value = stmt.value
                parts = ([*value.args, *(k.value for k in value.keywords)] if isinstance(value, ast.Call)
                         else [value])          # a call's result is data; what it is handed may be a reference
                names = _bound_by(stmt)
            else:
                continue
            for part in parts:
                bad = problems(ast.unparse(part), rule)
                if bad:
                    for name in names:
                        out.setdefault(name, bad[0].split(": ", 1)[-1])
                    break
    return out


def _bound_by(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    return {t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name)}


def _names_read(source: str) -> set[str]:
    try:
        tree = ast.parse("\n".join(("pass" if ln.lstrip().startswith(("%", "!")) else ln)
                                   for ln in source.splitlines()))
    except SyntaxError:
        return set()
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}


# --- the names a check reads ---------------------------------------------------------------------------

def _imports(source: str) -> list[ast.stmt]:
    """The import statements of a cell (at any depth outside functions): what the judge imports itself."""
    try:
        tree = ast.parse("\n".join(("pass" if ln.lstrip().startswith(("%", "!")) else ln)
                                   for ln in source.splitlines()))
    except SyntaxError:
        return []
    found: list[ast.stmt] = []
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo.extend(n for n in ast.iter_child_nodes(node) if isinstance(n, ast.stmt))
    return found


def trusted_names(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """The judge's own imports of what the instructor's cells import (``np``, ``at``, ``check_array``...)."""
    ns: dict[str, Any] = {"__name__": "__check__", "__builtins__": builtins}
    for cell in cells:
        if cell["kind"] not in ("context", "check"):
            continue
        for stmt in _imports(cell["source"]):
            names = [a.name for a in stmt.names] if isinstance(stmt, ast.Import) else [stmt.module or ""]
            if isinstance(stmt, ast.ImportFrom) and stmt.level or not all(
                    any(n == m or n.startswith(m + ".") for m in IMPORTABLE) for n in names):
                continue          # only the libraries a check may use here (a notebook's cell is not code to trust)
            module = ast.Module(body=[stmt], type_ignores=[])
            try:
                exec(compile(module, "<instructor's imports>", "exec"), ns)   # noqa: S102 - the instructor's lines
            except Exception as e:  # noqa: BLE001 - an optional library missing here is the check's problem
                print(f"[judge] the instructor's import failed here: {ast.unparse(stmt)}: {e}", file=sys.stderr)
    return ns


class CheckNamespace(dict):
    """A check cell's globals: the judge's own imports first, then the submission's values, read on demand."""

    def __init__(self, trusted: dict[str, Any], sandbox: "Submission") -> None:
        super().__init__(trusted)
        self._sandbox = sandbox

    def __missing__(self, name: str) -> Any:
        if hasattr(builtins, name):
            raise KeyError(name)        # the interpreter goes on to the builtins
        return self._sandbox.name(name)


# --- one submission in its sandbox -----------------------------------------------------------------------

class SubmissionStopped(RuntimeError):
    """The sandbox ended: a cell or a call ran past its time, or the submission ended its process."""


class Submission:
    """The sandbox that runs one submission, and the judge's end of its channel (with the watchdog)."""

    def __init__(self, limits: Limits) -> None:
        from .remote import Endpoint
        from .sandbox import spawn

        self.limits = limits
        self.proc = spawn(limits)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.endpoint = Endpoint("judge", self.proc.stdout, self.proc.stdin)
        self.timed_out = False

    def _kill(self) -> None:
        """Called by the watchdog thread: end the sandbox; the waiting read then sees the channel close."""
        self.timed_out = True
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 9)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()

    def ask(self, seconds: float, op: str, **payload: Any) -> Any:
        """One request with a deadline: past it the sandbox is ended and SubmissionStopped raised."""
        from .remote import ProtocolError

        if self.proc.poll() is not None:
            raise SubmissionStopped("the submission's process has ended")
        timer = threading.Timer(max(0.1, seconds), self._kill)
        timer.start()
        try:
            return self.endpoint.request(op, **payload)
        except (ProtocolError, EOFError) as e:
            if self.timed_out:
                raise SubmissionStopped(f"it ran past {seconds:.0f} s and was stopped") from None
            raise SubmissionStopped(f"the submission's process ended ({e})") from None
        finally:
            timer.cancel()

    def name(self, name: str) -> Any:
        from .remote import Remote

        value = self.ask(self.limits.request_time, "name", name=name)
        return _watched(value, self) if isinstance(value, Remote) else value

    def stop(self) -> None:
        """End the sandbox: its first process dies and, with its PID namespace, every process in it."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 9)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=30)
        for f in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(Exception):
                f.close()


def _watched(value: Any, submission: Submission) -> Any:
    """A handle whose calls into the submission keep the per-request time limit."""
    endpoint = value._endpoint
    if getattr(endpoint, "_watchdog", None) is None:
        original = endpoint.request

        def request(op: str, **payload: Any) -> Any:
            if endpoint._depth:
                return original(op, **payload)
            endpoint._depth += 1
            timer = threading.Timer(max(0.1, submission.limits.request_time), submission._kill)
            timer.start()
            try:
                return original(op, **payload)
            except Exception as e:
                if submission.timed_out:
                    raise SubmissionStopped(f"a call into the submission ran past {submission.limits.request_time:.0f}"
                                            " s and was stopped") from None
                from .remote import ProtocolError

                if isinstance(e, (ProtocolError, EOFError)):
                    raise SubmissionStopped(f"the submission's process ended ({e})") from None
                raise
            finally:
                timer.cancel()
                endpoint._depth -= 1

        endpoint._depth = 0
        endpoint._watchdog = request
        endpoint.request = request
    return value


def _defines_what_is_read(source: str, later: list[str]) -> bool:
    """Does the cell ``source`` bind a name (outside functions) that one of the ``later`` cells mentions?"""
    try:
        tree = ast.parse("\n".join(("pass" if ln.lstrip().startswith(("%", "!")) else ln)
                                   for ln in source.splitlines()))
    except SyntaxError:
        return False
    bound: set[str] = set()
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        if not isinstance(node, ast.Lambda):
            todo.extend(ast.iter_child_nodes(node))
    text = "\n".join(later)
    return any(re.search(rf"\b{re.escape(name)}\b", text) for name in bound)


def _run_check(n: int, source: str, trusted: dict[str, Any], submission: Submission) -> tuple[str | None, str]:
    """Run check cell ``n`` here, reading the submission's names through ``submission``: (failure, output)."""
    from . import exercises
    from .exercises import ExerciseError

    state = submission.ask(submission.limits.request_time, "status", n=n)
    if state in (exercises.NOT_DONE, exercises.DONE, exercises.FAILED):
        exercises._STATUS[n] = state
    else:
        exercises._STATUS.pop(n, None)
    ns = CheckNamespace(trusted, submission)
    exercises.SUBMISSION_SIDE = lambda dotted: submission.ask(submission.limits.request_time, "helper",
                                                               name=dotted)
    out = io.StringIO()
    message = None
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(source, f"<check {n}>", "exec"), ns)   # noqa: S102 - the instructor's check cell
    except ExerciseError as e:
        message = str(e)
    except SubmissionStopped as e:
        message = f"exercise {n}: the submission was stopped while the check ran: {e}"
    except BaseException as e:  # noqa: BLE001 - any error in a check cell is a failed check
        if isinstance(e, KeyboardInterrupt):
            raise
        message = f"exercise {n}: the check stopped with {type(e).__name__}: {str(e)[:2000]}"
    if message is not None and not message.startswith(f"exercise {n}"):
        message = f"exercise {n}: {message}"
    return message, out.getvalue()[-4000:]


def judge_notebook(nb: dict[str, Any], lesson: str, source_nb: dict[str, Any] | None = None,
                   limits: Limits | None = None) -> dict[int, Verdict]:
    """Every exercise's verdict for the course notebook ``nb`` of ``lesson`` (its stem), in this process.

    ``source_nb`` is the instructor's notebook (the context and check cells are taken from it). The cells'
    outputs are left in ``judge_notebook.outputs`` of the returned dict's owner: see :func:`judge_with_outputs`.
    """
    return judge_with_outputs(nb, lesson, source_nb, limits)[0]


def judge_with_outputs(nb: dict[str, Any], lesson: str, source_nb: dict[str, Any] | None = None,
                       limits: Limits | None = None) -> tuple[dict[int, Verdict], dict[int, dict]]:
    """(verdicts, outputs): each exercise's verdict and, per cell index, what the cell printed in the sandbox."""
    require()
    from . import exercises as _exercises

    was = _exercises.IN_JUDGE, _exercises.SUBMISSION_SIDE
    _exercises.IN_JUDGE = True            # the checks' runtime watches stand down: the answers run elsewhere
    try:
        return _judge(nb, lesson, source_nb, limits or Limits())
    finally:
        _exercises.IN_JUDGE, _exercises.SUBMISSION_SIDE = was


def _judge(nb: dict[str, Any], lesson: str, source_nb: dict[str, Any] | None,
           limits: Limits) -> tuple[dict[int, Verdict], dict[int, dict]]:
    cells = notebook_cells(nb, source_nb)
    exercises = sorted({c["exercise"] for c in cells if c["kind"] == "check"})
    broken = _rule_problems(cells, lesson)
    trusted = trusted_names(cells)
    verdicts: dict[int, Verdict] = {}
    outputs: dict[int, dict] = {}
    stopped: set[int] = set()            # exercises whose answer or check ended a sandbox
    deadline = time.monotonic() + limits.time
    submission: Submission | None = None

    def remaining() -> float:
        return deadline - time.monotonic()

    def fresh(upto: int) -> Submission:
        """A new sandbox that has run the cells before ``upto`` (not the answers of stopped exercises)."""
        sub = Submission(limits)
        for j, c in enumerate(cells[:upto]):
            if c["kind"] == "check":
                if _defines_what_is_read(c["source"], [d["source"] for d in cells[j + 1:]]):
                    sub.ask(min(limits.request_time, remaining()), "cell", source=c["source"],
                            label=f"check {c['exercise']}, for its definitions", limit=limits.output)
                continue
            if c["kind"] != "context" and (c["exercise"] in stopped or c["exercise"] in broken):
                continue
            sub.ask(min(limits.request_time, remaining()), "cell", source=c["source"], label=f"cell {c['index']}",
                    limit=limits.output)
        return sub

    try:
        for i, cell in enumerate(cells):
            n = cell["exercise"]
            if remaining() <= 0:
                break
            try:
                if submission is None or submission.proc.poll() is not None:
                    if submission is not None:
                        submission.stop()
                    submission = fresh(i)
                if cell["kind"] != "check":
                    if cell["kind"] != "context" and (n in stopped or n in broken):
                        continue          # a cell that broke its rule does not run: what it binds reaches no check
                    result = submission.ask(min(limits.request_time, remaining()), "cell", source=cell["source"],
                                            label=f"cell {cell['index']}", limit=limits.output)
                    outputs[cell["index"]] = result if isinstance(result, dict) else {}
                    continue
                if n in broken:
                    verdicts[n] = Verdict(n, False, broken[n])
                elif n in stopped and n in verdicts:
                    pass                  # its answer ended a sandbox: that is its verdict
                else:
                    message, printed = _run_check(n, cell["source"], trusted, submission)
                    verdicts[n] = Verdict(n, message is None, message or "", printed)
                    if submission.timed_out:
                        stopped.add(n)
                later = [d["source"] for d in cells[i + 1:]]
                if submission.proc.poll() is None and _defines_what_is_read(cell["source"], later):
                    submission.ask(min(limits.request_time, remaining()), "cell", source=cell["source"],
                                   label=f"check {n}, for its definitions", limit=limits.output)
            except SubmissionStopped as e:
                if n is not None:
                    stopped.add(n)
                    if n not in verdicts:
                        verdicts[n] = Verdict(n, False, f"exercise {n}: the submission was stopped: {e}")
                if submission is not None:
                    submission.stop()
                submission = None
    finally:
        if submission is not None:
            submission.endpoint.bye()
            submission.stop()
    why = f"the submission used up its {limits.time:.0f} s" if remaining() <= 0 else "the judge stopped"
    for n in exercises:
        if n in broken:
            verdicts[n] = Verdict(n, False, broken[n], verdicts[n].output if n in verdicts else "")
        elif n not in verdicts:
            verdicts[n] = Verdict(n, False, f"exercise {n}: no verdict: {why}")
    return verdicts, outputs


# --- the worker: one notebook, one process ------------------------------------------------------------------

def judge_in_worker(nb: dict[str, Any], lesson: str, source_nb: dict[str, Any] | None = None,
                    keys: str | os.PathLike | None = None, limits: Limits | None = None,
                    python: str | None = None) -> tuple[dict[int, Verdict], dict[int, dict]]:
    """:func:`judge_with_outputs` in a fresh worker process (its own library, its own keys), for nbgrader."""
    limits = limits or Limits()
    require()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JPY_", "JUPYTER"))}
    env.update(MPLBACKEND="Agg", ASGTEACH_NO_PROGRESS="1", PYTHONDONTWRITEBYTECODE="1")
    if keys is not None:
        env["ASGTEACH_KEYS"] = str(keys)
    job = {"nb": nb, "lesson": lesson, "source_nb": source_nb,
           "limits": {k: v for k, v in asdict(limits).items() if k != "extra_env"}}
    exercises = sorted({c["exercise"] for c in notebook_cells(nb, source_nb) if c["kind"] == "check"})
    try:
        proc = subprocess.run([python or sys.executable, "-m", "asgteach.grading.judge"], input=json.dumps(job),
                              capture_output=True, text=True, timeout=limits.time + TIMEOUT, env=env)
        result, why = json.loads(proc.stdout or "null"), f"the judge's worker stopped: {proc.stderr[-2000:]}"
    except subprocess.TimeoutExpired:
        result, why = None, "the judge's worker ran past its time"
    except ValueError:
        result, why = None, "the judge's worker wrote no result"
    if not isinstance(result, dict):
        return {n: Verdict(n, False, f"exercise {n}: no verdict: {why}") for n in exercises}, {}
    verdicts = {int(v["exercise"]): Verdict(**v) for v in result["verdicts"]}
    outputs = {int(k): v for k, v in result["outputs"].items()}
    return verdicts, outputs


def main() -> int:
    """The worker: a job on stdin, the verdicts and outputs on stdout (the rest of its output to stderr)."""
    job = json.loads(sys.stdin.read())
    channel = os.dup(1)
    os.dup2(2, 1)                       # what the checks print to fd 1 must not mix with the result
    sys.stdout = sys.stderr
    limits = Limits(**job.get("limits", {}))
    verdicts, outputs = judge_with_outputs(job["nb"], job["lesson"], job.get("source_nb"), limits)
    result = {"verdicts": [asdict(v) for v in verdicts.values()],
              "outputs": {str(k): v for k, v in outputs.items()}}
    os.write(channel, json.dumps(result).encode())
    os.close(channel)
    return 0


# --- writing the verdicts into the notebook ---------------------------------------------------------------------

def apply_verdicts(nb: dict[str, Any], verdicts: dict[int, Verdict]) -> dict[str, Any]:
    """Write each verdict into its check cell's outputs (in place; returns ``nb``).

    A pass: the check's printed lines and ``exercise N passed``; a failure: one error output,
    ``ExerciseError`` with the message (nbgrader scores a test cell with an error 0).
    """
    for cell in nb.get("cells", []):
        meta = (cell.get("metadata") or {}).get("nbgrader") or {}
        m = _CHECK_ID.match(meta.get("grade_id", ""))
        if cell.get("cell_type") != "code" or not (meta.get("grade") and m) or int(m.group(1)) not in verdicts:
            continue
        v = verdicts[int(m.group(1))]
        if v.passed:
            text = v.output if v.output.endswith("\n") or not v.output else v.output + "\n"
            cell["outputs"] = [{"output_type": "stream", "name": "stdout",
                                "text": text + f"exercise {v.exercise} passed (graded by the judge)\n"}]
        else:
            cell["outputs"] = [{"output_type": "error", "ename": "ExerciseError", "evalue": v.message,
                                "traceback": [f"ExerciseError: {v.message}"]}]
    return nb


def apply_outputs(nb: dict[str, Any], outputs: dict[int, dict]) -> dict[str, Any]:
    """Write what each non-check cell printed in the sandbox into its outputs, for the feedback (in place)."""
    cells = nb.get("cells", [])
    for index, result in outputs.items():
        if not 0 <= index < len(cells) or cells[index].get("cell_type") != "code":
            continue
        out = []
        text = str(result.get("output") or "")
        if text:
            out.append({"output_type": "stream", "name": "stdout", "text": text})
        error = result.get("error")
        if isinstance(error, dict):
            name = str(error.get("type", "Error"))
            tb = str(error.get("text", ""))
            out.append({"output_type": "error", "ename": name, "evalue": tb.strip().splitlines()[-1] if tb else "",
                        "traceback": tb.splitlines()})
        cells[index]["outputs"] = out
    return nb


if __name__ == "__main__":
    sys.exit(main())
