"""Imports run one way: down the layers of docs/DESIGN.md ("Layout").

The test reads every module of the package with ``ast`` (nothing is imported) and lists each
import of one of our modules, wherever it is written: at the top, inside a function (a lazy
import is still a dependency: it only runs later), or as ``importlib.import_module("asgteach...")``.
Only imports under ``if TYPE_CHECKING:`` are left out: they exist for type checkers and never run.

A module may import

* modules of its own unit (a package and its submodules, or the modules named together below), and
* modules of a LOWER layer.

Anything else fails: an import up a layer, and an import between two units of one layer (``nn``
and ``widgets`` stay independent of each other). When a module is added, put it in ``LAYERS``.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "asgteach"

#: The layers, bottom first: {unit: the modules (and packages) it holds}.
LAYERS: list[dict[str, tuple[str, ...]]] = [
    {  # 0: leaves, importing nothing of ours
        "source": ("asgteach.source",),          # the user's file:line, for errors
        "usertext": ("asgteach.usertext",),      # user text made safe for HTML / MathJax
        "resources": ("asgteach.resources",),    # where shaders and lessons live
        "plots": ("asgteach.plots",),            # matplotlib figures (gradcheck, loss chart)
        "datasets": ("asgteach.datasets",),      # small bundled data sets
        "progress": ("asgteach.progress",),      # tqdm bars where someone watches, plain lines in logs
        "hooks": ("asgteach.hooks",),            # what a higher layer hands down to a lower one
        "fdcapture": ("asgteach.fdcapture",),    # what C code prints to fd 2 (the GPU probe), kept out of cells
        "frontend": ("asgteach.frontend",),      # which notebook front-end (or none) runs this process
    },
    {  # 1: the graph and the shape rules
        "shapes": ("asgteach.shapes",),
        # graph_json: the JSON format and its load checks; session: live Tensors, names, cells, the default graph
        "graph": ("asgteach.graph", "asgteach.graph_json", "asgteach.session"),
    },
    {  # 2: the ops. Tensor is the ops' handle: its operators call ops, and every op returns a Tensor
        "ops": ("asgteach.ops", "asgteach.tensor"),
    },
    {  # 3: what reads the op registry: differentiation, explanations, sample inputs
        "autograd": ("asgteach.autograd",),
        "batching": ("asgteach.batching",),      # at.vmap: a batch axis, graph -> graph, by the ops' batching rules
        "explain": ("asgteach.explain",),
        "opsamples": ("asgteach.opsamples",),
    },
    {  # 4: running graphs
        "backends": ("asgteach.backends",),
    },
    {  # 5: checking gradients; re-running notebook cells (drops cached plans)
        "gradcheck": ("asgteach.gradcheck",),
        "cells": ("asgteach.cells",),
    },
    {  # 6: layers and training; the notebook views
        "nn": ("asgteach.nn",),
        "widgets": ("asgteach.widgets",),
    },
    {  # 7: the public API (`import asgteach as at`)
        "api": ("asgteach",),
    },
    {  # 8: what is built from the public API: the course and the tools
        # the course (asgteach.lessons: one module per lesson) and the grading engine that finds its lessons by walking
        # it (asgteach.grading): one unit, as they were one package
        "lessons": ("asgteach.lessons", "asgteach.grading"),
        "course": ("asgteach.course",),
        "demo": ("asgteach.demo",),
        "doctor": ("asgteach.doctor",),
        "examples": ("asgteach.examples",),
        "opcheck": ("asgteach.opcheck",),
        "hub": ("asgteach.hub",),                # the nbgitpuller link (`asgteach link`)
    },
    {  # 9: the command line
        "cli": ("asgteach.cli", "asgteach.__main__"),
    },
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
TREES: dict[str, ast.Module] = {m: ast.parse(p.read_text(encoding="utf-8"), str(p)) for m, p in MODULES.items()}


def unit_of(module: str) -> tuple[int, str] | None:
    """(layer, unit) of ``module``: the unit naming the longest prefix of it ("asgteach" itself: exactly)."""
    best: tuple[int, int, str] | None = None
    for layer, units in enumerate(LAYERS):
        for unit, prefixes in units.items():
            for prefix in prefixes:
                if module == prefix or (prefix != "asgteach" and module.startswith(prefix + ".")):
                    if best is None or len(prefix) > best[0]:
                        best = (len(prefix), layer, unit)
    return None if best is None else (best[1], best[2])


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name a ``from ... import`` reads from."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level > 1:
        base = base[: -(node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _targets(module: str, is_package: bool, node: ast.AST) -> list[str]:
    """The modules of ours that the import statement (or import_module call) ``node`` loads."""
    names: list[str] = []
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = _resolve(module, is_package, node)
        # `from asgteach import ops` loads the module asgteach.ops; `from asgteach import Tensor` loads asgteach
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
    elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if called == "import_module" and isinstance(node.args[0].value, str):
            names = [node.args[0].value]
    out = []
    for name in names:
        if name != "asgteach" and not name.startswith("asgteach."):
            continue
        # importing a.b.c runs a.b's __init__ too (the root package's is always running already)
        parts = name.split(".")
        out += [".".join(parts[:k]) for k in range(2, len(parts))] + [name]
    return out


def _walk(tree: ast.AST):
    """Every node, except what sits under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def import_edges() -> list[tuple[str, int, str]]:
    """(module, line, imported module) for every import of ours in the package."""
    edges = []
    for module, path in MODULES.items():
        tree = TREES[module]
        for node in _walk(tree):
            for target in _targets(module, path.name == "__init__.py", node):
                edges.append((module, node.lineno, target))
    return edges


