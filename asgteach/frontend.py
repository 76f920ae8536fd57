"""Which notebook front-end is this process running under, and what does the graph view do there?

``asgteach doctor`` says it first, because "the graph does not show" means something different in
each place. Nothing here asks the front-end itself (a kernel cannot see the browser tab); it reads
what each one documents about the processes it starts:

* **Google Colab**: the runtime sets ``COLAB_RELEASE_TAG`` (and ``COLAB_GPU``...), and its kernel
  has imported ``google.colab``.
* **marimo**: ``marimo.running_in_notebook()`` inside a notebook; a ``marimo edit``/``marimo run``
  process among the ancestors of a command started from one.
* **VS Code**: its integrated terminal sets ``TERM_PROGRAM=vscode``; VS Code and the kernels its
  Jupyter extension starts carry ``VSCODE_PID``/``VSCODE_CWD``/``VSCODE_IPC_HOOK_CLI``.
* **JupyterLab / Notebook 7**: a Jupyter kernel has ``JPY_PARENT_PID`` (jupyter_client sets it)
  and IPython's shell has a ``kernel``; the server is found among the ancestors by its command line
  (``jupyter-lab``, ``jupyter-notebook``, ``jupyterhub-singleuser``, ``jupyter-server``). One server
  serves both JupyterLab and Notebook 7 pages, so a server started as ``jupyter lab`` is reported as
  JupyterLab "(Notebook 7 pages of it work the same)".
* **a terminal**: none of the above, with stdin/stdout on a terminal; otherwise a script or a pipe.

* **no browser at all**: ``jupyter nbconvert --execute``, ``jupyter execute`` and papermill start
  the kernel themselves (:func:`headless_runner`: the kernel's parent process). No front-end will
  ever draw a widget made there, so ``at.show`` keeps each graph as its picture, which an HTML
  export then shows offline (a widget's view would need its state and a widget manager from a CDN).

The ancestors are read from ``/proc`` (Linux) or ``ps`` (macOS); on Windows only the environment
is read. :func:`detect` takes everything it reads as arguments too, so the rules are testable.
A leaf module (it imports nothing of ours): ``at.show`` and ``asgteach doctor`` both read it.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Mapping, Sequence

__all__ = ["FrontEnd", "detect", "ancestors", "headless_runner", "HEADLESS_RUNNERS", "WHAT_WORKS"]

#: Programs that run a notebook's kernel with no browser attached (as they appear in a command line).
HEADLESS_RUNNERS = ("jupyter-nbconvert", "nbconvert", "jupyter-execute", "papermill", "nbclient")

#: What a student gets from ``at.show`` in each front-end.
WHAT_WORKS = {
    "JupyterLab": "interactive graph once a cell runs (anywidget: no extension to install); a notebook opened "
                  "unrun or untrusted shows each graph as a picture",
    "Notebook 7": "interactive graph once a cell runs (anywidget: no extension to install); a notebook opened "
                  "unrun or untrusted shows each graph as a picture",
    "JupyterHub": "interactive graph once a cell runs, in JupyterLab or Notebook 7 pages of the hub; pictures "
                  "before that",
    "VS Code": "interactive graph in VS Code's notebook editor (its Jupyter extension runs anywidget's front-end); "
               "a picture where widgets are off",
    "Colab": "interactive graph (anywidget turns on Colab's custom widget manager itself); pictures in a saved copy",
    "marimo": "interactive graph: marimo draws anywidgets natively (return the view, or at.show(...), as a cell's "
              "last expression)",
    "Jupyter kernel": "interactive graph where the front-end runs Jupyter widgets; a picture everywhere else",
    "no browser": "pictures: a notebook executed with no browser attached (nbconvert --execute, jupyter execute, "
                  "papermill) keeps each graph as its picture (PNG + SVG), which an HTML export shows offline",
    "terminal": "picture only: at.show returns a GraphPicture (.save('graph.svg' / '.png' / '.html')); open a "
                "notebook for the interactive graph (`asgteach lab`)",
    "script": "picture only: at.show returns a GraphPicture (.save('graph.svg' / '.png' / '.html'))",
}


@dataclass
class FrontEnd:
    """What was recognised (``name``, a key of :data:`WHAT_WORKS`), from what (``seen``), and what works there."""

    name: str
    seen: str
    interactive: bool

    @property
    def what_works(self) -> str:
        return WHAT_WORKS[self.name]


def ancestors(pid: int | None = None, limit: int = 12) -> list[str]:
    """The command lines of this process's parent, grandparent, ... (nearest first; empty where unreadable)."""
    out: list[str] = []
    pid = os.getppid() if pid is None else pid
    for _ in range(limit):
        if pid <= 1:
            break
        cmd, ppid = _proc(pid)
        if cmd is None:
            break
        out.append(cmd)
        pid = ppid
    return out


