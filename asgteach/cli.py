"""The ``asgteach`` command: start the course, check an install, see a first graph.

    asgteach lab      JupyterLab on your exercises (the lessons, solutions cut out; --solutions: the lessons), 127.0.0.1
    asgteach solution one exercise's solution, for a learner stuck after trying (asgteach solution 03 1; a checkout's)
    asgteach demo     headless: the example graph, a small model trained, a static HTML page of its graph
    asgteach check    gradcheck of every registry op on numpy (float64), parity of every op on wgpu
    asgteach doctor   front-end, versions, Jupyter extensions, GPU adapters, and what to install for what is missing
    asgteach student  student versions of the lessons: solutions cut out, outputs cleared
    asgteach course   the lessons as an nbgrader course directory (solution, autograded and read-only cells)
    asgteach link     the nbgitpuller link that pulls the lessons into each student's home on a JupyterHub

Every subcommand is a small function that returns an exit code; ``main`` only parses arguments.
The work itself lives in modules named for it: :mod:`asgteach.demo`, :mod:`asgteach.opcheck`,
:mod:`asgteach.doctor`, :mod:`asgteach.course` and :mod:`asgteach.grading.student`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Sequence

from . import __version__
from .demo import example_graph
from .doctor import installed_version

__all__ = ["main", "build_parser", "example_graph", "explain"]


def explain(problem: str, fix: str) -> str:
    """One paragraph for a problem a newcomer meets: what happened, then the fix (wrapped for a terminal)."""
    return textwrap.fill(f"{problem} Fix: {fix}", width=100)


def _backend_or_explain(name: str) -> bool:
    """True if backend ``name`` runs here; otherwise print why and how to get it (stderr) and return False."""
    from .backends import BackendUnavailable, get_backend

    try:
        get_backend(name)
    except BackendUnavailable as e:
        print(explain(f"asgteach: the {name} backend was asked for, but it cannot run on this machine: {e}",
                      "install what is named above, check with `asgteach doctor`, or use --backend numpy "
                      "(always available; 'auto' picks wgpu only when it works)."), file=sys.stderr)
        return False
    return True


def _backends_line() -> str:
    """One line on which backends run here: numpy always, wgpu when a Vulkan adapter exists."""
    from .backends import describe

    info = describe()["wgpu"]
    if info.get("available"):
        cpu = " - a CPU Vulkan driver: correct, but slow" if info.get("cpu_adapter") else ""
        return (f"backends: numpy (the default) and wgpu on {info.get('adapter')}{cpu}; "
                f"use backend='wgpu' (or 'auto') to run on it")
    reason = str(info.get("reason", "")).split(";")[0]
    return f"backends: numpy only (wgpu: {reason}; `asgteach doctor` says what to install)"


# ---------------------------------------------------------------------------------------------------------------
# asgteach check
# ---------------------------------------------------------------------------------------------------------------

def cmd_check(args: argparse.Namespace) -> int:
    """Gradcheck every registry op on numpy (float64) and check every op's parity on wgpu; print a table."""
    import asgteach as at
    from asgteach import opcheck, resources
    from asgteach.ops.registry import REGISTRY

    where = "checkout" if resources.is_checkout() else "installed"
    print(f"asgteach {at.__version__} ({where}: {resources.package_dir()})")
    numpy, wgpu = installed_version("numpy"), installed_version("wgpu") or "-"
    print(f"python {platform.python_version()}, numpy {numpy}, wgpu {wgpu}")
    print("backends:")
    for name, info in at.describe().items():
        state = ("available" if info.get("available")
                 else f"not available - {str(info.get('reason', 'unknown reason')).split(';')[0]}")
        detail = f" ({info['adapter']})" if info.get("adapter") else ""
        print(f"  {name:6s} {state}{detail}")

    if args.backend == "all":
        backends = at.available()
    else:
        if not _backend_or_explain(args.backend):
            return 1
        backends = [args.backend]
    ops = args.op or [n for n, s in REGISTRY.items() if not s.leaf]
    unknown = [o for o in ops if o not in REGISTRY or REGISTRY[o].leaf]
    if unknown:
        known = ", ".join(n for n, s in REGISTRY.items() if not s.leaf)
        print(f"asgteach check: no such op: {', '.join(unknown)} (ops: {known})", file=sys.stderr)
        return 2
    print(f"checking {len(ops)} op(s) on {', '.join(backends)}: numpy = float64 gradient check (autograd vs "
          f"central differences); other backends = float32 value and gradients vs numpy float64")
    results = opcheck.sweep(backends, ops, progress=False if args.no_progress else None)
    print(opcheck.format_table(results, backends))
    failed = [r for r in results if not r.ok]
    if failed:
        names = ", ".join(f"{r.op} ({', '.join(b for b, (ok, _) in r.results.items() if not ok)})" for r in failed)
        print(f"NOT OK: {len(failed)} of {len(results)} ops failed: {names}")
        return 1
    print(f"OK: asgteach works here ({len(results)} ops checked; backends: {', '.join(backends)})")
    return 0