EDGES = import_edges()


def test_the_walk_sees_top_level_lazy_and_dynamic_imports_but_not_type_checking_ones() -> None:
    tree = ast.parse("from typing import TYPE_CHECKING\n"
                     "from .graph import Graph\n"
                     "if TYPE_CHECKING:\n    from .widgets import view\n"
                     "def f():\n    from . import nn\n    import asgteach.backends.common\n"
                     "    importlib.import_module('asgteach.lessons')\n")
    found = sorted(t for node in _walk(tree) for t in _targets("asgteach.tensor", False, node))
    assert found == ["asgteach.backends", "asgteach.backends.common", "asgteach.graph", "asgteach.lessons",
                     "asgteach.nn"]


def test_every_module_has_a_layer() -> None:
    missing = sorted(m for m in MODULES if unit_of(m) is None)
    assert not missing, f"put these modules in a unit of LAYERS (tests/test_imports.py) and DESIGN.md: {missing}"


def test_imports_only_go_down() -> None:
    deepest: dict[tuple[str, int, str], str] = {}  # (module, line, unit reached) -> the module named there
    for module, line, target in EDGES:
        (layer, unit), (to_layer, to_unit) = unit_of(module) or (-1, "?"), unit_of(target) or (-1, "?")
        if unit != to_unit and to_layer >= layer and len(target) > len(deepest.get((module, line, to_unit), "")):
            deepest[(module, line, to_unit)] = target
    wrong = []
    for (module, line, to_unit), target in deepest.items():
        (layer, unit), to_layer = unit_of(module) or (-1, "?"), (unit_of(target) or (-1, "?"))[0]
        wrong.append(f"{MODULES[module].relative_to(PACKAGE.parent)}:{line} imports {target} "
                     f"({'up' if to_layer > layer else 'sideways'}: {unit} is layer {layer}, "
                     f"{to_unit} is layer {to_layer})")
    assert not wrong, "imports that do not go down a layer:\n  " + "\n  ".join(sorted(wrong))


def test_leaves_import_nothing_of_ours_and_graph_only_leaves() -> None:
    """Layer 0 may be used by anyone because it uses nothing; the graph unit, the bottom of the stack, reads only
    it and its own modules (graph_json, the file format; session, how a graph is used)."""
    for module, _, target in EDGES:
        layer, unit = unit_of(module) or (-1, "?")
        if layer == 0:
            assert unit_of(target) == (layer, unit), f"{module} is a leaf but imports {target}"
        if unit == "graph" and unit_of(target) != (layer, unit):
            assert (unit_of(target) or (-1, "?"))[0] == 0, f"{module} imports {target}, which is not a leaf"


def test_our_modules_are_imported_plainly() -> None:
    """Only optional third-party packages may sit in a try/except: a broken module of ours must fail loudly."""
    guarded = []
    for module, path in MODULES.items():
        tree = TREES[module]
        for node in ast.walk(tree):
            if not isinstance(node, ast.Try) or not node.handlers:
                continue
            for inner in (n for stmt in node.body for n in ast.walk(stmt)):
                if _targets(module, path.name == "__init__.py", inner):
                    guarded.append(f"{path.relative_to(PACKAGE.parent)}:{inner.lineno}")
    assert not guarded, f"imports of our own modules inside try/except: {guarded}"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses() -> list[str]:
    """Private names (``_x``) of one unit used by another: imported, or read off an imported module."""
    found = []
    for module, path in MODULES.items():
        here = unit_of(module)
        tree = TREES[module]
        aliases: dict[str, str] = {}  # local name -> our module it stands for
        for node in _walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = _resolve(module, path.name == "__init__.py", node)
                for a in node.names:
                    full = f"{base}.{a.name}"
                    if full in MODULES:
                        aliases[a.asname or a.name] = full
                    elif (base == "asgteach" or base.startswith("asgteach.")) and _private(a.name) \
                            and unit_of(base) != here:
                        found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} imports {base}.{a.name}")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in MODULES and a.asname:
                        aliases[a.asname] = a.name
        for node in _walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _private(node.attr)
                    and node.value.id in aliases and unit_of(aliases[node.value.id]) != here):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} uses "
                             f"{aliases[node.value.id]}.{node.attr}")
    return sorted(set(found))


