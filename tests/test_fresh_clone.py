"""The README's first command, run exactly as written, in a fresh clone of this repository.

A newcomer clones the repository and types ``./scripts/lab``. This test does the same in a
temporary folder: ``git clone`` (of the committed HEAD: what a newcomer gets), then the
README's first ``bash`` block, character for character, in the clone. That installs
everything (a new ``.venv`` and ``pip install -e '.[dev,gpu,course,hub]'``; the Debian packages are
checked and, on a fresh machine, installed) and starts JupyterLab; the test waits until the
server answers on 127.0.0.1 and lists the lessons. It then runs ``./scripts/setup`` again:
the second run must skip everything, quickly (the scripts are run on every ``./scripts/lab``).

How the test steers a command it does not change: Jupyter reads a port from ``JUPYTER_PORT``,
a token from ``JUPYTER_TOKEN`` and ``open_browser`` from a config file in
``JUPYTER_CONFIG_DIR``, all private to this test. pip reuses its cache (``~/.cache/pip``,
filled by the first setup on the machine), so the install downloads nothing twice.

The second README command, ``./scripts/test``, is the command running this very test (CI runs
it from a clean clone, as root: ``.ci/run``); here it is checked to be the README's second
block, to run the same setup first, and to parse.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

# a clone, a first install and a JupyterLab server: minutes (./scripts/test runs it; the inner loop skips it)
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
INSTALL_TIMEOUT = 900  # a first install on a slow CI machine; measured: serving after 60 s on 2 cores, cache warm


def _readme_commands() -> list[str]:
    """The README's ```bash blocks, in order, as written."""
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _clone(tmp_path: Path) -> Path:
    clone = tmp_path / "asgteach"
    proc = subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return clone


def _answer(url: str) -> str | None:
    """The page at ``url``, or None while nothing (or not yet an HTTP server) answers there."""
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.read().decode()
    except (OSError, http.client.HTTPException):
        # HTTPException: something that is not (yet) Jupyter's HTTP server holds the port,
        # e.g. a ZeroMQ socket of another process during the long install; keep waiting
        return None


def test_readme_first_command_installs_and_serves_from_a_fresh_clone(tmp_path: Path) -> None:
    lab_command, test_command = _readme_commands()[:2]
    assert (lab_command, test_command) == ("./scripts/lab", "./scripts/test")
    clone = _clone(tmp_path)
    assert not (clone / ".venv").exists(), "a fresh clone has no virtual environment"

    port, token = _free_port(), os.urandom(12).hex()
    config = tmp_path / "jupyter-config"
    config.mkdir()
    (config / "jupyter_server_config.json").write_text(json.dumps({"ServerApp": {"open_browser": False,
                                                                                  "port_retries": 0}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH", "JUPYTER_"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if "/.venv/" not in p)
    env.update(JUPYTER_PORT=str(port), JUPYTER_TOKEN=token, JUPYTER_CONFIG_DIR=str(config),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), ASGTEACH_NO_PROGRESS="1")
    log_path = tmp_path / "lab.log"
    base = f"http://127.0.0.1:{port}"
    t0 = time.monotonic()
    with log_path.open("w") as log:
        proc = subprocess.Popen(["bash", "-c", lab_command], cwd=clone, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            listing = None
            while listing is None:
                assert proc.poll() is None, f"`{lab_command}` exited with {proc.returncode}:\n{log_path.read_text()}"
                assert time.monotonic() - t0 < INSTALL_TIMEOUT, \
                    f"no answer on {base} after {INSTALL_TIMEOUT} s:\n{log_path.read_text()[-4000:]}"
                time.sleep(1)
                listing = _answer(f"{base}/api/contents?token={token}")
            served_after = time.monotonic() - t0
            assert '"00-welcome.ipynb"' in listing, f"the server does not open the lessons: {listing[:400]}"
            lesson = _answer(f"{base}/api/contents/03-chain-rule-and-reverse-mode.ipynb?token={token}")
            assert lesson is not None and "exercise(" in lesson and "BEGIN SOLUTION" not in lesson, \
                "./scripts/lab must open the exercises, not the instructor's solutions"
            page = _answer(f"{base}/lab?token={token}")
            assert page is not None and "JupyterLab" in page
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    out = log_path.read_text()
    assert f"pip install -e '.[dev,gpu,course,hub]' into {clone / '.venv'}" in out, out[-3000:]
    assert f"lessons: {clone / 'build' / 'student-lessons'} (your exercises" in out, out[-3000:]
    assert re.search(r"^backends: numpy", out, re.M), out[-3000:]
    assert (clone / ".venv" / "bin" / "asgteach").is_file()
    print(f"fresh clone: installed and serving after {served_after:.0f} s")

    # the second run skips everything: the README's commands are cheap to repeat
    t1 = time.monotonic()
    again = subprocess.run(["./scripts/setup"], cwd=clone, env=env, capture_output=True, text=True, timeout=300)
    rerun = time.monotonic() - t1
    assert again.returncode == 0, again.stdout + again.stderr
    assert "python packages up to date" in again.stdout and "pip install" not in again.stdout, again.stdout
    assert rerun < 30, f"a second ./scripts/setup should only check, it took {rerun:.0f} s"

    # and the README's second command is the test runner, installing the same way first
    script = (clone / test_command).read_text()
    assert '"$ROOT/scripts/setup"' in script and "-m pytest" in script
    assert subprocess.run(["bash", "-n", test_command], cwd=clone).returncode == 0