# ---------------------------------------------------------------------------------------------------------------
# asgteach demo
# ---------------------------------------------------------------------------------------------------------------

def cmd_demo(args: argparse.Namespace) -> int:
    """The example graph, XOR trained with the loss printed, and a static HTML page of the trained graph."""
    from . import demo

    if args.backend != "numpy" and args.backend != "auto" and not _backend_or_explain(args.backend):
        return 1
    backend = args.backend
    if backend == "auto":
        from .backends import available

        backend = "wgpu" if "wgpu" in available() else "numpy"
    print("== 1. a graph and its gradient graph ==")
    ok = demo.print_example(sys.stdout, seed=args.seed, backend=backend)
    print()
    print("== 2. a small model, trained ==")
    loss, history, _ = demo.train_xor(sys.stdout, steps=args.steps, seed=args.seed, backend=backend)
    falling = history[-1] < history[0]
    print(f"  loss {history[0]:.4f} -> {history[-1]:.6f} ({'falling' if falling else 'NOT falling'})")
    print()
    print("== 3. the graph, as a page ==")
    path = demo.write_graph_page(loss, args.out, title="asgteach demo: XOR, forward and backward")
    print(f"wrote {path}")
    print("open it in a browser; in Jupyter, at.show(loss) draws the same graph and you can click its nodes")
    return 0 if ok and falling else 1


# ---------------------------------------------------------------------------------------------------------------
# asgteach doctor
# ---------------------------------------------------------------------------------------------------------------

def cmd_doctor(args: argparse.Namespace) -> int:
    """Versions, Jupyter extensions, adapters; for each missing piece, what to install. Exit 1 if one is needed."""
    from . import doctor

    findings = doctor.diagnose()
    if args.json:
        print(doctor.as_json(findings))
    else:
        print(f"asgteach doctor - python {platform.python_version()} ({sys.executable}) on {platform.platform()}")
        print(doctor.format_findings(findings))
    needed = [f for f in findings if not f.ok and f.level != "optional"]
    if not args.json:
        print()
        print("NOT READY: fix the items marked [needed] or [for the notebooks] above" if needed else
              "READY: everything the course needs is here" + ("" if all(f.ok for f in findings)
                                                               else " (optional parts are absent, see above)"))
    return 1 if needed else 0


# ---------------------------------------------------------------------------------------------------------------
# asgteach lab
# ---------------------------------------------------------------------------------------------------------------

def _jupyterlab_missing() -> str | None:
    try:
        import jupyterlab  # noqa: F401
    except ImportError as e:
        return str(e)
    return None


