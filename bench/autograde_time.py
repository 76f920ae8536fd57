"""How long nbgrader's ``autograde`` takes per lesson notebook (issue 34), for any version of the tree.

What is measured: the wall time (``time.perf_counter`` around the subprocess) of the whole command
``nbgrader autograde <lesson> --create --force`` in a course written by that tree's ``asgteach course``,
for ONE submission per lesson: the instructor's own solutions (``source/<lesson>/<lesson>.ipynb``)
submitted as student ``solved``. That is nbgrader's start-up and gradebook, nbgrader's own kernel run
(unless ``--judge-only``), asgteach's judge and the writing of the autograded notebook, on this machine,
under whatever else this machine runs at the time (the load average is printed and saved).

What is not measured: several students (nothing here grades submissions side by side), a wrong or
hostile submission (which can take longer: a check that fails early, or one that runs to a timeout),
``generate_assignment``, ``generate_feedback``, or the time split inside autograde. The score of each
run is read back with ``nbgrader export`` and printed next to its time, so a fast time from a broken
grading run shows as a score below the maximum (marked ``<`` in the table, with the failing checks'
messages from the autograded notebook).

Only command-line interfaces are used, so the same script measures any tree: ``--tree PATH`` runs
every command with ``PYTHONPATH=PATH`` (and the venv's ``bin`` first on ``PATH``: nbgrader calls
``alembic``, and the course's kernel is the ``python`` found there), from a fresh course directory, and
checks first that ``import asgteach`` there loads PATH's package.

    .venv/bin/python bench/autograde_time.py [--tree PATH] [--lessons 04-broadcasting ...]
        [--judge-only] [--rounds N] [--json OUT] [--course-dir DIR]
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STUDENT = "solved"


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def run(cmd: list[str], env: dict[str, str], cwd: Path, log: Path | None = None,
        check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    if log is not None:
        with log.open("a") as f:
            f.write(f"$ {' '.join(cmd)}  (rc {proc.returncode})\n{proc.stdout}{proc.stderr}\n")
    if check and proc.returncode != 0:
        sys.exit(f"autograde_time: {' '.join(cmd)} failed (rc {proc.returncode}) in {cwd}:\n"
                 f"{(proc.stdout + proc.stderr)[-3000:]}")
    return proc


def tree_env(tree: Path) -> dict[str, str]:
    """This environment with the venv's bin first on PATH and PYTHONPATH=tree (nothing else on it)."""
    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)   # not resolved: a venv's python is a link to the base one
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(tree)
    env.pop("ASGTEACH_LESSONS_DIR", None)
    return env


def check_tree(tree: Path, env: dict[str, str], cwd: Path) -> str:
    """Fail unless ``import asgteach`` under ``env`` (run in ``cwd``, as every command is) loads tree's package."""
    out = run(["python", "-c", "import asgteach; print(asgteach.__file__)"], env, cwd).stdout.strip()
    found = Path(out).resolve()
    if tree.resolve() not in found.parents:
        sys.exit(f"autograde_time: with PYTHONPATH={tree}, asgteach is imported from {found}, not from {tree}")
    for tool in ("nbgrader", "alembic"):
        if shutil.which(tool, path=env["PATH"]) is None:
            sys.exit(f"autograde_time: no {tool} on PATH ({env['PATH'].split(os.pathsep)[0]} first): "
                     "install the course extra (./scripts/setup)")
    return str(found)


def git_state(tree: Path) -> dict[str, object]:
    try:
        commit = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return {"commit": commit, "dirty": bool(dirty)}
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None}


def failed_checks(notebook: Path) -> list[str]:
    """The graded cells of an autograded notebook that show an error or stderr, with their message's start."""
    try:
        nb = json.loads(notebook.read_text())
    except (OSError, ValueError) as e:
        return [f"(no autograded notebook: {e})"]
    found = []
    for cell in nb.get("cells", []):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if not meta.get("grade") or cell.get("cell_type") != "code":
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                text = f"{out.get('ename')}: {out.get('evalue')}"
            elif out.get("output_type") == "stream" and out.get("name") == "stderr":
                text = "stderr: " + "".join(out.get("text", ""))
            else:
                continue
            found.append(f"{meta.get('grade_id')}: {' '.join(text.split())[:400]}")
            break
    return found


