"""What the students of a one-machine hub get, built from this checkout with no solution and no answer key in it.

The checkout is the instructor's: ``lessons/`` holds every solution and ``instructor/answer_keys.py`` the answer
keys, and its ``.venv`` is an editable install that finds both. So the students' side is built apart from it:

``env``     the students' Python environment, ``.hub/student-venv``: asgteach installed from a WHEEL built from
            this tree (the student versions of the lessons, no keys: hatch_build.py), and every other package
            (JupyterLab, jupyterhub-singleuser, nbgitpuller, numpy, wgpu...) shared read-only from ``.venv``
            through a ``.pth`` line that adds its site-packages folder *without* running its ``.pth`` files
            (so the editable install's path to the checkout is never added). Jupyter's data and config
            folders (``share/jupyter``, ``etc/jupyter``: the lab's assets, the widget extensions, the
            nbgitpuller server extension) are links to ``.venv``'s. Built offline, in seconds; rebuilt only when
            the wheel changes. It ends by checking, in the new environment, that ``asgteach`` is the wheel's,
            that it finds no solutions and no keys, and that the server, the lab and nbgitpuller import.
``course``  the course repository the students pull (``asgteach link --repo``), ``.hub/course``: a git
            repository of the student versions of ``lessons/`` (``asgteach student``'s cut), the two licence
            files the lessons' footers link to, and a README; one commit per change of the lessons. Push it to a
            public host for a hub elsewhere (deploy/README.md).

    .venv/bin/python deploy/jupyterhub/student_side.py env    [--venv PATH]      (scripts/hub --install-only)
    .venv/bin/python deploy/jupyterhub/student_side.py course [--course PATH]    (scripts/hub, at every start)

Run it with the Python of the checkout's ``.venv`` (the one that has hatchling, JupyterHub and nbgitpuller).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STUDENT_VENV = ROOT / ".hub" / "student-venv"
COURSE = ROOT / ".hub" / "course"
#: the one line of the .pth file: .venv's site-packages, added as a plain folder (its .pth files are not run)
PTH = "_asgteach_shared_packages.pth"
STAMP = ".asgteach-student-stamp"

SINGLEUSER = """#!{python}
# jupyterhub-singleuser of the students' environment (written by deploy/jupyterhub/student_side.py)
import sys

from jupyterhub.singleuser import main

if __name__ == "__main__":
    sys.exit(main())
"""

README = """# asgteach: the lessons, student versions

Every lesson of the asgteach course with each exercise's solution cut out (`raise NotImplementedError("exercise N")`
in its place) and the outputs cleared, written by `deploy/jupyterhub/student_side.py` (`asgteach student`'s cut)
from the instructor's repository (each commit here names the commit there). Nothing here is edited by hand: the
instructor changes `lessons/` there and the hub publishes again.

Open a lesson in JupyterLab and run it from the top; each exercise's check cell says whether your answer is right.
The solutions and the answer keys stay with the instructor.

Licences: the code cells MIT (LICENSE), the lessons' text and figures CC BY 4.0 (LICENSE-lessons).
"""


def say(text: str) -> None:
    print(f"[asgteach hub] {text}", flush=True)


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        raise SystemExit(f"asgteach hub: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return proc


def build_wheel(out: Path) -> Path:
    """The wheel of this tree (offline: no build isolation, .venv's hatchling)."""
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
          "-w", str(out), str(ROOT)])
    wheels = sorted(out.glob("asgteach-*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"asgteach hub: expected one asgteach wheel in {out}, found {[w.name for w in wheels]}")
    return wheels[0]


def _site_packages(venv: Path) -> Path:
    return venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


def _link(link: Path, target: Path) -> None:
    if link.is_symlink() or link.is_file():
        link.unlink()
    elif link.is_dir():
        shutil.rmtree(link)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target, target_is_directory=True)


PROBE = """
import json, sys
import asgteach, asgteach.resources as r
from asgteach.grading.keys import keys_path
import jupyterhub.singleuser, jupyterlab, nbgitpuller, ipykernel
print(json.dumps({"asgteach": asgteach.__file__, "lessons": str(r.lessons_dir()), "solutions": r.solutions_dir(),
                  "keys": keys_path() and str(keys_path()), "checkout": r.is_checkout(),
                  "path": [p for p in sys.path if p]}, default=str))
"""


def check_env(venv: Path) -> dict:
    """What the students' Python sees: asgteach from the venv, no solutions, no keys, no path into the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("ASGTEACH_KEYS", "PYTHONPATH", "PYTHONHOME")}
    proc = subprocess.run([str(venv / "bin" / "python"), "-c", PROBE], capture_output=True, text=True, env=env,
                          cwd=tempfile.gettempdir())
    if proc.returncode != 0:
        raise SystemExit(f"asgteach hub: the students' environment {venv} does not work:\n{proc.stderr}")
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    problems = []
    if not Path(seen["asgteach"]).resolve().is_relative_to(venv.resolve()):
        problems.append(f"asgteach is imported from {seen['asgteach']}, not from the wheel installed in {venv}")
    if seen["solutions"] is not None or seen["checkout"]:
        problems.append(f"asgteach finds the instructor's lessons ({seen['solutions']})")
    if seen["keys"]:
        problems.append(f"asgteach finds answer keys ({seen['keys']})")
    if str(ROOT) in seen["path"] or str(ROOT.resolve()) in seen["path"]:
        problems.append(f"the checkout {ROOT} is on sys.path")
    if problems:
        raise SystemExit("asgteach hub: the students' environment would hand out answers: " + "; ".join(problems))
    return seen


def make_env(venv: Path) -> Path:
    """Build (or bring up to date) the students' environment at ``venv``; see the module docstring."""
    if venv.resolve() == Path(sys.prefix).resolve() or (venv / "bin" / "activate").resolve() == (
            Path(sys.prefix) / "bin" / "activate").resolve():
        raise SystemExit(f"asgteach hub: {venv} is the instructor's environment itself (the one running this); "
                         "the students' environment is another folder (default .hub/student-venv)")
    shared = [str(Path(p)) for p in dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))]
    with tempfile.TemporaryDirectory(prefix="asgteach-student-wheel-") as tmp:
        wheel = build_wheel(Path(tmp))
        stamp = hashlib.sha256(wheel.read_bytes() + "\n".join([sys.version, *shared]).encode()).hexdigest()
        if (venv / STAMP).is_file() and (venv / STAMP).read_text().strip() == stamp:
            check_env(venv)
            say(f"students' environment up to date: {venv}")
            return venv
        if not (venv / "bin" / "python").exists() or not _site_packages(venv).is_dir():
            shutil.rmtree(venv, ignore_errors=True)
            _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
        site = _site_packages(venv)
        (site / PTH).unlink(missing_ok=True)   # pip must not see .venv's editable asgteach while it installs
        _run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--no-deps",
              "--no-index", "--force-reinstall", "-q", str(wheel)])
    (site / PTH).write_text("".join(f"{p}\n" for p in shared), encoding="utf-8")
    script = venv / "bin" / "jupyterhub-singleuser"
    script.write_text(SINGLEUSER.format(python=venv / "bin" / "python"), encoding="utf-8")
    script.chmod(0o755)
    base = Path(sys.prefix)
    for folder in ("share/jupyter", "etc/jupyter"):
        if (base / folder).is_dir():
            _link(venv / folder, base / folder)
    seen = check_env(venv)
    (venv / STAMP).write_text(stamp + "\n", encoding="utf-8")
    say(f"students' environment: {venv} (asgteach from {Path(wheel.name)}: lessons {seen['lessons']}, the student "
        f"versions; no solutions, no answer keys; the other packages shared from {base})")
    return venv