def _exercises_workspace() -> tuple[Path, str]:
    """The learner's folder of the lessons with the exercises open (solutions cut out), and where it came from.

    The student version of every lesson (``asgteach student``'s cut) is written into the copy folder
    (``$ASGTEACH_LESSONS_DIR``, else a checkout's build/student-lessons, else ./asgteach-lessons, else
    ~/asgteach-lessons) when it is not there yet; a notebook already there is the learner's and is never
    overwritten. Data files come along.
    """
    from . import resources
    from .course import copy_lessons, default_copy_target
    from .grading.student import make_student_notebook, read_notebooks

    source, target = resources.lessons_dir(), default_copy_target()
    if resources.is_checkout() and not os.environ.get("ASGTEACH_LESSONS_DIR", "").strip():
        target = resources.package_dir().parent / "build" / "student-lessons"   # git-ignored, as scripts/lab's
    lessons = [(path, *make_student_notebook(nb, str(path))) for path, nb in read_notebooks(source, "lessons")]
    target.mkdir(parents=True, exist_ok=True)
    added = []
    for path, nb, _ in lessons:
        dest = target / path.name
        if not dest.exists():
            dest.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
            added.append(path.name)
    copy_lessons(source, target)   # the data files; the notebooks are there now, so none is copied over them
    note = f"{len(added)} lesson(s) written now" if added else "made earlier; your answers are kept"
    if resources.solutions_dir() is not None:
        stuck = "`asgteach solution LESSON N` shows one; `asgteach lab --solutions` opens the instructor's"
    else:   # an installed wheel: its lessons are the student versions, the solutions are in the repository
        stuck = "a checkout of the course's repository has the solutions (`asgteach solution --help` says how)"
    return target, f"your exercises: the lessons with each solution cut out ({note}). Stuck after trying? {stuck}"