def export_scores(course: Path, env: dict[str, str], log: Path) -> dict[str, tuple[float, float]]:
    """{lesson: (score, max_score)} of student ``solved``, from ``nbgrader export --to grades.csv``."""
    out = course / "grades.csv"
    out.unlink(missing_ok=True)
    run(["nbgrader", "export", "--to", str(out)], env, course, log)
    scores = {}
    with out.open(newline="") as f:
        for row in csv.DictReader(f):
            if row.get("student_id") == STUDENT:
                scores[row["assignment"]] = (float(row["score"] or 0), float(row["max_score"] or 0))
    return scores


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--tree", default=str(REPO),
                    help="the source tree whose asgteach writes and judges the course (default: this checkout)")
    ap.add_argument("--lessons", nargs="+", metavar="STEM", help="lesson stems, e.g. 04-broadcasting (default: all)")
    ap.add_argument("--judge-only", action="store_true", help="write the course with `asgteach course --judge-only`")
    ap.add_argument("--rounds", type=int, default=1, help="autograde every lesson this many times (default 1)")
    ap.add_argument("--json", metavar="OUT", help="write the times, scores and machine state there")
    ap.add_argument("--course-dir", metavar="DIR",
                    help="write the course there and keep it (must not exist; default: a temporary folder, removed)")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")

    tree = Path(args.tree).resolve()
    if not (tree / "asgteach" / "__init__.py").is_file():
        sys.exit(f"autograde_time: {tree} holds no asgteach package")
    env = tree_env(tree)
    if args.course_dir:
        course = Path(args.course_dir).resolve()
        if course.exists():
            sys.exit(f"autograde_time: {course} exists (the course must be new: `asgteach course` keeps a config)")
        work = None
    else:
        work = Path(tempfile.mkdtemp(prefix="autograde-time-"))
        course = work / "course"
    course.parent.mkdir(parents=True, exist_ok=True)
    # every command runs in a folder without an `asgteach` of its own: `python -c` and `-m` put the cwd first
    cwd = course.parent
    try:
        asgteach_file = check_tree(tree, env, cwd)
        nbgrader_version = run(["nbgrader", "--version"], env, cwd).stdout.split()[-1]
        log = course.parent / (course.name + "-commands.log")

        # 1. the course, written by the tree under test
        course_cmd = ["python", "-m", "asgteach", "course", str(course)]
        if args.judge_only:
            if "--judge-only" not in run(["python", "-m", "asgteach", "course", "--help"], env, cwd).stdout:
                sys.exit(f"autograde_time: `asgteach course` of {tree} has no --judge-only")
            course_cmd.append("--judge-only")
        run(course_cmd, env, cwd, log)
        config = (course / "nbgrader_config.py").read_text()
        judge_line = next((ln for ln in config.splitlines() if ln.startswith("JUDGE_ONLY")), None)
        if judge_line is not None and ("True" in judge_line) != args.judge_only:
            sys.exit(f"autograde_time: the course's config says {judge_line!r}, asked judge_only={args.judge_only}")
        available = sorted(p.name for p in (course / "source").iterdir() if (p / f"{p.name}.ipynb").is_file())
        lessons = args.lessons or available
        missing = [s for s in lessons if s not in available]
        if missing:
            sys.exit(f"autograde_time: no lesson {', '.join(missing)} in {tree} (lessons: {', '.join(available)})")

        # 2. release, and the instructor's notebooks submitted as student `solved`
        if args.lessons:
            for lesson in lessons:
                run(["nbgrader", "generate_assignment", lesson, "--force"], env, course, log)
        else:
            run(["nbgrader", "generate_assignment", "*", "--force"], env, course, log)
        for lesson in lessons:
            dest = course / "submitted" / STUDENT / lesson
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(course / "source" / lesson / f"{lesson}.ipynb", dest / f"{lesson}.ipynb")

        # 3. autograde: every lesson once per round, in order
        nproc = os.cpu_count()
        load_before = loadavg()
        started = datetime.datetime.now(datetime.timezone.utc)
        print(f"tree {tree} ({asgteach_file}), {'judge only' if args.judge_only else 'default config'}, "
              f"{len(lessons)} lessons x {args.rounds} rounds; nbgrader {nbgrader_version}; {nproc} cores, "
              f"load {load_before}, nice {os.nice(0)}", flush=True)
        times: dict[str, list[float]] = {s: [] for s in lessons}
        scores: dict[str, list[float | None]] = {s: [] for s in lessons}
        max_scores: dict[str, float | None] = {s: None for s in lessons}
        rcs: dict[str, list[int]] = {s: [] for s in lessons}
        for r in range(args.rounds):
            for lesson in lessons:
                t0 = time.perf_counter()
                proc = run(["nbgrader", "autograde", lesson, "--create", "--force"], env, course, log, check=False)
                dt = time.perf_counter() - t0
                times[lesson].append(dt)
                rcs[lesson].append(proc.returncode)
                note = "" if proc.returncode == 0 else f"  (rc {proc.returncode}: see {log})"
                print(f"  round {r + 1} {lesson:<42} {dt:8.1f} s  load {loadavg()}{note}", flush=True)
            got = export_scores(course, env, log)
            for lesson in lessons:
                score, top = got.get(lesson, (None, None))
                scores[lesson].append(score)
                if top:
                    max_scores[lesson] = top
        finished = datetime.datetime.now(datetime.timezone.utc)
        load_after = loadavg()

        rows = []
        for lesson in lessons:
            t = times[lesson]
            top = max_scores[lesson]
            full = top is not None and all(s is not None and s >= top for s in scores[lesson]) \
                and all(rc == 0 for rc in rcs[lesson])
            failures = [] if full else failed_checks(course / "autograded" / STUDENT / lesson / f"{lesson}.ipynb")
            rows.append({"lesson": lesson, "seconds": t, "median": statistics.median(t), "min": min(t), "max": max(t),
                         "scores": scores[lesson], "max_score": top, "returncodes": rcs[lesson],
                         "full_marks": full, "failed_checks": failures})

        # 4. the table
        print(f"\nautograde wall time per lesson, one submission ({STUDENT}), median of {args.rounds} round(s); "
              f"load {load_before} -> {load_after}")
        print(f"{'lesson':<42} {'seconds':>8} {'min-max':>13}  score/max")
        for row in rows:
            last = row["scores"][-1]
            score = "?" if last is None else f"{last:g}"
            top = "?" if row["max_score"] is None else f"{row['max_score']:g}"
            flag = "" if row["full_marks"] else "  <  below max (or a failed run)"
            print(f"{row['lesson']:<42} {row['median']:8.1f} {row['min']:6.1f}-{row['max']:<6.1f}  "
                  f"{score}/{top}{flag}")
        total = sum(row["median"] for row in rows)
        got_sum = sum(row["scores"][-1] or 0 for row in rows)
        top_sum = sum(row["max_score"] or 0 for row in rows)
        print(f"{'all (sum of medians)':<42} {total:8.1f} {'':13}  {got_sum:g}/{top_sum:g}")
        for row in rows:
            if not row["full_marks"]:
                print(f"\n{row['lesson']}: scores {row['scores']} of {row['max_score']}, rc {row['returncodes']}")
                for line in row["failed_checks"] or ["(no failing check cell found: see the command log)"]:
                    print(f"  {line}")

        if args.json:
            result = {
                "what": "wall time of `nbgrader autograde <lesson> --create --force`, one submission (the "
                        "instructor's solutions as student 'solved'), seconds",
                "command": [sys.executable, *sys.argv],
                "tree": str(tree), "asgteach_file": asgteach_file,
                **{"tree_" + k: v for k, v in git_state(tree).items()},
                "judge_only": args.judge_only, "rounds": args.rounds, "nbgrader": nbgrader_version,
                "python": sys.version.split()[0], "cores": nproc, "nice": os.nice(0),
                "loadavg_before": load_before, "loadavg_after": load_after,
                "started_utc": started.isoformat(timespec="seconds"),
                "finished_utc": finished.isoformat(timespec="seconds"),
                "lessons": rows,
            }
            Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
            print(f"\nwrote {args.json}")
        if args.course_dir:
            print(f"course kept in {course} (commands and their output: {log})")
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
