"""The ``asgteach`` command: start the course, check an install, see a first graph.

    asgteach lab      JupyterLab on the lessons, bound to 127.0.0.1 (extra arguments go to Jupyter)
    asgteach check    versions, backends, and a tiny graph run and gradient-checked on each backend
    asgteach demo     the DESIGN.md example graph: its nodes, its values, its gradient check
    asgteach student  student versions of the lessons: solutions cut out, outputs cleared

Every subcommand is a small function that returns an exit code; ``main`` only parses arguments.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

__all__ = ["main", "build_parser", "example_graph"]

# Distributions whose versions `asgteach check` reports (None = not installed).
_REPORTED = ("numpy", "scipy", "matplotlib", "ipywidgets", "ipycytoscape", "safetensors", "tqdm", "wgpu",
             "jupyterlab", "notebook")


# ---------------------------------------------------------------------------------------------------------------
# The example every newcomer sees first: the graph of DESIGN.md's API contract.
# ---------------------------------------------------------------------------------------------------------------

def example_graph(seed: int = 0) -> dict[str, Any]:
    """Build ``y = sum(relu(x @ w + c) ** 2)`` and its gradients ``dy/dx, dy/dw``, with seeded feeds.

    Returns a dict with the graph ``g``, the tensors ``x, w, y, dx, dw`` and float64 ``feeds``.
    """
    import asgteach as at

    with at.Graph(name="demo") as g:
        x = at.input("x", (4, 3))
        w = at.parameter("w", (3, 2), init="xavier_uniform")
        c = at.constant(np.ones(2))
        y = at.sum(at.relu(x @ w + c) ** 2)
        dx, dw = at.grad(y, [x, w])
    rng = np.random.default_rng(seed)
    feeds = {x: rng.standard_normal((4, 3)), w: rng.standard_normal((3, 2))}
    return {"g": g, "x": x, "w": w, "y": y, "dx": dx, "dw": dw, "feeds": feeds}


# ---------------------------------------------------------------------------------------------------------------
# asgteach check
# ---------------------------------------------------------------------------------------------------------------

def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _compare_backend(backend: str, ex: dict[str, Any], reference: list[np.ndarray]) -> float:
    """Run the example on ``backend`` in float32 and return the largest error relative to numpy's float64."""
    import asgteach as at

    feeds32 = {k: v.astype(np.float32) for k, v in ex["feeds"].items()}
    values = at.run([ex["y"], ex["dx"], ex["dw"]], feeds32, backend=backend)
    worst = 0.0
    for got, want in zip(values, reference):
        scale = 1.0 + float(np.max(np.abs(want)))
        worst = max(worst, float(np.max(np.abs(np.asarray(got, dtype=np.float64) - want))) / scale)
    return worst


def cmd_check(args: argparse.Namespace) -> int:
    """Print what is installed, which backends run here, and check a tiny graph on each of them."""
    import asgteach as at
    from asgteach import resources

    where = "checkout" if resources.is_checkout() else "installed"
    print(f"asgteach {at.__version__} ({where}: {resources.package_dir()})")
    print(f"python {platform.python_version()} ({sys.executable}) on {platform.platform()}")
    versions = ", ".join(f"{d} {_version(d) or '(not installed)'}" for d in _REPORTED)
    print(f"packages: {versions}")
    try:
        shaders = resources.shaders_dir()
        print(f"shaders: {shaders} ({len(list(shaders.glob('*.wgsl')))} .wgsl files)")
    except FileNotFoundError as e:
        print(f"shaders: MISSING - {e}")

    print("backends:")
    for name, info in at.describe().items():
        details = ", ".join(f"{k}={v}" for k, v in info.items() if k not in ("available", "reason"))
        state = "available" if info.get("available") else f"not available - {info.get('reason', 'unknown reason')}"
        print(f"  {name:6s} {state}{' (' + details + ')' if details else ''}")

    failures = 0
    ex = example_graph()
    reference = [np.asarray(v) for v in at.run([ex["y"], ex["dx"], ex["dw"]], ex["feeds"], backend="numpy")]
    print(f"tiny graph y = sum(relu(x @ w + c) ** 2) and dy/dx, dy/dw: {len(ex['g'].nodes)} nodes")
    print(f"  numpy: y = {float(reference[0]):.6g} (float64 reference)")
    for backend in at.available():
        if backend == "numpy":
            continue
        try:
            err = _compare_backend(backend, ex, reference)
        except Exception as e:  # noqa: BLE001 - any failure here is what `check` must report
            print(f"  {backend}: FAILED to run the graph - {type(e).__name__}: {e}")
            failures += 1
            continue
        ok = err < 1e-4  # float32 against a float64 reference
        failures += not ok
        print(f"  {backend}: {'ok' if ok else 'MISMATCH'} - max error vs numpy {err:.2g} (float32, tolerance 1e-4)")

    report = at.gradcheck(ex["y"], [ex["x"], ex["w"]], ex["feeds"])
    print(report.summary())
    failures += not report.ok

    if failures:
        print(f"NOT OK: {failures} check(s) failed (see above)")
        return 1
    print(f"OK: asgteach works here (backends: {', '.join(at.available())})")
    return 0


