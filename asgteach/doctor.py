"""``asgteach doctor``: is everything here that the course needs, and if not, what to install.

Each check is a :class:`Finding`: what was looked at, whether it is fine, what was seen,
and — when it is not fine — the one command or step that fixes it. Findings come in three
levels: ``required`` (asgteach itself cannot work), ``lab`` (the notebooks cannot show the
clickable graph) and ``optional`` (the GPU backend; numpy works without it).
"""

from __future__ import annotations

import importlib.metadata
import json
import platform
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from . import progress

__all__ = ["Finding", "diagnose", "format_findings", "labextensions", "as_json", "installed_version"]

#: the two JupyterLab/Notebook 7 frontend extensions the graph view needs, and the package that ships each
EXTENSIONS = {
    "@jupyter-widgets/jupyterlab-manager": ("the Jupyter widgets manager", "jupyterlab_widgets",
                                            "pip install 'jupyterlab_widgets>=3' 'ipywidgets>=8.1,<9'"),
    "jupyter-cytoscape": ("ipycytoscape's graph view", "ipycytoscape", "pip install 'ipycytoscape==1.3.3'"),
}


@dataclass
class Finding:
    """One check: ``ok`` or not, what was ``seen``, and the ``fix`` when not ok."""

    level: str          # "required", "lab" or "optional"
    what: str
    ok: bool
    seen: str
    fix: str = ""