def _git(course: Path, *args: str) -> str:
    return _run(["git", "-C", str(course), "-c", "user.name=asgteach hub", "-c", "user.email=hub@asgteach.invalid",
                 "-c", "commit.gpgsign=false", *args]).stdout.strip()


def publish_course(course: Path) -> str:
    """Write the student versions of the lessons into the git repository ``course`` and commit them when they
    changed; return its HEAD commit."""
    sys.path.insert(0, str(ROOT))
    from asgteach.grading.student import BEGIN, write_student_versions

    src = ROOT / "lessons"
    with tempfile.TemporaryDirectory(prefix="asgteach-course-") as tmp:
        written = write_student_versions(src, Path(tmp) / "lessons")   # every lesson cut before anything changes
        course.mkdir(parents=True, exist_ok=True)
        if not (course / ".git").is_dir():
            _run(["git", "init", "-q", "-b", "main", str(course)])
        shutil.rmtree(course / "lessons", ignore_errors=True)
        shutil.copytree(Path(tmp) / "lessons", course / "lessons")
    for path in sorted(src.iterdir()):   # data files the lessons read
        if path.is_file() and path.suffix not in (".ipynb", ".py", ".pyc") and not path.name.startswith("."):
            shutil.copy2(path, course / "lessons" / path.name)
    for name in ("LICENSE", "LICENSE-lessons"):
        shutil.copy2(ROOT / name, course / name)
    checkout = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip() or "(none)"
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "lessons"], capture_output=True,
                           text=True).stdout.strip()
    commit = checkout + (" with uncommitted changes to lessons/" if dirty else "")
    (course / "README.md").write_text(README, encoding="utf-8")
    leaks = [str(p) for p in (course / "lessons").rglob("*") if p.is_file()
             and BEGIN in p.read_text(encoding="utf-8", errors="replace")]
    if leaks:
        raise SystemExit(f"asgteach hub: solutions in the students' course: {leaks}")
    _git(course, "add", "-A")
    if subprocess.run(["git", "-C", str(course), "diff", "--cached", "--quiet"]).returncode != 0:
        _git(course, "commit", "-q", "-m", f"the lessons of {commit}, student versions ({len(written)} lessons)")
        say(f"course published: {course} ({len(written)} student lessons, from {commit})")
    else:
        say(f"course up to date: {course}")
    return _git(course, "rev-parse", "HEAD")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="student_side.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    env = sub.add_parser("env", help="build the students' Python environment (asgteach from the wheel)")
    env.add_argument("--venv", type=Path, default=STUDENT_VENV, help="default %(default)s")
    course = sub.add_parser("course", help="publish the student versions of the lessons as a git repository")
    course.add_argument("--course", type=Path, default=COURSE, help="default %(default)s")
    args = parser.parse_args(argv)
    if args.what == "env":
        make_env(args.venv.absolute())
    else:
        publish_course(args.course.absolute())
    return 0


if __name__ == "__main__":
    sys.exit(main())