# ---------------------------------------------------------------------------------------------------------------
# asgteach demo
# ---------------------------------------------------------------------------------------------------------------

def cmd_demo(args: argparse.Namespace) -> int:
    """Build the DESIGN.md example, list its nodes, run it and gradient-check it."""
    import asgteach as at

    ex = example_graph(seed=args.seed)
    g = ex["g"]
    print("with at.Graph() as g:")
    print("    x = at.input('x', (4, 3))")
    print("    w = at.parameter('w', (3, 2), init='xavier_uniform')")
    print("    c = at.constant(np.ones(2))")
    print("    y = at.sum(at.relu(x @ w + c) ** 2)")
    print("    dx, dw = at.grad(y, [x, w])")
    print()
    print(f"{g!r} - forward nodes are what you wrote, backward nodes are what at.grad appended:")
    for n in g.nodes:
        inputs = ", ".join(f"#{i}" for i in n.inputs) or "-"
        print(f"  #{n.id:<3d} {n.phase:8s} {n.op:12s} {n.name[:18]:18s} shape={str(n.shape):8s} inputs: {inputs}")
    print()
    y, dx, dw = at.run([ex["y"], ex["dx"], ex["dw"]], ex["feeds"], backend=args.backend)
    with np.printoptions(precision=4, suppress=True):
        print(f"values on the {args.backend} backend (x, w drawn with seed {args.seed}):")
        print(f"  y = {float(y):.6g}")
        print(f"  dy/dx =\n{np.asarray(dx)}")
        print(f"  dy/dw =\n{np.asarray(dw)}")
    print()
    report = at.gradcheck(ex["y"], [ex["x"], ex["w"]], ex["feeds"])
    print(report.summary())
    return 0 if report.ok else 1


# ---------------------------------------------------------------------------------------------------------------
# asgteach lab
# ---------------------------------------------------------------------------------------------------------------

