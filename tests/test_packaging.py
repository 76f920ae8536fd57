"""Packaging, the `asgteach` command, the README's commands, and lint.

The wheel is built once per session (offline: no build isolation, hatchling comes from the dev
extra) and inspected; it is then installed into a private folder and imported from there, to prove
that the shaders and lessons are found from an *installed* package, not only from this checkout.

A wheel is what a student installs, so it holds the *student versions* of the lessons (hatch_build.py
cuts every solution out, as `asgteach student` does) and no answer keys: the tests below read every
file of it for a solution's text or a key's, and run `asgteach solution` and `asgteach lab --solutions`
from the installed wheel, where they must say where the solutions are instead.
"""

from __future__ import annotations

import ast
import email
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

import asgteach
from asgteach.grading.student import BEGIN, END, cell_source, make_student_notebook, marking

ROOT = Path(__file__).resolve().parents[1]
VERSION = asgteach.__version__   # written in one place (tests/test_release.py checks that the wheel agrees)
BIN = Path(sys.executable).parent


def _run(cmd: list[str], timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                 str(ROOT)])
    assert proc.returncode == 0, f"building the wheel failed:\n{proc.stdout}\n{proc.stderr}"
    wheels = list(out.glob(f"asgteach-{VERSION}-*.whl"))
    assert len(wheels) == 1, f"expected one asgteach {VERSION} wheel, found {[w.name for w in out.iterdir()]}"
    return wheels[0]


@pytest.fixture(scope="module")
def wheel_names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as z:
        return set(z.namelist())


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel installed (no dependencies: they are this venv's) into a private folder, for PYTHONPATH."""
    target = tmp_path_factory.mktemp("installed") / "site"
    proc = _run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(target),
                 str(wheel)])
    assert proc.returncode == 0, proc.stderr
    return target


def _dist_info(wheel: Path, name: str) -> str:
    with zipfile.ZipFile(wheel) as z:
        return z.read(f"asgteach-{VERSION}.dist-info/{name}").decode()


# --- what the wheel holds ---------------------------------------------------------------------

@pytest.mark.slow
def test_wheel_holds_every_module(wheel_names: set[str]) -> None:
    sources = {p.relative_to(ROOT).as_posix() for p in (ROOT / "asgteach").rglob("*.py")
               if "__pycache__" not in p.parts}
    assert "asgteach/__init__.py" in sources and "asgteach/cli.py" in sources
    missing = sorted(sources - wheel_names)
    assert not missing, f"modules missing from the wheel: {missing}"


@pytest.mark.slow
def test_wheel_holds_explanations(wheel_names: set[str]) -> None:
    tomls = {p.relative_to(ROOT).as_posix() for p in (ROOT / "asgteach" / "explain").glob("*.toml")}
    missing = sorted(tomls - wheel_names)
    assert not missing, f"explanation files missing from the wheel: {missing}"


@pytest.mark.slow
def test_wheel_maps_shaders_and_lessons_into_the_package(wheel_names: set[str]) -> None:
    # The repo-root folders land inside the package, where resources.shaders_dir() looks first.
    expected = {"asgteach/shaders/README.md", "asgteach/lessons/00-welcome.ipynb"}
    expected |= {f"asgteach/shaders/{p.name}" for p in (ROOT / "shaders").glob("*.wgsl")}
    expected |= {f"asgteach/lessons/{p.name}" for p in (ROOT / "lessons").glob("*.ipynb")}
    missing = sorted(expected - wheel_names)
    assert not missing, f"shader or lesson files missing from the wheel: {missing}"
    assert not [n for n in wheel_names if n.startswith(("shaders/", "lessons/", "tests/", ".venv/"))], \
        "the wheel must not put data at the top level of site-packages"


@pytest.mark.slow
def test_wheel_marks_the_package_as_typed(wheel_names: set[str]) -> None:
    # PEP 561: with asgteach/py.typed installed, mypy and pyright read asgteach's own type hints
    assert (ROOT / "asgteach" / "py.typed").is_file() and "asgteach/py.typed" in wheel_names


