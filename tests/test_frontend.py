"""`asgteach doctor` names the front-end it runs under (asgteach/frontend.py) and what works there.

Each front-end is recognised by what it documents about the processes it starts (environment
variables, the server among the ancestors, the runtime's own module); the rules are tested with
those facts handed in, and once for real: a command started from a notebook kernel of a real
JupyterLab server.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from asgteach.frontend import WHAT_WORKS, ancestors, detect, headless_runner

LAB = "/usr/bin/python3 /venv/bin/jupyter-lab --no-browser --port 8888"
KERNEL = "/venv/bin/python -m ipykernel_launcher -f /root/.local/share/jupyter/runtime/kernel-1.json"


@pytest.mark.parametrize(("environ", "chain", "name"), [
    ({"JPY_PARENT_PID": "10"}, ["/bin/sh -c asgteach doctor", KERNEL, LAB], "JupyterLab"),
    ({"JPY_PARENT_PID": "10"}, [KERNEL, "/venv/bin/python /venv/bin/jupyter-notebook --port 8888"], "Notebook 7"),
    ({"JPY_PARENT_PID": "10"}, [KERNEL, "python -m jupyter_server"], "JupyterLab"),
    ({"JPY_PARENT_PID": "10"}, [KERNEL, "/opt/conda/bin/python /opt/conda/bin/jupyterhub-singleuser --ip 0.0.0.0"],
     "JupyterHub"),
    ({"JPY_PARENT_PID": "10"}, [KERNEL], "Jupyter kernel"),
    ({"VSCODE_PID": "4242", "JPY_PARENT_PID": "10"}, [KERNEL, "/usr/share/code/code --type=utility"], "VS Code"),
    ({"TERM_PROGRAM": "vscode"}, ["-bash"], "VS Code"),
    ({"COLAB_RELEASE_TAG": "release-colab_20260101", "JPY_PARENT_PID": "10"}, [KERNEL], "Colab"),
    ({}, ["/venv/bin/python /venv/bin/marimo edit lesson.py"], "marimo"),
    ({"TERM": "xterm-256color"}, ["-bash", "sshd: student@pts/0"], "terminal"),
])
def test_each_front_end_is_recognised_from_what_it_documents(environ, chain, name) -> None:
    fe = detect(environ=environ, chain=chain, modules={}, tty=True)
    assert fe.name == name, fe
    assert fe.interactive is (name not in ("terminal", "script", "no browser"))
    assert fe.what_works == WHAT_WORKS[name] and fe.seen


def test_a_terminal_inside_jupyterlab_is_jupyterlab() -> None:
    fe = detect(environ={"TERM": "xterm"}, chain=["/bin/bash -l", LAB], modules={}, tty=True)
    assert fe.name == "JupyterLab" and "a terminal of it" in fe.seen


def test_a_script_in_a_pipe() -> None:
    fe = detect(environ={}, chain=["/usr/sbin/cron -f"], modules={}, tty=False)
    assert fe.name == "script" and "picture only" in fe.what_works


def test_marimo_in_process_and_colab_by_module() -> None:
    class Marimo:
        @staticmethod
        def running_in_notebook() -> bool:
            return True

    assert detect(environ={}, chain=[], modules={"marimo": Marimo}, tty=False).name == "marimo"
    assert detect(environ={}, chain=[], modules={"google.colab": object()}, tty=False).name == "Colab"


@pytest.mark.slow
def test_ancestors_are_read_from_this_machine() -> None:
    chain = ancestors()
    if sys.platform.startswith("linux"):
        assert chain, "/proc gives the parent's command line"
        proc = subprocess.run([sys.executable, "-c", "from asgteach.frontend import ancestors; print(ancestors()[0])"],
                              capture_output=True, text=True, timeout=60, env={**os.environ})
        assert "pytest" in proc.stdout or sys.executable in proc.stdout or "python" in proc.stdout, proc.stdout


def test_a_kernel_run_by_nbconvert_has_no_browser() -> None:
    runner = "/venv/bin/python /venv/bin/jupyter-nbconvert --to html --execute 02-the-asg.ipynb"
    assert headless_runner([runner]) == runner
    assert headless_runner(["/venv/bin/python /venv/bin/papermill in.ipynb out.ipynb"])
    assert headless_runner([LAB]) is None and headless_runner([]) is None
    fe = detect(environ={"JPY_PARENT_PID": "10"}, chain=[KERNEL, runner], modules={}, tty=False)
    assert fe.name == "no browser" and not fe.interactive and "offline" in fe.what_works


@pytest.mark.slow
def test_at_show_keeps_the_picture_in_a_kernel_no_browser_watches(tmp_path) -> None:
    """A notebook run by `jupyter nbconvert --execute` stores each graph as its picture, no widget view."""
    import json

    nb = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": src}
                    for src in ("import asgteach as at\nwith at.Graph():\n    y = at.sum(at.input('x', (2,)) ** 2)\n"
                                "at.show(y)", "y")],
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "g.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    jupyter = os.path.join(os.path.dirname(sys.executable), "jupyter")
    proc = subprocess.run([jupyter, "nbconvert", "--to", "notebook", "--execute", "g.ipynb", "--output", "run"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    cells = json.loads((tmp_path / "run.ipynb").read_text(encoding="utf-8"))["cells"]
    kinds = [sorted(o.get("data", {})) for c in cells for o in c["outputs"]]
    assert kinds == [["image/png", "image/svg+xml", "text/plain"]] * 2, kinds   # at.show, and the display hook
    assert all(o["output_type"] != "stream" for c in cells for o in c["outputs"]), "no message, no XDG lines"