def _lab_folder(requested: str | None) -> Path:
    """The folder JupyterLab opens: the one asked for, the checkout's lessons/, or a writable copy."""
    from asgteach import resources

    if requested:
        return Path(requested).resolve()
    if resources.is_checkout():
        return resources.lessons_dir()
    # Installed from a wheel: site-packages may be read-only and is no place for a student's edits,
    # so the course is copied once into the current folder and that copy is opened from then on.
    target = Path.cwd() / "asgteach-lessons"
    if not target.exists():
        # (the installed lessons/ folder is also the asgteach.lessons package: copy the notebooks only)
        shutil.copytree(resources.lessons_dir(), target, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
        print(f"copied the lessons to {target} (your edits stay there)")
    return target


def cmd_lab(args: argparse.Namespace, jupyter_args: Sequence[str]) -> int:
    """Start JupyterLab on the lessons, listening on 127.0.0.1 only (add --ip=0.0.0.0 to share it)."""
    if importlib.util.find_spec("jupyterlab") is None:
        print("JupyterLab is not installed in this environment. Install it with:\n"
              "    pip install 'asgteach[lab]'", file=sys.stderr)
        return 1
    folder = _lab_folder(args.dir)
    if not folder.is_dir():
        print(f"no such folder: {folder}", file=sys.stderr)
        return 1
    cmd = [sys.executable, "-m", "jupyterlab", "--ip=127.0.0.1", f"--ServerApp.root_dir={folder}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # Jupyter refuses root without it; a fresh VM or a container is often root
    cmd += jupyter_args
    print("starting:", " ".join(cmd), flush=True)
    if os.name == "posix":
        os.execv(sys.executable, cmd)  # Jupyter takes over this process, so Ctrl-C reaches it directly
    return subprocess.call(cmd)


# ---------------------------------------------------------------------------------------------------------------
# asgteach student
# ---------------------------------------------------------------------------------------------------------------

def cmd_student(args: argparse.Namespace) -> int:
    """Write the student version of every notebook of SRC_DIR into OUT_DIR (see asgteach.lessons.student)."""
    from asgteach.lessons.student import SolutionMarkerError, write_student_versions

    try:
        written = write_student_versions(args.src_dir, args.out_dir)
    except (SolutionMarkerError, FileNotFoundError, ValueError) as e:
        print(f"asgteach student: {e}", file=sys.stderr)
        return 1
    for path, count in written:
        print(f"  {path}  ({count} exercise{'s' if count != 1 else ''})")
    total = sum(count for _, count in written)
    print(f"wrote {len(written)} student notebooks with {total} exercises to {args.out_dir}")
    return 0


# ---------------------------------------------------------------------------------------------------------------
# argument parsing
# ---------------------------------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="asgteach",
        description="asgteach: see how autograd works - build a graph, look at it, differentiate it, run it.",
        epilog="Run `asgteach COMMAND --help` for the options of one command.",
    )
    parser.add_argument("--version", action="version", version=f"asgteach {_version('asgteach') or '0.1.0'}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    lab = sub.add_parser(
        "lab", allow_abbrev=False, help="start JupyterLab on the lessons (127.0.0.1)",
        description="Start JupyterLab on the lessons folder, bound to 127.0.0.1. Any argument not listed here "
                    "goes to Jupyter unchanged, e.g. `asgteach lab --port 8899 --no-browser`.",
    )
    lab.add_argument("--dir", help="open this folder instead of the lessons")

    sub.add_parser(
        "check", help="show versions and backends; run and gradient-check a tiny graph",
        description="Print versions and the backends that run here, run a tiny graph on every available backend "
                    "(compared with numpy in float64) and gradient-check it. Exit code 0 means OK.",
    )

    demo = sub.add_parser(
        "demo", help="build, run and gradient-check the example graph",
        description="Build y = sum(relu(x @ w + c) ** 2) and its gradients, list the nodes of the graph, "
                    "print the values and the gradient check.",
    )
    demo.add_argument("--seed", type=int, default=0, help="seed of the random x and w (default 0)")
    demo.add_argument("--backend", default="numpy", help="numpy (default), wgpu or auto")

    student = sub.add_parser(
        "student", help="write student versions of the lessons (solutions cut out)",
        description="Write a student version of every notebook of SRC_DIR into OUT_DIR: the code between "
                    "'### BEGIN SOLUTION' and '### END SOLUTION' becomes raise NotImplementedError(\"exercise N\"), "
                    "outputs and execution counts are cleared, metadata is kept. Markers that do not pair up "
                    "are an error naming the notebook and the cell, and nothing is written.",
    )
    student.add_argument("src_dir", metavar="SRC_DIR", help="the folder of solution notebooks, e.g. lessons/")
    student.add_argument("out_dir", metavar="OUT_DIR", help="where to write the student notebooks")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``asgteach`` console script; returns the exit code."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command == "lab":
        return cmd_lab(args, extra)
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    commands = {"check": cmd_check, "demo": cmd_demo, "student": cmd_student}
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