@pytest.mark.slow
def test_wheel_metadata(wheel: Path) -> None:
    meta = email.message_from_string(_dist_info(wheel, "METADATA"))
    assert meta["Name"] == "asgteach" and meta["Version"] == VERSION
    assert meta["Requires-Python"] == ">=3.10"
    requires = meta.get_all("Requires-Dist")
    assert not any(r.startswith("scipy") for r in requires), "erf is numpy's now (asgteach/ops/special.py)"
    for dep in ("numpy", "ipywidgets", "matplotlib", "safetensors", "tqdm"):
        assert any(r.startswith(dep) for r in requires), f"{dep} is not a runtime dependency: {requires}"
    assert any(r.startswith("anywidget") for r in requires), "the graph view is an anywidget"
    assert not any(r.startswith("ipycytoscape") for r in requires), "ipycytoscape left (unmaintained since 2022)"
    assert {"gpu", "dev", "bench", "lab"} <= set(meta.get_all("Provides-Extra"))
    assert any(re.match(r"wgpu==0\.32\.\d+; extra == .gpu.", r) for r in requires), requires


@pytest.mark.slow
def test_wheel_declares_the_console_script(wheel: Path) -> None:
    entry_points = _dist_info(wheel, "entry_points.txt")
    assert re.search(r"^\[console_scripts\]\s*\nasgteach = asgteach\.cli:main\s*$", entry_points, re.M), entry_points


# --- the installed wheel finds its data -------------------------------------------------------

