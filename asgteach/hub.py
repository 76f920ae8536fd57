"""The nbgitpuller link that brings the lessons into a student's home on a JupyterHub (``asgteach link``).

A student clicks ``<hub>/hub/user-redirect/git-pull?repo=...&branch=...&targetpath=...&urlpath=...``: the hub
logs them in and starts their server, nbgitpuller (installed in the server's environment) clones the repository
into ``~/<targetpath>`` the first time and pulls it every later time, then JupyterLab opens the lesson.

Re-pulls keep the student's work (nbgitpuller's merge rules): a file the student changed is never overwritten
(their version wins over the course's change to the same file), a file they deleted comes back, new lessons
arrive. The repository can be a public git URL or, on the hub machine itself, a local one (``file:///srv/course``,
what the tests use).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from urllib.parse import quote, urlencode

__all__ = ["nbgitpuller_link", "repo_defaults", "DEFAULT_LESSON", "DEFAULT_TARGET"]

DEFAULT_LESSON = "lessons/00-welcome.ipynb"
DEFAULT_TARGET = "asgteach"


def nbgitpuller_link(hub: str, repo: str, branch: str | None = None, *, lesson: str = DEFAULT_LESSON,
                     targetpath: str = DEFAULT_TARGET, ui: str = "lab") -> str:
    """The URL a student opens: pull ``repo`` into ``~/targetpath`` and open ``lesson`` (path inside the repo)."""
    if ui not in ("lab", "notebook"):
        raise ValueError(f"ui must be 'lab' (JupyterLab) or 'notebook' (Notebook 7), not {ui!r}")
    hub = hub.rstrip("/")
    if not hub.startswith(("http://", "https://")):
        raise ValueError(f"the hub's address must start with http:// or https://, not {hub!r}")
    if targetpath.strip("/") in ("", ".", "..") or "/" in targetpath.strip("/"):
        raise ValueError(f"targetpath must be one folder name in the student's home, not {targetpath!r}")
    opened = f"{targetpath}/{lesson.lstrip('/')}"
    urlpath = f"lab/tree/{opened}" if ui == "lab" else f"notebooks/{opened}"
    params = {"repo": repo}
    if branch:
        params["branch"] = branch
    params.update(targetpath=targetpath, urlpath=urlpath)
    return f"{hub}/hub/user-redirect/git-pull?{urlencode(params, quote_via=quote, safe='/:')}"


def _git(root: Path, *args: str) -> str:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def repo_defaults(root: Path) -> tuple[str, str | None]:
    """(repository URL, branch) of the checkout at ``root``: its ``origin`` remote, else the folder itself as
    ``file://`` (a hub on this machine can pull from it), and the branch checked out (None when detached)."""
    root = Path(root).resolve()
    repo = _git(root, "remote", "get-url", "origin")
    if not repo or not _git(root, "rev-parse", "--git-dir"):
        repo = root.as_uri() if not repo else repo
    branch = _git(root, "symbolic-ref", "--short", "-q", "HEAD") or None
    return repo, branch
