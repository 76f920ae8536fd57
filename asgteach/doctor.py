"""``asgteach doctor``: is everything here that the course needs, and if not, what to install.

Each check is a :class:`Finding`: what was looked at, whether it is fine, what was seen,
and — when it is not fine — the one command or step that fixes it. Findings come in four
levels: ``required`` (asgteach itself cannot work), ``lab`` (the notebooks cannot show the
clickable graph), ``optional`` (the GPU backend; numpy works without it) and ``info`` (what
was seen, nothing to fix: which front-end runs this (:mod:`asgteach.frontend`) and what works
there, and what the GPU drivers printed while they were probed, which
:mod:`asgteach.fdcapture` keeps out of notebook cells).
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

from . import fdcapture, frontend, progress

__all__ = ["Finding", "diagnose", "format_findings", "labextensions", "as_json", "installed_version",
           "frontend_findings", "gpu_probe_findings"]

#: the two JupyterLab/Notebook 7 frontend extensions the graph view needs, and the package that ships each
#: (both come with pip: anywidget's front-end runs the view's bundled JavaScript, nothing of ours to install)
EXTENSIONS = {
    "@jupyter-widgets/jupyterlab-manager": ("the Jupyter widgets manager", "jupyterlab_widgets",
                                            "pip install 'jupyterlab_widgets>=3' 'ipywidgets>=8.1,<9'"),
    "anywidget": ("anywidget's front-end, which runs the graph view", "anywidget", "pip install 'anywidget>=0.9,<1'"),
}
#: Lines GPU drivers are known to print while probed, and what each means for a student.
KNOWN_PROBE_LINES = {
    "XDG_RUNTIME_DIR": "harmless: Mesa's Vulkan drivers look for a Wayland display, which computing does not need "
                       "(set XDG_RUNTIME_DIR to a private directory, e.g. /run/user/$(id -u), to silence it)",
}


@dataclass
class Finding:
    """One check: ``ok`` or not, what was ``seen``, and the ``fix`` when not ok."""

    level: str          # "required", "lab", "optional" or "info"
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


def frontend_findings() -> list[Finding]:
    """Which front-end this runs under (:func:`asgteach.frontend.detect`) and what the graph view does there."""
    fe = frontend.detect()
    return [Finding("info", "front-end", True, f"{fe.name} ({fe.seen})"),
            Finding("info", f"what works in {fe.name}", True, fe.what_works)]


def gpu_probe_findings() -> list[Finding]:
    """What the GPU drivers printed to stderr while the adapters were listed (probing first if need be).

    The probe captures it (:mod:`asgteach.fdcapture`), so it never lands in a notebook cell; here
    each distinct line is shown once with its count, and a known line with what it means.
    """
    if installed_version("wgpu") is None:
        return []
    from .backends import available

    available()   # lists the adapters once per process (captured); a second call only reads the cache
    said = fdcapture.messages().get("GPU probe", "")
    lines = [line.strip() for line in said.splitlines() if line.strip()]
    if not lines:
        return [Finding("info", "GPU probe messages", True, "none (the drivers printed nothing)")]
    counts: dict[str, int] = {}
    for line in lines:
        counts[line] = counts.get(line, 0) + 1
    seen = "; ".join(f"{line} ({n}x)" if n > 1 else line for line, n in counts.items())
    notes = [note for key, note in KNOWN_PROBE_LINES.items() if key in said]
    return [Finding("info", "GPU probe messages (kept out of notebook cells)", True,
                    seen + (" - " + "; ".join(notes) if notes else ""))]


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

    findings = frontend_findings()
    findings += [Finding("required", "python >= 3.10", sys.version_info >= (3, 10), platform.python_version(),
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
    findings.append(_package("lab", "ipywidgets", "the widget protocol", "pip install 'ipywidgets>=8.1,<9'"))
    findings.append(_package("lab", "anywidget", "the clickable graph", "pip install 'anywidget>=0.9,<1'"))
    findings.append(_package("lab", "ipykernel", "runs the notebooks", "pip install ipykernel"))
    for dist in ("jupyterlab", "notebook"):
        v = installed_version(dist)
        findings.append(Finding("lab", f"{dist} ({'JupyterLab 4' if dist == 'jupyterlab' else 'Notebook 7'})",
                                v is not None, v or "not installed", "" if v else "pip install 'asgteach[lab]'"))
    findings += _extension_findings()
    findings.append(_package("optional", "wgpu", "the WebGPU backend", "pip install 'asgteach[gpu]'"))
    if installed_version("wgpu") is not None:
        findings += _adapter_findings()
        findings += gpu_probe_findings()
    return findings


def format_findings(findings: list[Finding]) -> str:
    """The report: one line per check, then what to do, most important first."""
    lines = []
    for f in findings:
        mark = "info" if f.level == "info" else "ok  " if f.ok else ("MISSING" if f.level != "optional" else "absent ")
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