def test_no_private_names_across_units() -> None:
    """A helper another unit needs is public where it belongs (and documented), not reached for as ``_x``."""
    found = private_uses()
    assert not found, "private names used from another unit:\n  " + "\n  ".join(found)


# --- the same rule for tests: they test behaviour through public names --------------------------------------
TESTS = PACKAGE.parent / "tests"
#: names that start with "_" but are public protocols, not private state (namedtuple's methods; the
#: display protocol's ``_repr_html_``-style names end with "_" and are left out by ``_private_read``)
PROTOCOL_NAMES = frozenset({"_replace", "_asdict", "_fields", "_make", "_field_defaults"})

#: Test files that may read a private name of the package, each with how many reads and why. A file may read
#: no more than its number, and a file not listed none, so a new private read fails
#: (``cd tests && python -c "import test_imports as t; print(t.private_reads_in_tests())"`` prints them). What a
#: test needs is made public where it belongs (documented), or the test asserts the behaviour instead; the one
#: read left is not the test's own: it is the text of an attack the test makes a check refuse.
PRIVATE_READS_ALLOWED: dict[str, int] = {
    # the attack under test: a student's answer that imports the check's own private Value class must be refused
    "test_lesson_scratch.py": 1,            # _Scalar
}


def _private_read(name: str) -> bool:
    return _private(name) and not name.endswith("_") and name not in PROTOCOL_NAMES