@pytest.mark.slow
def test_installed_wheel_finds_shaders_and_lessons(installed: Path, tmp_path: Path) -> None:
    target = installed
    env = {**os.environ, "PYTHONPATH": str(target)}
    probe = ("import asgteach, asgteach.resources as r; "
             "print(asgteach.__file__); print(r.shaders_dir()); print(r.lessons_dir()); print(r.is_checkout()); "
             "print(r.solutions_dir()); print(sorted(p.name for p in r.shaders_dir().iterdir()))")
    proc = _run([sys.executable, "-c", probe], cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    module_file, shaders, lessons, checkout, solutions, names = proc.stdout.splitlines()
    assert Path(module_file).is_relative_to(target), f"imported {module_file}, not the installed wheel"
    assert Path(shaders) == target / "asgteach" / "shaders"
    assert Path(lessons) == target / "asgteach" / "lessons"
    assert checkout == "False"
    assert solutions == "None", "an installed wheel has the student versions only: no solutions to find"
    assert eval(names) == sorted(p.name for p in (ROOT / "shaders").iterdir() if p.is_file())

    # and the whole `check` runs from the installed copy
    proc = _run([sys.executable, "-m", "asgteach", "check"], cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"(installed: {target / 'asgteach'})" in proc.stdout
    assert "OK: asgteach works here" in proc.stdout


# --- no solutions and no answer keys in a wheel (issue 34) --------------------------------------------

def _solution_lines() -> dict[str, str]:
    """The non-trivial lines of every solution block of the instructor's lessons (longer than 25 characters, not a
    comment) that the lessons do not also show outside a solution block, each with the exercise it answers."""
    inside: dict[str, str] = {}
    outside: list[str] = []
    for path in sorted((ROOT / "lessons").glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        answers = {index: n for n, index in marking(nb, path.name).answers.items()}
        for index, cell in enumerate(nb["cells"]):
            in_block = False
            for line in cell_source(cell).splitlines():
                text = line.strip()
                if text in (BEGIN, END):
                    in_block = text == BEGIN
                elif in_block:
                    if len(text) > 25 and not text.startswith("#"):
                        inside.setdefault(text, f"{path.stem}, exercise {answers.get(index)}")
                else:
                    outside.append(line)
    shown = "\n".join(outside)   # what a student reads anyway: the lessons' own code and text
    return {line: where for line, where in inside.items() if line not in shown}


def _key_lines() -> list[str]:
    """The signature line of every function and class of the answer keys (instructor/answer_keys.py)."""
    path = ROOT / "instructor" / "answer_keys.py"
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found = [lines[node.lineno - 1].strip() for node in ast.parse(source).body
             if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    assert "def bf16_bits(u: np.ndarray) -> np.ndarray:" in found, found   # the keys are where this test looks
    return found


@pytest.mark.slow
def test_wheel_holds_the_student_version_of_every_lesson(wheel: Path, wheel_names: set[str]) -> None:
    lessons = sorted((ROOT / "lessons").glob("*.ipynb"))
    assert len(lessons) >= 8
    shipped = sorted(n for n in wheel_names if n.endswith(".ipynb"))
    assert shipped == [f"asgteach/lessons/{p.name}" for p in lessons], "the wheel's notebooks are not the lessons"
    with zipfile.ZipFile(wheel) as z:
        for path in lessons:
            text = z.read(f"asgteach/lessons/{path.name}").decode("utf-8")
            assert BEGIN not in text and END not in text, f"{path.name}: the wheel's copy holds a solution marker"
            expected, count = make_student_notebook(json.loads(path.read_text(encoding="utf-8")), path.name)
            assert json.loads(text) == expected, f"{path.name}: the wheel's copy is not its student version"
            nb = json.loads(text)
            code = "\n".join(cell_source(c) for c in nb["cells"] if c["cell_type"] == "code")
            assert count >= 2 and code.count('raise NotImplementedError("exercise ') >= count, path.name
            assert all(c["outputs"] == [] for c in nb["cells"] if c["cell_type"] == "code"), \
                f"{path.name}: outputs are cleared in a student version (an output can show an answer)"


@pytest.mark.slow
def test_wheel_holds_no_solution_and_no_answer_keys(wheel: Path, wheel_names: set[str]) -> None:
    solutions, keys = _solution_lines(), _key_lines()
    assert len(solutions) > 50, f"only {len(solutions)} solution lines found: is the marking read right?"
    assert not [n for n in wheel_names if Path(n).name.startswith("answer_keys") or n.startswith("instructor/")]
    leaks = []
    with zipfile.ZipFile(wheel) as z:
        for name in sorted(wheel_names):
            text = z.read(name).decode("utf-8", errors="replace")
            leaks += [f"{name}: a line of the answer keys: {line!r}" for line in keys if line in text]
            if name.endswith(".py") and (ROOT / name).is_file():
                continue   # the library's own modules: code reviewed as such, not something the build wrote
            leaks += [f"{name}: a line of the solution of {where}: {line!r}" for line, where in solutions.items()
                      if line in text]
    assert not leaks, "the wheel gives answers away:\n" + "\n".join(leaks)


@pytest.mark.slow
def test_installed_wheel_says_where_the_solutions_are(installed: Path, tmp_path: Path) -> None:
    """A learner with only the wheel: `asgteach solution` and `asgteach lab --solutions` show no solution and say
    where they are (a checkout of the repository); `asgteach lab` opens the student versions;
    `asgteach course` needs the instructor's lessons."""
    env = {**os.environ, "PYTHONPATH": str(installed), "ASGTEACH_LESSONS_DIR": str(tmp_path / "mine")}
    env.pop("ASGTEACH_KEYS", None)
    for args in (["solution", "03", "1"], ["lab", "--solutions", "--copy-only"]):
        proc = _run([sys.executable, "-m", "asgteach", *args], cwd=tmp_path, env=env)
        text = " ".join(proc.stderr.split())
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, (args, proc.stdout, proc.stderr)
        assert "no solutions" in text and "git clone" in text and "./scripts/lab --solutions" in text, (args, text)
        assert "asgteach solution 03 1" in text and "instructor" in text, (args, text)
        assert BEGIN not in proc.stdout and "def chain_rule_grads" not in proc.stdout + proc.stderr
    assert not (tmp_path / "mine-solutions").exists()
    proc = _run([sys.executable, "-m", "asgteach", "lab", "--copy-only"], cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    copied = sorted((tmp_path / "mine").glob("*.ipynb"))
    assert [p.name for p in copied] == sorted(p.name for p in (ROOT / "lessons").glob("*.ipynb"))
    assert not [p.name for p in copied if BEGIN in p.read_text(encoding="utf-8")]
    assert "checkout of the course's repository has the solutions" in proc.stdout
    proc = _run([sys.executable, "-m", "asgteach", "course", str(tmp_path / "course")], cwd=tmp_path, env=env)
    assert proc.returncode == 1 and "instructor's lessons" in " ".join(proc.stderr.split()), proc.stderr
    assert not (tmp_path / "course").exists()


# --- the asgteach command ---------------------------------------------------------------------

def _asgteach() -> str:
    exe = BIN / "asgteach"
    assert exe.is_file(), f"no console script at {exe}: install the package with pip install -e '.[dev,gpu]'"
    return str(exe)


# (check, demo, doctor, lab's messages and --help: tests/test_cli.py)


@pytest.mark.slow
def test_cli_student_needs_its_folders() -> None:
    # (what `asgteach student SRC OUT` writes is tested in tests/test_student.py)
    proc = _run([_asgteach(), "student"], cwd=ROOT)
    assert proc.returncode == 2
    assert "SRC_DIR, OUT_DIR" in proc.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_cli_lab_serves_the_lessons_on_localhost(tmp_path: Path) -> None:
    port, token = _free_port(), "asgteach-test-token"
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"), "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg")}
    log = (tmp_path / "lab.log").open("w+")
    proc = subprocess.Popen([_asgteach(), "lab", "--no-browser", f"--port={port}", "--port-retries=0",
                             f"--IdentityProvider.token={token}"], cwd=tmp_path, env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, f"JupyterLab exited with {proc.returncode}:\n{Path(log.name).read_text()}"
            try:
                with urllib.request.urlopen(f"{base}/api/contents?token={token}", timeout=5) as r:
                    listing = r.read().decode()
                break
            except OSError:
                assert time.monotonic() < deadline, f"no answer on {base} in 90 s:\n{Path(log.name).read_text()}"
                time.sleep(0.5)
        assert '"00-welcome.ipynb"' in listing, f"the server does not open the lessons folder: {listing[:500]}"
        with urllib.request.urlopen(f"{base}/lab?token={token}", timeout=10) as r:
            assert r.status == 200 and "JupyterLab" in r.read().decode()
        assert f"http://127.0.0.1:{port}/lab" in Path(log.name).read_text()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


# --- the README's commands and CI -------------------------------------------------------------

def test_readme_opens_with_the_two_commands() -> None:
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert [b.strip() for b in blocks[:2]] == ["./scripts/lab", "./scripts/test"]
    for script in ("scripts/lab", "scripts/test", "scripts/setup", ".ci/run"):
        path = ROOT / script
        assert path.is_file() and os.access(path, os.X_OK), f"{script} must exist and be executable"
        assert "set -euo pipefail" in path.read_text(), f"{script} must stop at the first error"
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^\./scripts/test\b", ci, re.M), ".ci/run must run the README's test command"


def test_readme_example_runs() -> None:
    (example,) = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    namespace: dict = {}
    exec(compile(example, "README.md", "exec"), namespace)  # the README's own example, as a reader would run it
    assert namespace["rep"].ok
    assert float(namespace["y_val"]) == pytest.approx(29.1778, abs=1e-4)  # the value `asgteach demo` prints


def test_shell_scripts_parse() -> None:
    """Every bash script of scripts/ (found by its first line, so a new one is checked without editing this test)
    and .ci/run parse."""
    scripts = [p for p in sorted((ROOT / "scripts").iterdir())
               if p.is_file() and (p.suffix == ".sh" or p.read_text(encoding="utf-8", errors="replace")
                                   .startswith("#!/usr/bin/env bash"))]
    assert {"lab", "test", "setup", "site", "release", "env.sh"} <= {p.name for p in scripts}, scripts
    for script in [*scripts, ROOT / ".ci" / "run"]:
        proc = _run(["bash", "-n", str(script)])
        assert proc.returncode == 0, f"{script}: {proc.stderr}"


def test_ruff_clean() -> None:
    proc = _run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)], cwd=ROOT)
    assert proc.returncode == 0, f"ruff found problems (fix them, or `ruff check --fix`):\n{proc.stdout}"