def cmd_lab(args: argparse.Namespace, jupyter_args: Sequence[str]) -> int:
    """Start JupyterLab on the learner's exercises (or, with --solutions, the lessons), listening on 127.0.0.1."""
    from .course import SolutionsNotHere, lessons_workspace

    missing = _jupyterlab_missing()
    if missing is not None and not args.copy_only:
        print(explain(f"asgteach lab starts JupyterLab, but JupyterLab cannot be imported in this Python "
                      f"({sys.executable}: {missing}). asgteach itself is installed; the notebook server is an "
                      f"extra.", "pip install 'asgteach[lab]' (JupyterLab 4, Notebook 7 and ipykernel) in this same "
                      "environment, then run `asgteach lab` again; `asgteach doctor` checks the rest."),
              file=sys.stderr)
        return 1
    try:
        folder, origin = (lessons_workspace(args.dir, solutions=args.solutions) if (args.solutions or args.dir)
                          else _exercises_workspace())
    except SolutionsNotHere as e:   # an installed wheel: the student versions only
        print(textwrap.fill(f"asgteach lab: {e}", width=100, break_on_hyphens=False), file=sys.stderr)
        return 1
    except (OSError, ValueError) as e:
        print(f"asgteach lab: {e}", file=sys.stderr)
        return 1
    if not folder.is_dir():
        print(f"asgteach lab: no such folder: {folder}", file=sys.stderr)
        return 1
    print(f"lessons: {folder} ({origin})")
    if args.copy_only:
        return 0
    print(_backends_line(), flush=True)
    cmd = [sys.executable, "-m", "jupyterlab", "--ip=127.0.0.1", f"--ServerApp.root_dir={folder}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # Jupyter refuses root without it; a fresh VM or a container is often root
    cmd += jupyter_args
    print("starting:", " ".join(cmd), flush=True)
    if os.name == "posix":
        os.execv(sys.executable, cmd)  # Jupyter takes over this process, so Ctrl-C reaches it directly
    return subprocess.call(cmd)


# ---------------------------------------------------------------------------------------------------------------
# asgteach student
# ---------------------------------------------------------------------------------------------------------------

def cmd_student(args: argparse.Namespace) -> int:
    """Write the student version of every notebook of SRC_DIR into OUT_DIR (see asgteach.grading.student)."""
    from asgteach.grading.student import SolutionMarkerError, write_student_versions

    try:
        written = write_student_versions(args.src_dir, args.out_dir)
    except (SolutionMarkerError, FileNotFoundError, ValueError) as e:
        print(f"asgteach student: {e}", file=sys.stderr)
        return 1
    for path, count in written:
        print(f"  {path}  ({count} exercise{'s' if count != 1 else ''})")
    total = sum(count for _, count in written)
    print(f"wrote {len(written)} student notebooks with {total} exercises to {args.out_dir}")
    return 0


# ---------------------------------------------------------------------------------------------------------------
# asgteach solution
# ---------------------------------------------------------------------------------------------------------------

def cmd_solution(args: argparse.Namespace) -> int:
    """Print the solution of one exercise of one lesson (for a learner who is stuck after trying)."""
    from . import resources
    from .grading.student import BEGIN, SolutionMarkerError, cell_source, marking, read_notebooks

    source = Path(args.lessons) if args.lessons else resources.solutions_dir()
    if source is None:
        print(textwrap.fill(f"asgteach solution: this install has no solutions to show. "
                            f"{resources.WHERE_SOLUTIONS_ARE}", width=100, break_on_hyphens=False), file=sys.stderr)
        return 1
    try:
        notebooks = read_notebooks(source, "lessons")
    except (FileNotFoundError, ValueError) as e:
        print(f"asgteach solution: {e}", file=sys.stderr)
        return 2
    found = [(p, nb) for p, nb in notebooks if p.stem.split("-")[0] == args.lesson or p.stem == args.lesson]
    if len(found) != 1:
        print(f"asgteach solution: no single lesson {args.lesson!r} (give its number, e.g. 03 or 01b)",
              file=sys.stderr)
        return 2
    path, nb = found[0]
    if not any(BEGIN in cell_source(cell) for cell in nb.get("cells", [])):
        print(textwrap.fill(f"asgteach solution: {path} is a student version: its solutions are cut out. "
                            f"{resources.WHERE_SOLUTIONS_ARE}", width=100, break_on_hyphens=False), file=sys.stderr)
        return 1
    try:
        mark = marking(nb, path.name)
    except SolutionMarkerError as e:
        print(f"asgteach solution: {e}", file=sys.stderr)
        return 1
    if args.exercise not in mark.answers:
        print(f"asgteach solution: {path.stem} has exercises 1 to {mark.count}, not {args.exercise}", file=sys.stderr)
        return 2
    print(f"# {path.stem}, exercise {args.exercise}: the instructor's answer cell. Reading it before trying "
          "teaches little; after trying, compare it with yours.")
    print(cell_source(nb["cells"][mark.answers[args.exercise]]))
    return 0


# ---------------------------------------------------------------------------------------------------------------
# asgteach course
# ---------------------------------------------------------------------------------------------------------------

def cmd_course(args: argparse.Namespace) -> int:
    """Write the nbgrader course directory of the lessons into DIR (see asgteach.grading.nbcourse)."""
    import warnings

    from . import resources
    from .grading.nbcourse import JUDGE_LINE, write_course
    from .grading.student import SolutionMarkerError

    lessons = Path(args.lessons) if args.lessons else resources.solutions_dir()
    if lessons is None:
        print(explain("asgteach course: a course is written from the instructor's lessons (every solution in place), "
                      "and this install has only their student versions (an installed asgteach carries no "
                      "solutions and no answer keys).",
                      "run it in a checkout of the course's repository (git clone <the repository>; ./scripts/setup; "
                      ".venv/bin/asgteach course DIR), or give the instructor's lessons: asgteach course DIR --lessons "
                      "CHECKOUT/lessons (then the answer keys: ASGTEACH_KEYS=CHECKOUT/instructor/answer_keys.py)."),
              file=sys.stderr)
        return 1
    if lessons.is_dir() and not resources.holds_solutions(lessons):
        print(explain(f"asgteach course: the lessons in {lessons} hold no solution (student versions?): a course "
                      "needs the instructor's, whose solution cells nbgrader cuts itself.",
                      "give a checkout's lessons/ with --lessons."), file=sys.stderr)
        return 1
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            written = write_course(args.dir, lessons, time_limit=args.time_limit)
    except (SolutionMarkerError, FileNotFoundError, ValueError) as e:
        print(f"asgteach course: {e}", file=sys.stderr)
        return 1
    for path, points in written:
        print(f"  {path}  ({points} point{'s' if points != 1 else ''})")
    no_keys = [w for w in caught if issubclass(w.category, UserWarning) and "answer keys" in str(w.message)]
    for w in caught:
        if w not in no_keys:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    keys = Path(args.dir) / "keys" / "answer_keys.py"   # where write_course copies them, for the judge
    if not no_keys:
        print(f"  {keys}  (the answer keys, for the judge; readable by you only: never hand it out)")
    for w in no_keys:   # said loudly: grading the exercises that need them will fail
        bar = "!" * 100
        text = textwrap.fill(f"asgteach course: WARNING: {w.message}", width=100)
        print(f"\n{bar}\n{text}\n{bar}\n", file=sys.stderr)
    config = Path(args.dir) / "nbgrader_config.py"
    if JUDGE_LINE not in config.read_text(encoding="utf-8"):
        print(f"asgteach course: {config} is your own and does not load the judge, so autograde would score the "
              f"checks as the student's kernel ran them (which a submission can switch off). Add:\n    {JUDGE_LINE}\n"
              "and its c.Autograde.autograde_preprocessors line (asgteach.grading.nbcourse.CONFIG shows both)",
              file=sys.stderr)
    print(f"wrote an nbgrader course of {len(written)} lessons ({sum(p for _, p in written)} points) to {args.dir}; "
          f"next: cd {args.dir} && nbgrader generate_assignment '*' (nbgrader: pip install 'asgteach[course]'; "
          "docs/teaching.md walks through the rest)")
    return 0


# ---------------------------------------------------------------------------------------------------------------
# asgteach link
# ---------------------------------------------------------------------------------------------------------------

def cmd_link(args: argparse.Namespace) -> int:
    """Print the nbgitpuller link that pulls the lessons into a student's home on a hub and opens lesson 00."""
    from . import resources
    from .hub import nbgitpuller_link, repo_defaults

    repo, branch = args.repo, args.branch
    if repo is None:
        if not resources.is_checkout():
            print("asgteach link: installed from a wheel, there is no repository to point at; give --repo "
                  "(the course's git URL)", file=sys.stderr)
            return 2
        repo, found = repo_defaults(resources.package_dir().parent)
        branch = branch or found
        print("asgteach link: no --repo, so this link pulls the course's own repository, whose lessons/ hold every "
              "solution and instructor/ the answer keys. For a class, link the student versions: ./scripts/hub "
              "publishes them in .hub/course and prints their link (deploy/README.md, \"What students get\").",
              file=sys.stderr)
    try:
        print(nbgitpuller_link(args.hub, repo, branch, lesson=args.lesson, targetpath=args.targetpath, ui=args.ui))
    except ValueError as e:
        print(f"asgteach link: {e}", file=sys.stderr)
        return 2
    return 0


# ---------------------------------------------------------------------------------------------------------------
# argument parsing
# ---------------------------------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="asgteach",
        description="asgteach: see how autograd works - build a graph, look at it, differentiate it, run it.",
        epilog="Run `asgteach COMMAND --help` for the options of one command. New here? `asgteach demo`, "
               "then `asgteach lab`.",
    )
    parser.add_argument("--version", action="version", version=f"asgteach {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    lab = sub.add_parser(
        "lab", allow_abbrev=False, help="start JupyterLab on the lessons (127.0.0.1)",
        description="Start JupyterLab on your exercises, bound to 127.0.0.1: the lessons with every solution cut "
                    "out (as `asgteach student` cuts them), written to a folder you can write to: "
                    "$ASGTEACH_LESSONS_DIR, else a checkout's build/student-lessons, else ./asgteach-lessons, else "
                    "~/asgteach-lessons; later runs add new "
                    "lessons and never overwrite your answers. Stuck after trying? `asgteach solution 03 1` prints "
                    "one exercise's solution. --solutions opens the instructor's lessons instead (a checkout's own "
                    "lessons/). An installed asgteach (a pip install, a hub) holds the student versions only, with "
                    "no solutions and no answer keys: there --solutions and `asgteach solution` say where the "
                    "solutions are (a checkout of the repository, or your instructor). The numpy "
                    "backend is the default; wgpu runs when a Vulkan adapter exists (a line at start says which). "
                    "Any argument not listed here goes to Jupyter unchanged, e.g. `asgteach lab --port 8899 "
                    "--no-browser`.",
    )
    lab.add_argument("--dir", help="open this folder instead of the lessons")
    lab.add_argument("--solutions", action="store_true",
                     help="open the instructor's lessons, every solution in place (a checkout's; default: your "
                          "exercises, the solutions cut out)")
    lab.add_argument("--copy-only", action="store_true",
                     help="only make (or update) the copy of the lessons and print its folder; start nothing "
                          "(for a JupyterHub, where the server is already running)")

    check = sub.add_parser(
        "check", help="gradient-check every op on numpy, check every op's parity on wgpu; print a table",
        description="For every op of the registry: on numpy, a float64 gradient check (autograd's backward graph "
                    "vs central differences); on wgpu (when an adapter exists), the float32 value and gradients "
                    "vs numpy float64 at float32 tolerances. Prints a table (op, numpy, wgpu). Exit code 0: all "
                    "ok; 1: an op failed.",
    )
    check.add_argument("--backend", default="all",
                       help="all (default: every backend available here), numpy or wgpu (an error if it cannot run)")
    check.add_argument("--op", action="append", metavar="NAME", help="check only this op (repeatable)")
    check.add_argument("--no-progress", action="store_true", help="no progress bar (also: ASGTEACH_NO_PROGRESS=1)")

    demo = sub.add_parser(
        "demo", help="headless: a graph and its gradients, a small model trained, an HTML page of its graph",
        description="No Jupyter needed. 1) Build y = sum(relu(x @ w + c) ** 2) and its gradients, list the nodes, "
                    "print the values and the gradient check. 2) Train XOR with a 2-8-1 MLP, printing the loss as "
                    "it falls. 3) Write a static HTML page of the trained model's graph and print its path.",
    )
    demo.add_argument("--seed", type=int, default=0, help="seed of the random draws (default 0)")
    demo.add_argument("--backend", default="numpy", help="numpy (default), wgpu or auto")
    demo.add_argument("--steps", type=int, default=300, help="training steps (default 300)")
    demo.add_argument("--out", metavar="PATH", help="where to write the HTML page (default ./asgteach-demo.html)")

    doctor = sub.add_parser(
        "doctor", help="front-end, versions, Jupyter extensions, GPU adapters - and what to install when something "
                       "is missing",
        description="Check what the course needs: which front-end this runs under (JupyterLab, Notebook 7, VS Code, "
                    "Colab, marimo, a terminal) and what the graph view does there, Python and package versions, the "
                    "lessons and shaders, JupyterLab 4 / Notebook 7 and the two frontend extensions the graph view "
                    "needs (the Jupyter widgets manager and anywidget's), the WebGPU adapters and what their drivers "
                    "printed while probed. For each missing piece it prints the command that fixes it. Exit code 1 "
                    "when something the notebooks need is missing (a missing GPU adapter is optional: numpy works "
                    "everywhere).",
    )
    doctor.add_argument("--json", action="store_true", help="print the findings as JSON")

    student = sub.add_parser(
        "student", help="write student versions of the lessons (solutions cut out)",
        description="Write a student version of every notebook of SRC_DIR into OUT_DIR: the code between "
                    "'### BEGIN SOLUTION' and '### END SOLUTION' becomes raise NotImplementedError(\"exercise N\"), "
                    "outputs and execution counts are cleared, metadata is kept. Markers that do not pair up "
                    "are an error naming the notebook and the cell, and nothing is written.",
    )
    student.add_argument("src_dir", metavar="SRC_DIR", help="the folder of solution notebooks, e.g. lessons/")
    student.add_argument("out_dir", metavar="OUT_DIR", help="where to write the student notebooks")
    solution = sub.add_parser(
        "solution", help="print one exercise's solution (after trying it), e.g. asgteach solution 03 1",
        description="Print the answer cell of exercise N of a lesson, as the instructor wrote it. For a learner who "
                    "has tried and is stuck: `asgteach lab` opens the exercises without their solutions. The "
                    "solutions are in a checkout of the course's repository (git clone <the repository>; "
                    "./scripts/setup; .venv/bin/asgteach solution 03 1); an installed asgteach (a pip install, a hub) "
                    "holds the student versions only and says so (exit code 1). --lessons reads the instructor's "
                    "lessons from another folder, e.g. a checkout's lessons/.",
    )
    solution.add_argument("lesson", metavar="LESSON", help="the lesson's number (03, 01b) or file stem")
    solution.add_argument("exercise", metavar="N", type=int, help="the exercise's number in that lesson")
    solution.add_argument("--lessons", metavar="SRC_DIR",
                          help="the instructor's lesson notebooks (default: this checkout's lessons/)")
    course = sub.add_parser(
        "course", help="write the lessons as an nbgrader course directory",
        description="Write DIR/nbgrader_config.py (kept if it exists) and DIR/source/<lesson>/<lesson>.ipynb for "
                    "every lesson, with nbgrader's cell metadata: each exercise's answer is a solution cell, its "
                    "check an autograded test cell (1 point), every other code cell read-only. Then grade with "
                    "nbgrader's own commands (pip install 'asgteach[course]'); docs/teaching.md walks through them. "
                    "The answer keys are copied to DIR/keys/answer_keys.py (readable by you only), where the judge "
                    "finds them; a loud warning when there are none. Needs the instructor's lessons and keys: run it "
                    "in a checkout of the repository, or give --lessons (and ASGTEACH_KEYS=PATH/answer_keys.py).",
    )
    course.add_argument("dir", metavar="DIR", help="the course directory to write (created if missing)")
    course.add_argument("--lessons", metavar="SRC_DIR",
                        help="the instructor's lesson notebooks (default: this checkout's lessons/)")
    course.add_argument("--time-limit", type=float, default=300.0, metavar="SECONDS",
                        help="a new course's config: wall seconds the judge gives one submission, all its cells and "
                             "checks, in its sandbox (default 300; per cell or call 120, in the config)")
    link = sub.add_parser(
        "link", help="print the nbgitpuller link that brings the lessons into each student's home on a JupyterHub",
        description="Print the URL to hand out: it logs the student into the hub, starts their server, clones (the "
                    "first time) or pulls (every later time) the course repository into ~/TARGETPATH with "
                    "nbgitpuller, and opens lesson 00 in JupyterLab. A student's edited files survive a re-pull. "
                    "From a checkout, the repository is its origin remote (else the folder itself, file://...).",
    )
    link.add_argument("--hub", default="http://127.0.0.1:8000", help="the hub's address (default %(default)s)")
    link.add_argument("--repo", help="git URL of the course (default: this checkout's origin, else file://<it>)")
    link.add_argument("--branch", help="branch to pull (default: the checkout's current branch)")
    link.add_argument("--lesson", default="lessons/00-welcome.ipynb", help="notebook to open (default %(default)s)")
    link.add_argument("--targetpath", default="asgteach", help="folder in the student's home (default %(default)s)")
    link.add_argument("--ui", choices=("lab", "notebook"), default="lab", help="JupyterLab (default) or Notebook 7")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``asgteach`` console script; returns the exit code."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command == "lab":
        return cmd_lab(args, extra)
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    commands = {"check": cmd_check, "demo": cmd_demo, "doctor": cmd_doctor, "student": cmd_student,
                "course": cmd_course, "link": cmd_link, "solution": cmd_solution}
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
