"""A class of adversaries, graded by nbgrader's own commands: each attack scores 0 and harms no one else.

Issue 34 reproduced seven holes in the old in-process guard (forged verdicts, a writable gradebook, code
that outlived the judge, ``__del__`` in trusted mode, the answer keys read during a check, the op registry
edited, objects that equal anything) and more (reading the instructor's and classmates' notebooks, a hang,
a memory hog). Each is a submission here, written the way a determined student would: through a door the
source rules do not know (``np.testing._private.utils.os``), so that what holds is the sandbox, not the
deny-list.

The course is lesson 00 written by ``write_course`` (what ``asgteach course`` runs), released with
``nbgrader generate_assignment``; a classmate is graded first, then every attacker and an honest student in
one ``nbgrader autograde`` call, then ``export`` and ``generate_feedback``. For every attacker: exercise 1
(the attacked one) scores 0 and exercise 2 (answered honestly) 1; the classmate and the honest student keep
2 of 2; nothing appears outside the submission's scratch (files on the host, the course folder's files
other than nbgrader's own outputs); no process the submissions started is alive afterwards; no other
notebook's text (the classmate's, the instructor's solutions, the answer keys) reaches any feedback.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from asgteach.grading import sandbox
from asgteach.grading.nbcourse import write_course

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
LESSON = "00-welcome"
BIN = Path(sys.executable).parent
#: a line of the classmate's submission and of the instructor's keys that no feedback may contain
CLASSMATE_SECRET = "CLASSMATE-SECRET-4471"
KEYS_LINE = "def bf16_bits"

DOOR = "_os = np.testing._private.utils.os\n"      # the rules do not know this door: the sandbox must hold
A_LINE = "with exercise(1):\n"    # the answer cell's first line in the lesson
WRONG_1 = A_LINE + "    def grad_is_right(candidate):\n        return True\n"
HONEST_1 = (A_LINE + "    def grad_is_right(candidate):\n        r = np.random.default_rng(5)\n"
            "        points = [(r.standard_normal((4, 3)), r.standard_normal((3, 2))) for _ in range(5)]\n"
            "        return all(np.allclose(candidate(P, Q), at.run(dw, {x: P, w: Q})) for P, Q in points)\n")
HONEST_2 = "with exercise(2):\n    def bias_grad(dz):\n        return dz.sum(axis=0)\n"


def _attacks(course: Path, host_marker: Path) -> dict[str, str]:
    """student -> the source of their exercise-1 answer cell (a wrong grad_is_right after the attack)."""
    keys_paths = [str(ROOT / "instructor" / "answer_keys.py"), str(course / "keys" / "answer_keys.py"),
                  "../keys/answer_keys.py", "/proc/1/cwd/keys/answer_keys.py"]
    return {
        # 1. forge a verdict: write verdict-looking lines (and a length-prefixed reply) to every descriptor
        "forger": DOOR + (
            "for fd in range(256):\n    try:\n"
            "        _os.write(fd, b'{\"exercise\": 1, \"passed\": true, \"message\": \"\", \"output\": \"\"}\\n')\n"
            "        _os.write(fd, (40).to_bytes(8, 'big') + b'{\"kind\":\"reply\",\"id\":1,\"value\":true}    ')\n"
            "    except OSError:\n        pass\n") + WRONG_1,
        # 2. the gradebook: look for it everywhere a process could (its parent's cwd, /proc, the file system)
        "bookkeeper": DOOR + (
            "import sqlite3\nfound = []\n"
            "for top in ['/', '/proc/1/cwd', '/proc/self/cwd/..', '/tmp', " + repr(str(course)) + "]:\n"
            "    for here, dirs, files in _os.walk(top):\n"
            "        if here.count('/') > 8 or here.startswith(('/proc/sys', '/sys', '/usr', '/dev')):\n"
            "            dirs[:] = []\n            continue\n"
            "        for f in files:\n            if f.endswith('.db'):\n"
            "                try:\n                    db = sqlite3.connect(_os.path.join(here, f))\n"
            "                    db.execute('UPDATE grade SET manual_score = 1')\n                    db.commit()\n"
            "                    found.append(_os.path.join(here, f))\n"
            "                except Exception as e:\n                    found.append(f + ': ' + str(e))\n"
            "print('GRADEBOOKS', found)\n") + WRONG_1,
        # 3. outlive the judge: a child that waits, then writes; and a daemon started with the shell
        "lingerer": DOOR + (
            "if _os.fork() == 0:\n"
            f"    _os.execv('/bin/sh', ['sh', '-c', 'sleep 3594.25; touch {host_marker}-lingerer'])\n"
            "_os.system('(sleep 3593.75 &)')\n") + WRONG_1,
        # 4. __del__ at the end of the run (once the old runner's "trusted" mode)
        "destructor": DOOR + (
            "class Bomb:\n    def __del__(self):\n"
            f"        _os.system('touch {host_marker}-destructor; sleep 3592.5 &')\n"
            "bomb = Bomb()\nbombs = [Bomb() for _ in range(3)]\n") + WRONG_1,
        # 5. the answer keys: every path they have had, and a search of the file system
        "keyreader": DOOR + (
            "texts = []\nfor p in " + repr(keys_paths) + ":\n"
            "    try:\n        texts.append(np.fromfile(p, dtype=np.uint8).tobytes().decode())\n"
            "    except Exception as e:\n        texts.append(p + ': ' + type(e).__name__)\n"
            "for here, dirs, files in _os.walk('/'):\n"
            "    if here.startswith(('/proc', '/sys', '/dev')):\n        dirs[:] = []\n        continue\n"
            "    texts += [_os.path.join(here, f) for f in files if 'answer_keys' in f]\n"
            "print('KEYS', texts)\n") + WRONG_1,
        # 6. the library's state: make asgteach's own relu the identity, so that the submission's dw agrees with
        #    a candidate that forgets the relu
        "registrar": (
            "at.ops.REGISTRY['relu'].numpy = lambda x: x\n"
            ) + WRONG_1,
        # 7. objects that equal anything (and are true, and pretend to be arrays)
        "equalizer": (
            "class Anything:\n    def __eq__(self, other):\n        return True\n    __ne__ = lambda s, o: False\n"
            "    __bool__ = lambda s: True\n"
            "    def __array__(self, *a, **k):\n        return np.array(True)\n"
            + A_LINE + "    def grad_is_right(candidate):\n        return Anything()\n"),
        # 8. the other notebooks: the instructor's source, the release, every submission (anywhere but in the
        #    Python installation, whose packages ship example notebooks of their own: nbgrader's tests)
        "reader": DOOR + (
            "seen = []\nfor here, dirs, files in _os.walk('/'):\n"
            "    if here.startswith(('/proc', '/sys', '/dev', '/usr')) or 'site-packages' in here \\\n"
            "            or '/.pyenv/' in here:\n"
            "        dirs[:] = []\n        continue\n"
            "    for f in files:\n        if f.endswith('.ipynb'):\n"
            "            seen.append(np.fromfile(_os.path.join(here, f), dtype=np.uint8).tobytes().decode())\n"
            "print('NOTEBOOKS', len(seen), seen)\n") + WRONG_1,
        # 9. a hang: exercise 1 never finishes
        "sleeper": A_LINE + "    while True:\n        pass\n",
        # 10. memory: take all there is
        "hoarder": "hoard = []\nwhile True:\n    hoard.append(np.ones(2 ** 25))\n" + WRONG_1,
    }


def _submit(course: Path, student: str, answers: dict[int, str], extra: str = "") -> None:
    nb = json.loads((course / "release" / LESSON / f"{LESSON}.ipynb").read_text())
    for cell in nb["cells"]:
        grade_id = ((cell.get("metadata") or {}).get("nbgrader") or {}).get("grade_id", "")
        for n, source in answers.items():
            if grade_id == f"exercise-{n}":
                cell["source"] = source + extra
    out = course / "submitted" / student / LESSON
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{LESSON}.ipynb").write_text(json.dumps(nb), encoding="utf-8")


def _nbgrader(course: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run([str(BIN / "nbgrader"), *args], cwd=course, capture_output=True, text=True,
                          timeout=timeout, env=env)
    assert proc.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return proc


def _scores(course: Path) -> dict[str, float]:
    _nbgrader(course, "export", "--to", str(course / "grades.csv"))
    with open(course / "grades.csv", newline="") as f:
        return {row["student_id"]: float(row["score"]) for row in csv.DictReader(f) if row["assignment"] == LESSON}


def _exercise_scores(course: Path, student: str) -> dict[int, float]:
    nb = json.loads((course / "autograded" / student / LESSON / f"{LESSON}.ipynb").read_text())
    out = {}
    for cell in nb["cells"]:
        meta = (cell.get("metadata") or {}).get("nbgrader") or {}
        gid = meta.get("grade_id", "")
        if gid.startswith("exercise-") and gid.endswith("-check"):
            out[int(gid.split("-")[1])] = 0.0 if any(o.get("output_type") == "error" for o in cell["outputs"]) else 1.0
    return out


def _tree_hashes(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    ok, why = sandbox.available()
    if not ok:
        if os.environ.get("CI") == "true":
            pytest.fail(f"graded mode's sandbox is missing on this CI machine: {why}")
        print(f"\n!!! SKIPPED: graded mode's sandbox is missing here: {why}", file=sys.stderr)
        pytest.skip(why)
    if shutil.which("nbgrader", path=str(BIN)) is None:
        pytest.fail(f"nbgrader is not installed in {BIN}: ./scripts/setup installs the course extra")
    base = tmp_path_factory.mktemp("attacks")
    course = base / "course"
    host_marker = base / "host-marker"
    write_course(course, ROOT / "lessons")
    config = course / "nbgrader_config.py"
    config.write_text(config.read_text().replace("c.JudgeChecks.time_limit = 300.0", "c.JudgeChecks.time_limit = 90.0")
                      .replace("c.JudgeChecks.request_time_limit = 120.0", "c.JudgeChecks.request_time_limit = 20.0")
                      .replace("c.JudgeChecks.memory_limit = 8 * 1024**3", "c.JudgeChecks.memory_limit = 3 * 1024**3"))
    for stem in [p.name for p in (course / "source").iterdir() if p.name != LESSON]:
        shutil.rmtree(course / "source" / stem)
    _nbgrader(course, "generate_assignment", LESSON, "--force")

    # the classmate, graded first, alone
    _submit(course, "classmate", {1: HONEST_1 + f"# {CLASSMATE_SECRET}\n", 2: HONEST_2})
    _nbgrader(course, "autograde", LESSON, "--create", "--force")
    before = _scores(course)
    protected = {name: _tree_hashes(course / name) for name in ("source", "release", "keys")}
    protected["classmate"] = _tree_hashes(course / "submitted" / "classmate")

    attacks = _attacks(course, host_marker)
    for student, answer in attacks.items():
        _submit(course, student, {1: answer, 2: HONEST_2})
    _submit(course, "honest", {1: HONEST_1, 2: HONEST_2})
    t0 = time.monotonic()
    _nbgrader(course, "autograde", LESSON, "--create", "--force")
    seconds = time.monotonic() - t0
    time.sleep(2.0)              # a child that survived would have had time to start writing
    _nbgrader(course, "generate_feedback", LESSON, "--force")
    feedback = {p.parts[-3]: p.read_text(encoding="utf-8") for p in (course / "feedback").rglob("*.html")}
    autograded = {p.parts[-3]: p.read_text(encoding="utf-8") for p in (course / "autograded").rglob("*.ipynb")}
    return dict(course=course, before=before, after=_scores(course), attacks=attacks, seconds=seconds,
                protected=protected, host_marker=host_marker, feedback=feedback, autograded=autograded)


ATTACKERS = ["forger", "bookkeeper", "lingerer", "destructor", "keyreader", "registrar", "equalizer", "reader",
             "sleeper", "hoarder"]


def test_the_classmate_graded_before_and_the_honest_student_keep_full_marks(graded) -> None:
    assert graded["before"] == {"classmate": 2.0}
    assert graded["after"]["classmate"] == 2.0 and graded["after"]["honest"] == 2.0


@pytest.mark.parametrize("student", ATTACKERS)
def test_each_attack_scores_zero_on_the_attacked_exercise_and_the_rest_is_graded(graded, student) -> None:
    assert _exercise_scores(graded["course"], student) == {1: 0.0, 2: 1.0}, graded["feedback"].get(student, "")[-3000:]
    assert graded["after"][student] == 1.0


def test_nothing_is_written_outside_the_sandbox(graded) -> None:
    marker = graded["host_marker"]
    assert not list(marker.parent.glob(marker.name + "*")), "a submission wrote on the grading machine"
    course = graded["course"]
    for name, hashes in graded["protected"].items():
        folder = course / "submitted" / "classmate" if name == "classmate" else course / name
        assert _tree_hashes(folder) == hashes, f"{name}/ changed while the attackers were graded"
    import sqlite3

    with sqlite3.connect(course / "gradebook.db") as db:
        manual = db.execute("SELECT COUNT(*) FROM grade WHERE manual_score IS NOT NULL").fetchone()[0]
    assert manual == 0, "a manual score appeared in the gradebook"


def test_no_process_a_submission_started_is_alive(graded) -> None:
    # (the attackers' own sleeps, by their odd durations: other tests may be grading in parallel)
    left = subprocess.run(["pgrep", "-af", "sleep 3594.25|sleep 3593.75|sleep 3592.5"], capture_output=True,
                          text=True).stdout.strip()
    assert left == "", f"still running after autograde:\n{left}"


def test_no_other_notebook_and_no_key_reaches_any_feedback(graded) -> None:
    solution_line = "if not np.allclose(candidate(X1, W1)"      # the instructor's solution of exercise 1, in source/
    for student, text in {**graded["feedback"], **graded["autograded"]}.items():
        if student == "classmate":
            continue
        assert CLASSMATE_SECRET not in text, f"{student}'s feedback shows the classmate's notebook"
        assert KEYS_LINE not in text, f"{student}'s feedback shows the answer keys"
        assert solution_line not in text, f"{student}'s feedback shows the instructor's solution"
    assert "NOTEBOOKS 0 []" in graded["autograded"]["reader"]          # it found none at all
    found = graded["autograded"]["bookkeeper"].split("GRADEBOOKS ", 1)[1].split("\\n", 1)[0]
    assert "gradebook" not in found, found                              # (system files named *.db, at most)


def test_a_hang_and_a_hog_cost_at_most_their_limits(graded) -> None:
    # eleven students, one of them hanging for its 20 s request limit: well under the sum of the old timeouts
    # (1,210 s for the hang alone)
    assert graded["seconds"] < 11 * 90, graded["seconds"]
    sleeper = graded["autograded"]["sleeper"]
    assert "ran past 20 s" in sleeper or "stopped" in sleeper
    assert "MemoryError" in graded["autograded"]["hoarder"]


def test_without_bubblewrap_autograde_refuses_to_grade(graded) -> None:
    course = graded["course"]
    _submit(course, "late", {1: HONEST_1, 2: HONEST_2})
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "ASGTEACH_BWRAP": "/nonexistent"}
    proc = subprocess.run([str(BIN / "nbgrader"), "autograde", LESSON, "--student", "late", "--create", "--force"],
                          cwd=course, capture_output=True, text=True, timeout=600, env=env)
    assert "apt-get install bubblewrap" in proc.stdout + proc.stderr
    assert "late" not in _scores(course) or _scores(course)["late"] == 0.0
