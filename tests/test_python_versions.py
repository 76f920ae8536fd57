"""asgteach installs and works on each Python it claims (pyproject: requires-python >= 3.10, classifiers 3.10-3.13).

For Python 3.10, 3.12 and 3.13 (3.11 is the development venv's, tested everywhere else), wherever
that Python is found (``python3.X`` on PATH, else pyenv's ``versions/3.X.*``): make a fresh venv,
``pip install`` this checkout (built as a wheel, not editable, no extras: what a student gets from
``pip install asgteach``; pip downloads the dependencies), then run

* ``asgteach check`` (every op's float64 gradient check on numpy),
* ``asgteach demo`` (a graph, a small training run and a static page, which reads the TOML
  explanations: on 3.10 through the ``tomli`` backport),
* a probe that scipy was not installed and that ``asgteach doctor`` accepts this Python.

A Python that is not here is skipped with its version named. Each takes about 25 s here (most of it
pip), so all three run in the test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VERSIONS = ("3.10", "3.12", "3.13")


def find_python(version: str) -> tuple[str | None, list[str]]:
    """An interpreter of ``version`` ("3.12") and the places looked at."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates = [shutil.which(f"python{version}")]
    candidates += [str(p / "bin" / "python") for p in sorted((pyenv / "versions").glob(f"{version}.*"), reverse=True)]
    looked = [f"python{version} on PATH", f"{pyenv}/versions/{version}.*/bin/python"]
    for exe in filter(None, candidates):
        try:
            proc = subprocess.run([exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                  capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue  # a pyenv shim for a version not selected exits 127: try the next one
        if proc.returncode == 0 and proc.stdout.strip() == version:
            return exe, looked
    return None, looked


def _run(cmd: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "ASGTEACH_NO_PROGRESS": "1"}
    env.pop("PYTHONPATH", None)  # nothing of the checkout or the dev venv may leak in
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


PROBE = """
import importlib.util, sys
import asgteach
from asgteach.doctor import diagnose
assert importlib.util.find_spec("scipy") is None, "scipy was installed: a dependency pulls it in"
line = [f for f in diagnose() if f.what.startswith("python")][0]
assert line.ok, line
print("python", sys.version.split()[0], "asgteach", asgteach.__version__, "from", asgteach.__file__)
"""


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_installs_and_checks_on(version: str, tmp_path: Path) -> None:
    exe, looked = find_python(version)
    if exe is None:
        pytest.skip(f"Python {version} is not on this machine (looked for {' and '.join(looked)}): NOT TESTED")
    venv = tmp_path / "venv"
    proc = _run([exe, "-m", "venv", str(venv)], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    bin_dir = venv / ("Scripts" if sys.platform == "win32" else "bin")
    proc = _run([str(bin_dir / "python"), "-m", "pip", "install", "-q", str(ROOT)], tmp_path)
    assert proc.returncode == 0, f"pip install on Python {version} failed:\n{proc.stdout}\n{proc.stderr}"

    proc = _run([str(bin_dir / "asgteach"), "check"], tmp_path)
    assert proc.returncode == 0 and "OK: asgteach works here" in proc.stdout, proc.stdout + proc.stderr
    proc = _run([str(bin_dir / "asgteach"), "demo", "--steps", "20", "--out", str(tmp_path / "demo.html")], tmp_path)
    assert proc.returncode == 0 and (tmp_path / "demo.html").is_file(), proc.stdout + proc.stderr
    proc = _run([str(bin_dir / "python"), "-c", PROBE], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"python {version}." in proc.stdout and str(venv) in proc.stdout, proc.stdout
