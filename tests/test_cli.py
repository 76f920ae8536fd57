"""The ``asgteach`` command, run as a newcomer runs it: in a subprocess, reading its output and exit code.

Also the errors a newcomer meets (no Vulkan driver, no JupyterLab, widgets not importable or not
enabled, at.show outside Jupyter): each must end in one paragraph that names the fix, never a
traceback. Missing pieces are simulated without touching the machine: ``VK_ICD_FILENAMES`` pointing
at no driver hides every Vulkan driver; a package on ``PYTHONPATH`` whose import fails hides an
installed one; a private ``JUPYTER_CONFIG_DIR`` disables a frontend extension.

Every test that runs asgteach or Python in another process is marked ``slow`` (a second or more each): the
inner loop ``pytest -m "not slow" tests`` skips them, ./scripts/test runs them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import asgteach as at
from asgteach import cli
from asgteach.ops.registry import REGISTRY

ROOT = Path(__file__).resolve().parents[1]
ASGTEACH = str(Path(sys.executable).parent / "asgteach")
COMMANDS = ("lab", "demo", "check", "doctor", "student", "solution", "course", "link")
OPS = [n for n, s in REGISTRY.items() if not s.leaf]


def _run(args: list[str], env: dict | None = None, cwd: Path | str = ROOT, timeout: float = 180,
         **kw) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "ASGTEACH_NO_PROGRESS": "1", **(env or {})}
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=full_env, cwd=cwd, **kw)


def _hide_package(tmp_path: Path, name: str) -> dict:
    """An environment where ``import name`` fails as if the package were not installed."""
    pkg = tmp_path / "hide" / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(f'raise ImportError("No module named {name!r} (hidden by the test)")\n')
    return {"PYTHONPATH": str(tmp_path / "hide")}


NO_VULKAN = {"VK_ICD_FILENAMES": "/nonexistent/no-driver.json"}


# --- --help everywhere ----------------------------------------------------------------------------

@pytest.mark.slow
def test_help_lists_every_command() -> None:
    proc = _run([ASGTEACH, "--help"])
    assert proc.returncode == 0, proc.stderr
    for command in COMMANDS:
        assert re.search(rf"^\s+{command}\s+\S", proc.stdout, re.M), f"{command} missing from --help:\n{proc.stdout}"


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command: str) -> None:
    proc = _run([ASGTEACH, command, "--help"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: asgteach {command}"), proc.stdout[:200]
    assert len(proc.stdout.split("\n\n")[1]) > 80, "the description should say what the command does"


@pytest.mark.slow
def test_bad_arguments_are_usage_errors() -> None:
    proc = _run([ASGTEACH, "check", "--no-such-flag"])
    assert proc.returncode == 2 and "unrecognized arguments: --no-such-flag" in proc.stderr
    proc = _run([ASGTEACH])
    assert proc.returncode == 2 and "COMMAND" in proc.stderr
    proc = _run([ASGTEACH, "check", "--op", "no_such_op"])
    assert proc.returncode == 2 and "no such op: no_such_op" in proc.stderr


# --- asgteach check ---------------------------------------------------------------------------------

def test_every_op_has_a_sample() -> None:
    from asgteach.opsamples import missing_samples, sample

    assert missing_samples() == [], "give these ops tools=Tools(sample=...) so `asgteach check` covers them"
    for op in OPS:
        assert sample(op).y.op == op


@pytest.mark.slow
def test_check_sweeps_every_op_on_every_backend() -> None:
    proc = _run([ASGTEACH, "check"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    backends = at.available()
    header = next(line for line in out.splitlines() if line.startswith("op "))
    assert "numpy (float64 gradcheck)" in header
    assert ("wgpu (float32 vs numpy)" in header) == ("wgpu" in backends)
    rows = {line.split()[0]: line for line in out.splitlines()[out.splitlines().index(header) + 2:]
            if line and not line.startswith(("OK", "NOT OK"))}
    assert sorted(rows) == sorted(OPS), f"the table must have one row per registry op:\n{out}"
    for op, line in rows.items():
        assert line.count("ok  ") == len(backends) and "FAIL" not in line, line
    assert re.search(r"^div\s+arithmetic\s+ok\s+max err \S+", out, re.M), out
    assert "forward only (not differentiable)" in rows["argmax"]
    assert "zero gradient by design" in rows["greater"]
    assert out.rstrip().endswith(f"OK: asgteach works here ({len(OPS)} ops checked; backends: {', '.join(backends)})")


@pytest.mark.slow
def test_check_fails_with_exit_code_1_on_a_wrong_rule() -> None:
    # div's backward rule with the sign of d/db flipped, as a student might write it
    script = (
        "import sys\n"
        "from asgteach.cli import main\n"
        "from asgteach.ops.registry import patched, spec\n"
        "right = spec('div').vjp\n"
        "def wrong(c, g):\n"
        "    da, db = right(c, g)\n"
        "    return da, (None if db is None else -db)\n"
        "with patched('div', vjp=wrong):\n"
        "    sys.exit(main(['check', '--backend', 'numpy', '--op', 'div', '--op', 'mul']))\n"
    )
    proc = _run([sys.executable, "-c", script])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(r"^div\s+arithmetic\s+FAIL d/dx1 off by up to .*; wrong rule: div, input 1$", proc.stdout,
                     re.M), proc.stdout
    assert re.search(r"^mul\s+arithmetic\s+ok\s", proc.stdout, re.M), proc.stdout
    assert "NOT OK: 1 of 2 ops failed: div (numpy)" in proc.stdout


@pytest.mark.slow
def test_check_shows_a_progress_bar() -> None:
    proc = _run([ASGTEACH, "check", "--backend", "numpy", "--op", "add", "--op", "conv2d"],
                env={"ASGTEACH_NO_PROGRESS": ""})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # stderr is a pipe here, so plain progress lines (a terminal gets a tqdm bar: tests/test_progress.py)
    assert re.search(r"^checking ops: 1/2 ops \(50%\), ", proc.stderr, re.M), proc.stderr


@pytest.mark.slow
def test_check_wgpu_without_a_vulkan_driver_explains_the_fix() -> None:
    proc = _run([ASGTEACH, "check", "--backend", "wgpu"], env=NO_VULKAN)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "the wgpu backend was asked for, but it cannot run on this machine" in proc.stderr
    assert "mesa-vulkan-drivers" in proc.stderr.replace("\n", " ") or "asgteach[gpu]" in proc.stderr
    assert "Fix:" in proc.stderr and "asgteach doctor" in proc.stderr.replace("\n", " ")
    # and the plain sweep still runs, on numpy alone
    proc = _run([ASGTEACH, "check", "--op", "tanh"], env=NO_VULKAN)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^  wgpu\s+not available - no Vulkan adapter found", proc.stdout, re.M), proc.stdout
    assert proc.stdout.rstrip().endswith("(1 ops checked; backends: numpy)")


# --- asgteach demo ----------------------------------------------------------------------------------

@pytest.mark.slow
def test_demo_trains_and_writes_a_page(tmp_path: Path) -> None:
    page = tmp_path / "out" / "graph.html"
    proc = _run([ASGTEACH, "demo", "--out", str(page)], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "<Graph 'demo': 20 nodes (9 forward, 11 backward)>" in out
    assert re.search(r"#8\s+forward\s+sum", out) and re.search(r"#19\s+backward\s+matmul", out), out
    assert "y = 29.1778" in out  # the README's example prints the same (tests/test_packaging.py)
    assert "gradcheck PASSED" in out
    losses = [float(v) for v in re.findall(r"^  step +\d+ +loss (\S+)", out, re.M)]
    assert len(losses) == 7 and losses[0] > 0.2 and losses[-1] < 1e-3, out
    assert all(a > b for a, b in zip(losses, losses[1:])), f"the loss should fall at every printed step: {losses}"
    assert f"wrote {page}" in out
    html = page.read_text()
    assert html.startswith("<!doctype html>") and "<svg" in html and "mlp.0.weight" in html
    assert "stroke-dasharray" in html, "the backward graph (dashed) should be drawn too"


@pytest.mark.slow
def test_demo_default_page_goes_to_the_current_folder(tmp_path: Path) -> None:
    proc = _run([ASGTEACH, "demo", "--steps", "20"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "asgteach-demo.html").is_file()
    assert f"wrote {tmp_path / 'asgteach-demo.html'}" in proc.stdout


@pytest.mark.slow
def test_demo_on_wgpu_without_a_vulkan_driver_explains_the_fix() -> None:
    proc = _run([ASGTEACH, "demo", "--backend", "wgpu"], env=NO_VULKAN)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "cannot run on this machine" in proc.stderr and "--backend numpy" in proc.stderr.replace("\n", " ")
    proc = _run([ASGTEACH, "demo", "--backend", "auto", "--steps", "10", "--out", os.devnull], env=NO_VULKAN)
    assert proc.returncode == 0 and "10 steps on numpy" in proc.stdout, proc.stdout + proc.stderr


# --- asgteach doctor --------------------------------------------------------------------------------

@pytest.mark.slow
def test_doctor_on_this_machine(tmp_path: Path) -> None:
    proc = _run([ASGTEACH, "doctor"], env={"JUPYTER_CONFIG_DIR": str(tmp_path / "cfg")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    for needle in ("info    front-end: ", "info    what works in ", "ok      numpy",
                   "ok      anywidget (the clickable graph)", "ok      jupyterlab", "ok      notebook",
                   "ok      extension @jupyter-widgets/jupyterlab-manager", "ok      extension anywidget",
                   "WebGPU adapter"):
        assert needle in out, f"{needle!r} missing:\n{out}"
    assert out.rstrip().splitlines()[-1].startswith("READY")


@pytest.mark.slow
def test_doctor_json_and_a_missing_vulkan_driver(tmp_path: Path) -> None:
    proc = _run([ASGTEACH, "doctor", "--json"], env={**NO_VULKAN, "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg")})
    assert proc.returncode == 0, "a missing GPU adapter is optional: numpy works everywhere"
    findings = {f["what"]: f for f in json.loads(proc.stdout)}
    adapter = findings["WebGPU adapter (the wgpu backend)"]
    assert adapter["ok"] is False and adapter["level"] == "optional"
    assert "mesa-vulkan-drivers" in adapter["fix"]


@pytest.mark.slow
def test_doctor_names_the_fix_for_a_disabled_widgets_extension(tmp_path: Path) -> None:
    env = {"JUPYTER_CONFIG_DIR": str(tmp_path / "cfg")}
    proc = _run([sys.executable, "-m", "jupyterlab.labextensions", "disable", "--level=user",
                 "@jupyter-widgets/jupyterlab-manager"], env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = _run([ASGTEACH, "doctor"], env=env)
    assert proc.returncode == 1, proc.stdout
    assert re.search(r"MISSING extension @jupyter-widgets/jupyterlab-manager .*disabled", proc.stdout), proc.stdout
    assert "jupyter labextension enable @jupyter-widgets/jupyterlab-manager" in proc.stdout
    assert "NOT READY" in proc.stdout


@pytest.mark.slow
def test_doctor_without_jupyterlab(tmp_path: Path) -> None:
    proc = _run([ASGTEACH, "doctor"], env=_hide_package(tmp_path, "jupyterlab"))
    assert proc.returncode == 1, proc.stdout
    assert "pip install 'asgteach[lab]'" in proc.stdout and "NOT READY" in proc.stdout


# --- asgteach lab -----------------------------------------------------------------------------------

@pytest.mark.slow
def test_lab_without_jupyterlab_explains_the_fix(tmp_path: Path) -> None:
    proc = _run([ASGTEACH, "lab", "--no-browser"], env=_hide_package(tmp_path, "jupyterlab"), cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    text = proc.stderr.replace("\n", " ")
    assert "JupyterLab cannot be imported" in text and "pip install 'asgteach[lab]'" in text
    assert not (tmp_path / "asgteach-lessons").exists()


@pytest.mark.slow
def test_lab_prints_the_folder_and_the_backends_before_starting(tmp_path: Path) -> None:
    # an option Jupyter rejects stops the server right after asgteach's own lines
    proc = _run([ASGTEACH, "lab", "--dir", str(tmp_path), "--no-such-jupyter-option=1"], cwd=tmp_path,
                env={"JUPYTER_CONFIG_DIR": str(tmp_path / "cfg"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt")})
    lines = proc.stdout.splitlines()
    assert lines[0] == f"lessons: {tmp_path} (the folder you asked for)", proc.stdout
    expected = "backends: numpy (the default) and wgpu on " if "wgpu" in at.available() else "backends: numpy only"
    assert lines[1].startswith(expected), lines[1]
    assert lines[2].startswith("starting: ") and "--ip=127.0.0.1" in lines[2], lines[2]
    assert proc.returncode != 0  # Jupyter refused the option: nothing was left running


@pytest.mark.slow
def test_lab_opens_the_exercises_and_the_solutions_only_when_asked(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    proc = _run([ASGTEACH, "lab", "--copy-only"], env={"ASGTEACH_LESSONS_DIR": str(mine)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"lessons: {mine} (your exercises"), proc.stdout
    copied = sorted(p.name for p in mine.glob("*.ipynb"))
    assert copied == sorted(p.name for p in (ROOT / "lessons").glob("*.ipynb"))
    assert any("BEGIN SOLUTION" in p.read_text(encoding="utf-8") for p in (ROOT / "lessons").glob("*.ipynb"))
    assert not [n for n in copied if "BEGIN SOLUTION" in (mine / n).read_text(encoding="utf-8")], \
        "a learner's copy holds a solution"
    proc = _run([ASGTEACH, "lab", "--copy-only", "--solutions"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"lessons: {ROOT / 'lessons'} (the lessons of this checkout)"


def test_lessons_are_copied_to_a_writable_folder_for_an_installed_read_only_package(tmp_path: Path,
                                                                                    monkeypatch) -> None:
    # an installed package on a hub: its lessons folder is read-only, so is the folder the server starts in
    from asgteach import course, resources

    installed = tmp_path / "site" / "asgteach" / "lessons"
    installed.mkdir(parents=True)
    for name in ("00-welcome.ipynb", "01-derivatives-numerically.ipynb", "checks.py"):
        (installed / name).write_text("{}" if name.endswith(".ipynb") else "# the checks package\n")
    home, start = tmp_path / "home", tmp_path / "readonly-start"
    home.mkdir()
    start.mkdir()
    for p in (*installed.iterdir(), installed, start):
        p.chmod(0o555 if p.is_dir() else 0o444)
    monkeypatch.setattr(resources, "lessons_dir", lambda: installed)
    monkeypatch.setattr(resources, "is_checkout", lambda: False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("ASGTEACH_LESSONS_DIR", raising=False)
    monkeypatch.chdir(start)
    if os.access(start, os.W_OK):  # root ignores permission bits: the system says the folder is read-only
        access = os.access
        monkeypatch.setattr(os, "access", lambda path, mode, *a, **k: (Path(path) != start or not mode & os.W_OK)
                            and access(path, mode, *a, **k))
    try:
        folder, origin = course.lessons_workspace()
        assert folder == home / "asgteach-lessons", folder
        assert sorted(p.name for p in folder.iterdir()) == ["00-welcome.ipynb", "01-derivatives-numerically.ipynb"]
        assert "made now" in origin
        assert os.access(folder / "00-welcome.ipynb", os.W_OK)
        (folder / "00-welcome.ipynb").write_text('{"edited": true}')
        # the course gains a lesson: the next start adds it and keeps the student's edit
        installed.chmod(0o755)
        (installed / "02-the-asg.ipynb").write_text("{}")
        folder2, origin2 = course.lessons_workspace()
        assert folder2 == folder and "02-the-asg.ipynb" in origin2
        assert (folder / "00-welcome.ipynb").read_text() == '{"edited": true}'
        # and a named place wins
        monkeypatch.setenv("ASGTEACH_LESSONS_DIR", str(tmp_path / "class"))
        assert course.lessons_workspace()[0] == tmp_path / "class"
    finally:
        for p in (installed, start):
            p.chmod(0o755)


# --- solutions stay with the instructor (issue 34) -----------------------------------------------------

@pytest.fixture
def student_install(tmp_path: Path, monkeypatch) -> Path:
    """This process sees what an installed wheel has: the student versions of the lessons only (as hatch_build.py
    writes them into the wheel), no checkout, no answer keys."""
    from asgteach import resources
    from asgteach.grading.student import write_student_versions

    folder = tmp_path / "site" / "asgteach" / "lessons"
    write_student_versions(ROOT / "lessons", folder)
    monkeypatch.setattr(resources, "lessons_dir", lambda: folder)
    monkeypatch.setattr(resources, "is_checkout", lambda: False)
    monkeypatch.setenv("ASGTEACH_LESSONS_DIR", str(tmp_path / "mine"))
    monkeypatch.setenv("ASGTEACH_KEYS", str(tmp_path / "no-keys.py"))
    return folder


def _where_solutions_are(text: str) -> bool:
    text = " ".join(text.split())
    return "git clone" in text and "./scripts/lab --solutions" in text and "asgteach solution 03 1" in text \
        and "instructor" in text


def test_solution_prints_the_answer_cell_in_a_checkout(capsys) -> None:
    assert cli.main(["solution", "03", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# 03-chain-rule-and-reverse-mode, exercise 1: the instructor's answer cell")
    assert "with exercise(1):" in out and "### BEGIN SOLUTION" in out


def test_without_the_instructors_lessons_solution_and_lab_say_where_the_solutions_are(student_install: Path,
                                                                                      tmp_path: Path,
                                                                                      capsys) -> None:
    from asgteach import resources

    assert resources.solutions_dir() is None and not resources.holds_solutions(student_install)
    assert cli.main(["solution", "03", "1"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "no solutions" in err and _where_solutions_are(err), err
    assert cli.main(["lab", "--solutions", "--copy-only"]) == 1
    out, err = capsys.readouterr()
    assert "no solutions to open" in err and _where_solutions_are(err), err
    assert not (tmp_path / "mine-solutions").exists() and not (tmp_path / "mine").exists()
    # student versions given as the lessons: said as much, nothing printed
    assert cli.main(["solution", "03", "1", "--lessons", str(student_install)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "is a student version" in err and _where_solutions_are(err), err
    # the instructor's lessons given by hand (a checkout next to the install): the solution
    assert cli.main(["solution", "03", "1", "--lessons", str(ROOT / "lessons")]) == 0
    assert "### BEGIN SOLUTION" in capsys.readouterr().out
    # the exercises open as everywhere, and say where the solutions are
    assert cli.main(["lab", "--copy-only"]) == 0
    out = capsys.readouterr().out
    assert f"lessons: {tmp_path / 'mine'} (your exercises" in out and "repository has the solutions" in out
    assert sorted(p.name for p in (tmp_path / "mine").glob("*.ipynb")) == \
        sorted(p.name for p in (ROOT / "lessons").glob("*.ipynb"))


def test_course_needs_the_instructors_lessons(student_install: Path, tmp_path: Path, capsys) -> None:
    assert cli.main(["course", str(tmp_path / "course")]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "instructor's lessons" in err and "--lessons" in err and "checkout" in err, err
    assert cli.main(["course", str(tmp_path / "course"), "--lessons", str(student_install)]) == 1
    assert "hold no solution" in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "course").exists()


def test_course_copies_the_answer_keys_for_the_judge(tmp_path: Path, monkeypatch, capsys) -> None:
    from asgteach.grading.keys import keys_path

    monkeypatch.delenv("ASGTEACH_KEYS", raising=False)
    keys = ROOT / "instructor" / "answer_keys.py"
    assert keys_path() == keys
    course = tmp_path / "course"
    assert cli.main(["course", str(course)]) == 0
    copy = course / "keys" / "answer_keys.py"
    assert copy.read_bytes() == keys.read_bytes()
    assert copy.stat().st_mode & 0o777 == 0o600, "the keys give every answer away: readable by their owner only"
    assert f"{copy}  (the answer keys" in capsys.readouterr().out
    # no keys to be found: the course is written all the same, with a loud warning, and the earlier copy stays
    monkeypatch.setenv("ASGTEACH_KEYS", str(tmp_path / "none.py"))
    assert cli.main(["course", str(course)]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "WARNING: no answer keys to copy" in err and "is kept" in err and "!!!!!" in err, err
    assert copy.read_bytes() == keys.read_bytes()
    other = tmp_path / "other"
    assert cli.main(["course", str(other)]) == 0
    assert "WARNING: no answer keys" in capsys.readouterr().err and not (other / "keys").exists()


# --- at.show and progress bars ---------------------------------------------------------------------

_SHOW = ("import asgteach as at\n"
         "with at.Graph() as g:\n"
         "    x = at.input('x', (2,))\n"
         "    y = at.sum(at.tanh(x) * x)\n"
         "    at.grad(y, [x])\n"
         "page = at.show(y)\n"
         "print(type(page).__name__, '<svg' in page.svg, page.png[:4] == b'\\x89PNG')\n")


@pytest.mark.slow
def test_show_outside_jupyter_returns_the_picture_and_says_why() -> None:
    proc = _run([sys.executable, "-c", _SHOW])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "GraphPicture True True"
    assert "this is not a notebook" in proc.stderr and ".save('graph.svg')" in proc.stderr
    assert "asgteach lab" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, "one paragraph"


@pytest.mark.slow
def test_show_without_the_widget_packages_says_what_to_install(tmp_path: Path) -> None:
    proc = _run([sys.executable, "-c", _SHOW], env=_hide_package(tmp_path, "anywidget"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "GraphPicture True True"
    assert "cannot be imported" in proc.stderr and "pip install 'anywidget>=0.9,<1'" in proc.stderr


def test_the_picture_claims_nothing_it_cannot_know() -> None:
    """The picture cannot know why it is the one shown (unrun, untrusted, no widgets): it only says how to get more."""
    from asgteach.widgets.static import static_html

    with at.Graph():
        y = at.sum(at.input("x", (2,)) ** 2)
    page = static_html(y)
    assert "run this cell to click the nodes" in page
    assert "extension" not in page and "not enabled" not in page


def test_gradcheck_progress_bar_only_for_long_checks(monkeypatch, capsys) -> None:
    gc = sys.modules["asgteach.gradcheck"]  # (at.gradcheck, the attribute, is the function)
    made = []   # every progress display a gradcheck makes

    class Recorded(gc.Progress):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.off_from_the_start = self.disable   # (closing a display turns it off too)
            made.append(self)

    def check(n: int):
        """The progress display of a check of 1 + 2 n graph runs (one backward, two forward per element)."""
        with at.Graph():
            x = at.input("x", (n,))
            y = at.sum(at.tanh(x))
        made.clear()
        assert at.gradcheck(y, [x], {x: __import__("numpy").full(n, 0.3)}).ok
        (bar,) = made
        assert bar.total == 1 + 2 * n
        return bar

    monkeypatch.setattr(gc, "Progress", Recorded)
    monkeypatch.delenv("ASGTEACH_NO_PROGRESS", raising=False)
    short, long = (gc.PROGRESS_MIN_EVALUATIONS - 1) // 2, gc.PROGRESS_MIN_EVALUATIONS // 2
    assert check(short).off_from_the_start                          # 199 runs: nothing at all
    long_bar = check(long)                                          # 201 runs: a bar, after a second
    assert not long_bar.off_from_the_start and long_bar.delay == 1.0
    monkeypatch.setenv("ASGTEACH_NO_PROGRESS", "1")
    assert check(long).off_from_the_start
    # asked for explicitly (even with ASGTEACH_NO_PROGRESS=1): drawn at once, counting every graph run
    with at.Graph():
        x = at.input("x", (3, 4))
        y = at.sum(at.tanh(x))
    rep = at.gradcheck(y, [x], {x: __import__("numpy").full((3, 4), 0.3)}, progress=True)
    assert rep.ok
    err = capsys.readouterr().err
    # total: 1 backward run + 2 x 12 forward runs; pytest's captured stderr is no terminal: plain lines
    assert re.search(r"^gradcheck: 3/25 runs \(12%\), ", err, re.M), err


# --- Binder / JupyterHub ---------------------------------------------------------------------------

def test_binder_folder_follows_repo2docker_conventions() -> None:
    try:
        import tomllib
    except ModuleNotFoundError:   # Python 3.10: the same parser as the tomli package
        import tomli as tomllib

    binder = ROOT / "binder"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = (binder / "runtime.txt").read_text().strip()
    assert re.fullmatch(r"python-3\.(\d+)", runtime) and int(runtime.split(".")[1]) >= 11, runtime
    assert project["requires-python"] == ">=3.10"
    apt = [line for line in (binder / "apt.txt").read_text().splitlines() if line and not line.startswith("#")]
    assert {"mesa-vulkan-drivers", "libvulkan1"} <= set(apt), apt
    post_build = (binder / "postBuild").read_text()
    extras = re.search(r'pip install .*-e "\.\[([\w,]+)\]"', post_build).group(1).split(",")
    assert set(extras) == {"gpu", "lab"} and set(extras) <= set(project["optional-dependencies"])
    for name in ("@jupyter-widgets/jupyterlab-manager", "anywidget"):
        assert name in post_build, f"postBuild should fail the build when {name} is not enabled"
    start = (binder / "start").read_text()
    assert start.rstrip().endswith('exec "$@"'), "repo2docker's start must hand over to the server"
    for script in ("postBuild", "start"):
        assert os.access(binder / script, os.X_OK), f"binder/{script} must be executable"
        assert subprocess.run(["bash", "-n", str(binder / script)]).returncode == 0
    # repo2docker ignores the repository root's configuration when binder/ exists: nothing to clash with
    assert not (ROOT / "requirements.txt").exists() and not (ROOT / "environment.yml").exists()