def installed_version(dist: str) -> str | None:
    """The installed version of distribution ``dist`` ("numpy", "wgpu", ...), or None when it is not installed."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _package(level: str, dist: str, why: str, fix: str) -> Finding:
    v = installed_version(dist)
    return Finding(level, f"{dist} ({why})", v is not None, v or "not installed", "" if v else fix)


def labextensions() -> dict[str, tuple[bool, str]] | None:
    """``jupyter labextension list`` as {name: (enabled and OK, its line)}; None without JupyterLab.

    Notebook 7 is built from JupyterLab's parts and loads the same extensions, so this one
    list answers for both frontends.
    """
    try:
        proc = subprocess.run([sys.executable, "-m", "jupyterlab.labextensions", "list"], capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)  # drop the colours
    if proc.returncode != 0 and "JupyterLab v" not in text:
        return None
    found = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1].startswith("v"):
            found[parts[0]] = ("enabled" in parts and "OK" in parts and "disabled" not in parts, line.strip())
    return found


def _extension_findings() -> list[Finding]:
    if installed_version("jupyterlab") is None and installed_version("notebook") is None:
        return [Finding("lab", "JupyterLab or Notebook 7", False, "neither is installed",
                        "pip install 'asgteach[lab]'   (JupyterLab 4, Notebook 7 and ipykernel)")]
    listed = labextensions()
    if listed is None:
        return [Finding("lab", "Jupyter frontend extensions", False,
                        "`jupyter labextension list` did not run in this environment",
                        "pip install 'asgteach[lab]', then run `jupyter labextension list` to see what fails")]
    out = []
    for name, (role, dist, fix) in EXTENSIONS.items():
        ok, line = listed.get(name, (False, "not found by `jupyter labextension list`"))
        if name in listed and not ok:
            fix = f"jupyter labextension enable {name}   (it is installed but not enabled)"
        out.append(Finding("lab", f"extension {name} ({role}, from {dist})", ok, line, "" if ok else fix))
    return out


def _adapter_findings() -> list[Finding]:
    from .backends import describe

    info = describe()["wgpu"]
    if info.get("available"):
        seen = f"{info.get('adapter')} ({info.get('device_type')}, {info.get('backend_type')})"
        if info.get("cpu_adapter"):
            seen += " - a CPU Vulkan driver: right answers, slow"
        return [Finding("optional", "WebGPU adapter (the wgpu backend)", True, seen)]
    reason = str(info.get("reason", "unknown"))
    if "not installed" in reason:
        fix = "pip install 'asgteach[gpu]'   (the wgpu package), then: sudo apt-get install mesa-vulkan-drivers"
    else:
        fix = ("sudo apt-get install mesa-vulkan-drivers libvulkan1   (Mesa's lavapipe: a CPU Vulkan driver), or "
               "your GPU vendor's driver; check with `vulkaninfo --summary` (package vulkan-tools)")
    icds = sorted(str(p) for d in ("/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d") for p in Path(d).glob("*.json"))
    seen = f"none - {reason.split(';')[0]}; Vulkan driver files: {', '.join(icds) or 'none'}"
    return [Finding("optional", "WebGPU adapter (the wgpu backend)", False, seen, fix)]


def _data_findings() -> list[Finding]:
    from . import resources

    out = []
    for what, find, pattern in (("WGSL shaders", resources.shaders_dir, "*.wgsl"),
                                ("lesson notebooks", resources.lessons_dir, "*.ipynb")):
        try:
            folder = find()
            out.append(Finding("required", what, True, f"{len(list(folder.glob(pattern)))} files in {folder}"))
        except FileNotFoundError as e:
            out.append(Finding("required", what, False, "missing", str(e)))
    return out


def diagnose() -> list[Finding]:
    """Every check, in the order a newcomer should fix them."""
    import asgteach

    findings = [Finding("required", "python >= 3.10", sys.version_info >= (3, 10), platform.python_version(),
                        "install Python 3.10 or newer (3.10 to 3.13 are tested)"),
                Finding("required", "asgteach", True, f"{asgteach.__version__} at {Path(asgteach.__file__).parent}")]
    needed = [("numpy", "the reference backend"), ("tqdm", "progress bars"), ("safetensors", "saving weights"),
              ("matplotlib", "plots")]
    if sys.version_info < (3, 11):  # 3.11 has tomllib in its standard library
        needed.append(("tomli", "reads the explanations' TOML files"))
    for dist, why in needed:
        findings.append(_package("required", dist, why, f"pip install {dist}"))
    findings.append(Finding("optional", "progress display", True, progress.describe()))
    findings += _data_findings()
    findings.append(_package("lab", "ipywidgets", "the inspector and toolbar", "pip install 'ipywidgets>=8.1,<9'"))
    findings.append(_package("lab", "ipycytoscape", "the clickable graph", "pip install 'ipycytoscape==1.3.3'"))
    findings.append(_package("lab", "ipykernel", "runs the notebooks", "pip install ipykernel"))
    for dist in ("jupyterlab", "notebook"):
        v = installed_version(dist)
        findings.append(Finding("lab", f"{dist} ({'JupyterLab 4' if dist == 'jupyterlab' else 'Notebook 7'})",
                                v is not None, v or "not installed", "" if v else "pip install 'asgteach[lab]'"))
    findings += _extension_findings()
    findings.append(_package("optional", "wgpu", "the WebGPU backend", "pip install 'asgteach[gpu]'"))
    if installed_version("wgpu") is not None:
        findings += _adapter_findings()
    return findings


def format_findings(findings: list[Finding]) -> str:
    """The report: one line per check, then what to do, most important first."""
    lines = []
    for f in findings:
        mark = "ok  " if f.ok else ("MISSING" if f.level != "optional" else "absent ")
        lines.append(f"  {mark:7s} {f.what}: {f.seen}")
    todo = [f for f in findings if not f.ok]
    if todo:
        lines.append("")
        lines.append("to fix:")
        for f in sorted(todo, key=lambda f: ("required", "lab", "optional").index(f.level)):
            tag = {"required": "needed", "lab": "for the notebooks", "optional": "optional"}[f.level]
            lines.append(f"  [{tag}] {f.what}\n      {f.fix}")
    return "\n".join(lines)


def as_json(findings: list[Finding]) -> str:
    """The findings as JSON (for scripts and hub health checks)."""
    return json.dumps([f.__dict__ for f in findings], indent=1)