def _proc(pid: int) -> tuple[str | None, int]:
    """(command line, parent pid) of ``pid``: /proc on Linux, ``ps`` elsewhere; (None, 0) when unknown."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            ppid = int(f.read().rsplit(")", 1)[1].split()[1])   # the name in () may hold spaces
        return cmd, ppid
    except (OSError, ValueError, IndexError):
        pass
    if sys.platform == "win32":
        return None, 0
    try:
        proc = subprocess.run(["ps", "-o", "ppid=,command=", "-p", str(pid)], capture_output=True, text=True,
                              timeout=5)
        ppid_text, _, cmd = proc.stdout.strip().partition(" ")
        return (cmd.strip() or None), int(ppid_text)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None, 0


def headless_runner(chain: Sequence[str] | None = None) -> str | None:
    """The command line of the program running this kernel with no browser attached, or None.

    Only the parent counts (``chain[0]``, this process's own by default): a kernel started by
    ``jupyter nbconvert --execute`` is its child, while one started by JupyterLab is the server's.
    """
    if chain is None:
        return _parent_runner()
    parent = chain[0] if chain else ""
    return parent if any(r in parent.lower() for r in HEADLESS_RUNNERS) else None


@functools.lru_cache(maxsize=1)
def _parent_runner() -> str | None:
    return headless_runner(ancestors(limit=1))   # a process's parent does not change (unless orphaned)


def _in_marimo_notebook(modules: Mapping[str, object]) -> bool:
    mo = modules.get("marimo")
    try:
        return bool(mo is not None and mo.running_in_notebook())   # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - a half-loaded or old marimo
        return False


def _in_ipykernel(modules: Mapping[str, object]) -> bool:
    if "IPython" not in modules:
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def detect(environ: Mapping[str, str] | None = None, chain: Sequence[str] | None = None,
           modules: Mapping[str, object] | None = None, tty: bool | None = None) -> FrontEnd:
    """The front-end this process runs under (see the module doc for how each is recognised).

    ``environ``, ``chain`` (the ancestors' command lines, nearest first), ``modules`` and ``tty``
    default to this process's own.
    """
    env = os.environ if environ is None else environ
    chain = ancestors() if chain is None else chain
    modules = sys.modules if modules is None else modules
    words = [c.lower() for c in chain]

    def seen_in_chain(*names: str) -> str | None:
        for c in chain:
            low = c.lower()
            if any(n in low for n in names):
                return c if len(c) <= 80 else c[:77] + "..."
        return None

    runner = seen_in_chain(*HEADLESS_RUNNERS)
    if runner:
        return FrontEnd("no browser", f"run by `{runner}`", False)
    if "google.colab" in modules or any(k in env for k in ("COLAB_RELEASE_TAG", "COLAB_GPU", "COLAB_JUPYTER_IP")):
        key = next((k for k in ("COLAB_RELEASE_TAG", "COLAB_GPU", "COLAB_JUPYTER_IP") if k in env), "google.colab")
        return FrontEnd("Colab", f"{key} in the environment" if key in env else "google.colab imported", True)
    if _in_marimo_notebook(modules):
        return FrontEnd("marimo", "marimo.running_in_notebook() is True", True)
    hit = seen_in_chain("marimo")
    if hit and any(w in hit.lower() for w in (" edit", " run", "marimo-server")):
        return FrontEnd("marimo", f"started from `{hit}`", True)
    vscode = next((k for k in ("VSCODE_PID", "VSCODE_CWD", "VSCODE_IPC_HOOK_CLI") if k in env), None)
    if env.get("TERM_PROGRAM") == "vscode" or vscode:
        return FrontEnd("VS Code", f"{vscode or 'TERM_PROGRAM=vscode'} in the environment", True)
    kernel = "JPY_PARENT_PID" in env or _in_ipykernel(modules) or any("ipykernel" in w for w in words)
    hub = seen_in_chain("jupyterhub-singleuser", "jupyterhub.singleuser")
    lab = seen_in_chain("jupyter-lab", "jupyterlab", "jupyter lab")
    nb = seen_in_chain("jupyter-notebook", "notebook.app", "jupyter notebook", "jupyter_notebook")
    server = seen_in_chain("jupyter-server", "jupyter_server", "jupyter server")
    how = "a notebook kernel" if kernel else "a terminal of it"
    if hub:
        return FrontEnd("JupyterHub", f"{how}, started by `{hub}`", True)
    if lab:
        return FrontEnd("JupyterLab", f"{how}, server `{lab}` (Notebook 7 pages of it work the same)", True)
    if nb:
        return FrontEnd("Notebook 7", f"{how}, server `{nb}`", True)
    if server:
        return FrontEnd("JupyterLab", f"{how}, server `{server}` (serves JupyterLab and Notebook 7 pages)", True)
    if kernel:
        return FrontEnd("Jupyter kernel", "JPY_PARENT_PID in the environment, no known server among the parents",
                        True)
    if tty is None:
        try:
            tty = sys.stdin.isatty() and sys.stdout.isatty()
        except (AttributeError, ValueError):
            tty = False
    if tty:
        return FrontEnd("terminal", f"a terminal ({env.get('TERM', 'no TERM')})", False)
    return FrontEnd("script", "no terminal, no notebook: a script, a pipe or a service", False)