def _test_private_reads(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, what) for each private name of asgteach a test module reads, writes or patches.

    Counted: ``from asgteach... import _x``; ``module._x`` for a module of ours; ``obj._x`` on any other
    object, unless ``_x`` is a name the test module defines itself (a function, class, variable, argument or
    ``self._x`` of its own helpers) or ``obj`` is a module that is not ours (``sys._getframe``); and
    ``getattr/setattr/hasattr/delattr(obj, "_x")`` (``monkeypatch.setattr`` too) with such a name.
    """
    own: set[str] = set()
    foreign: set[str] = set()   # names bound to modules that are not ours
    ours: set[str] = set()      # names bound to our modules or things imported from them
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif isinstance(node, ast.arg):
            own.add(node.arg)
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name)
              and node.value.id in ("self", "cls")):
            own.add(node.attr)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            base = node.module or "" if isinstance(node, ast.ImportFrom) else ""
            for a in node.names:
                top = (base or a.name).split(".")[0]
                bound = a.asname or (a.name if base else a.name.split(".")[0])
                (ours if top == "asgteach" else foreign).add(bound)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "asgteach" and not node.level:
            found += [(node.lineno, f"from {node.module} import {a.name}") for a in node.names if _private_read(a.name)]
        elif isinstance(node, ast.Attribute) and _private_read(node.attr):
            value = node.value
            if isinstance(value, ast.Name) and (value.id in ("self", "cls") or value.id in foreign):
                continue
            if node.attr in own and not (isinstance(value, ast.Name) and value.id in ours):
                continue
            found.append((node.lineno, f"{ast.unparse(value)}.{node.attr}"))
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called not in ("getattr", "setattr", "hasattr", "delattr"):
                continue
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):   # setattr("asgteach.x._y", v)
                parts = first.value.split(".")
                if parts[0] == "asgteach" and any(_private_read(p) for p in parts):
                    found.append((node.lineno, f"{called}({first.value!r})"))
            elif (len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
                  and _private_read(node.args[1].value) and node.args[1].value not in own):
                found.append((node.lineno, f"{called}({ast.unparse(first)}, {node.args[1].value!r})"))
    return sorted(found)


def private_reads_in_tests() -> dict[str, list[str]]:
    """{test file (relative to tests/): ["line: what", ...]} for every test file that reads a private name of ours."""
    out = {}
    for path in sorted(TESTS.rglob("*.py")):
        reads = _test_private_reads(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        if reads:
            out[path.relative_to(TESTS).as_posix()] = [f"{line}: {what}" for line, what in reads]
    return out


def test_the_test_rule_sees_package_privates_but_not_a_tests_own() -> None:
    tree = ast.parse("import sys\nimport asgteach as at\nfrom asgteach.gradcheck import _progress_bar\n"
                     "from asgteach.lessons import lesson_checks\n"
                     "class Helper:\n    def __init__(self):\n        self._n = 0\n    def n(self):\n"
                     "        return self._n\n"
                     "def _mine():\n    return sys._getframe(1), Helper()._n, at.Graph()._by_name, rep._repr_html_()\n"
                     "def test(monkeypatch, plan):\n    plan._in_place, lesson_checks._peak_bytes\n"
                     "    monkeypatch.setattr(lesson_checks, '_peak', 1)\n    _mine()\n"
                     "    monkeypatch.setattr('asgteach.backends._private', 1)\n    p._replace(a=1)\n")
    assert [what for _, what in _test_private_reads(tree)] == [
        "from asgteach.gradcheck import _progress_bar", "at.Graph()._by_name", "lesson_checks._peak_bytes",
        "plan._in_place", "setattr(lesson_checks, '_peak')", "setattr('asgteach.backends._private')"]


def test_tests_read_no_private_names_of_the_package() -> None:
    """Tests test behaviour through public names: the rule above, for tests/ (the allowlist aside)."""
    wrong = [f"{name}: {len(reads)} private reads, {PRIVATE_READS_ALLOWED.get(name, 0)} allowed:\n      "
             + "\n      ".join(reads)
             for name, reads in sorted(private_reads_in_tests().items())
             if len(reads) > PRIVATE_READS_ALLOWED.get(name, 0)]
    assert not wrong, ("test files and the private names of asgteach they read (make what a test needs public "
                       "and documented where it belongs, or assert the behaviour):\n  " + "\n  ".join(wrong))


def test_a_graph_is_drawn_through_the_hook_the_widgets_set() -> None:
    """graph.py imports no widgets: widgets.show hands it the notebook display; without it, the plain repr."""
    import asgteach as at
    from asgteach import hooks
    from asgteach.widgets.show import notebook_bundle

    assert hooks.display is notebook_bundle
    with at.Graph() as g:
        x = at.input("x", (2,))
    saved, hooks.display = hooks.display, None
    try:
        assert x._repr_mimebundle_() == {"text/plain": repr(x)} and g._repr_mimebundle_() == {"text/plain": repr(g)}
    finally:
        hooks.display = saved
    assert "image/png" in x._repr_mimebundle_()   # the picture (an untrusted notebook shows PNG, not HTML)


def test_every_hook_is_handed_down_by_the_module_its_docstring_names() -> None:
    """hooks.py's table says who sets each slot: loading the package sets both, and there are only the two
    upward reaches a lower layer cannot do without (issue 37): drawing itself, noticing a notebook shell."""
    from asgteach import cells, hooks

    assert set(hooks.__all__) == {"display", "on_default_use"}
    assert hooks.on_default_use is not None and hooks.on_default_use.__module__ == cells.__name__


def test_a_planted_accumulation_bug_is_autograds_own_and_stays_in_its_block_and_thread() -> None:
    """``autograd.accumulation`` (the bug hunts' public name) swaps the sum for its block, in this thread only."""
    import threading

    import asgteach as at
    from asgteach import autograd

    def last_one_wins(parts, node_id, graph):
        return parts[-1]

    def twice_used() -> str:
        with at.Graph():
            x = at.input("x", (3,))
            return at.grad(at.sum(x * x), x).op

    other: list[str] = []
    with autograd.accumulation(last_one_wins):
        assert twice_used() == "mul"                     # one use's part only: the planted bug
        t = threading.Thread(target=lambda: other.append(twice_used()))
        t.start()
        t.join()
    assert other == ["add"]                              # another thread kept the true rule
    assert twice_used() == "add"                         # and so does this one, after the block


def test_the_gpu_program_knows_nothing_of_the_training_layer_over_it() -> None:
    """Issue 37: the compiled program (wgpu_program) and resident training (wgpu_resident) are apart. The layer
    imports the program; the program, and everything it is made of, never imports the layer; only the backend's
    face (wgpu_backend) names both. And no module of the backends is a knot: none is over 600 lines."""
    pkg = "asgteach.backends."
    importers = {m for m, _, t in EDGES if t == pkg + "wgpu_resident"}
    assert importers == {pkg + "wgpu_backend"}, importers
    assert (pkg + "wgpu_resident", pkg + "wgpu_program") in {(m, t) for m, _, t in EDGES}
    program_reach = {t for m, _, t in EDGES if m == pkg + "wgpu_program"}
    assert pkg + "wgpu_resident" not in program_reach and pkg + "wgpu_backend" not in program_reach
    long = {m: n for m, p in MODULES.items() if m.startswith(pkg)
            and (n := len(p.read_text(encoding="utf-8").splitlines())) > 600}
    assert not long, f"backend modules over 600 lines: {long}"
