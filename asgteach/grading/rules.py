"""What an answer cell may not write: read from its source with ``ast``, before it runs.

A check that runs the student's function can tell a wrong number from a right one, but not
*how* a right number was made: by the work the exercise asks for, or by a library that does it
(``ml_dtypes``' bfloat16 cast for "write the rounding yourself", ``graphlib`` for "a
topological sort without recursion"), or by reaching into the checker (replacing
``lesson16.bfloat16_check``, calling a reference it holds). Those are visible in the
source, so this module reads it:

* :data:`HANDS_OFF` (every answer, in graded mode): no name of a checker module or check
  function, no ``lessons`` attribute (``at.lessons...``), none of the doors into the interpreter
  (``sys``, ``globals()``, ``getattr``, ``eval``/``exec``, ``__dict__``, ``__globals__``,
  frames...), no import of those modules;
* each exercise's own :class:`Rule` (in both modes): the library stand-ins and the constructs the
  exercise's text forbids ("numpy only", "no asgteach", "without recursion"). It lives with the
  lesson, in ``RULES`` of the lesson's module (``asgteach/lessons/lessonNN.py``: ``RULES[n]`` for
  exercise n); :func:`rule_for` finds that module by walking :mod:`asgteach.lessons` for the one
  whose ``LESSON`` is the notebook's stem.

:func:`problems` lists what a source breaks (with its line), :func:`enforce` raises the first
as an :class:`~asgteach.grading.exercises.ExerciseError`. The judge of a graded course
(:mod:`asgteach.grading.judge`) applies both to each answer cell; a check in a student's own
kernel applies its exercise's rule to the function it was given (its source, via ``inspect``).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from dataclasses import dataclass, field
from functools import lru_cache
from types import ModuleType
from typing import Any

from .exercises import ExerciseError

__all__ = ["Rule", "HANDS_OFF", "STAND_INS", "no_asgteach", "problems", "enforce", "rule_for", "lesson_modules",
           "all_rules"]

#: the checker's modules (asgteach.grading's, the lesson modules lesson00 ... lesson18 and their common helpers,
#: every lessonNN[x] by its pattern, _LESSON_MODULE,
#: and the names the checks had before they were one module per lesson) and the names the lessons import from
#: them: an answer never needs them
CHECKER_NAMES = frozenset({
    "lesson00", "lesson01", "lesson01b", "lesson02", "lesson03", "lesson04", "lesson05", "lesson06", "lesson07",
    "lesson08", "lesson09", "lesson10", "lesson11", "lesson12", "lesson13", "lesson14", "lesson15", "lesson16",
    "lesson17", "lesson18", "common", "grading", "judge_nbgrader",
    "checks", "lesson_checks", "checks_scratch", "checks_deep", "checks_memory", "checks_precision",
    "checks_custom_op", "checks_rnn", "exercises", "judge", "runner", "rules", "nbcourse", "student", "answer_keys",
    "check", "check_array", "check_equal", "check_function", "check_node_values", "check_tensor", "check_true",
    "check_vjp_rule", "without", "ExerciseError", "status", "suspects", "topo_graphs",
})
#: a lesson's check module by its name (lesson03, lesson10b, lesson19...): every one, found or added later
_LESSON_MODULE = re.compile(r"^lesson\d\d[a-z]?$")
#: modules that open the interpreter, the file system or other processes
DOORS = frozenset({
    "sys", "os", "posix", "importlib", "ctypes", "_ctypes", "cffi", "gc", "inspect", "builtins", "subprocess",
    "threading", "_thread", "multiprocessing", "concurrent", "signal", "atexit", "marshal", "pickle", "dill",
    "runpy", "types", "code", "codeop", "pathlib", "shutil", "socket", "traceback", "faulthandler", "resource",
    "nbgrader", "IPython", "linecache", "weakref", "asyncio", "pty", "tempfile", "io", "_io", "mmap", "fcntl",
    "pkgutil", "pydoc", "zipimport",
})
#: names (called or read) that reach around the language: the namespace, attributes by string, code from strings
DOOR_NAMES = frozenset({
    "globals", "locals", "vars", "eval", "exec", "compile", "__import__", "breakpoint", "open", "getattr",
    "setattr", "delattr", "__builtins__", "__build_class__",
    "attrgetter", "methodcaller", "resolve_name", "locate",   # attributes and modules named by a string
    "get_field",                                              # string.Formatter().get_field: a path as text
})
#: attributes that lead to a function's globals, a frame, a class's insides or the module table
DOOR_ATTRS = frozenset({
    "__dict__", "__globals__", "__code__", "__closure__", "__defaults__", "__kwdefaults__", "__builtins__",
    "__subclasses__", "__bases__", "__base__", "__mro__", "__getattribute__", "__import__", "__loader__",
    "__spec__", "__self__", "__func__", "__wrapped__", "__reduce__", "__reduce_ex__", "__setattr__",
    "__delattr__", "f_back", "f_globals", "f_locals", "f_builtins", "tb_frame", "gi_frame", "cr_frame",
    "ag_frame", "lessons", "grading", "modules", "_STATUS",
    "attrgetter", "methodcaller", "resolve_name", "locate", "get_field",
})


@dataclass(frozen=True)
class Rule:
    """What one exercise forbids, and why (the message quotes ``why``)."""

    why: str
    imports: frozenset[str] = field(default_factory=frozenset)   # modules (and their submodules)
    names: frozenset[str] = field(default_factory=frozenset)     # names read or called
    attrs: frozenset[str] = field(default_factory=frozenset)     # attributes read or called
    complex_numbers: bool = False                                 # 1j literals, complex(), .imag (complex step)
    strings: frozenset[str] = field(default_factory=frozenset)   # string constants that name what is refused
                                                                  # (an op looked up by name: apply("softplus", x))


#: a part of the rule every answer meets in a graded course (the judge's)
HANDS_OFF = Rule(why="an answer works with what the lesson gave it; it does not reach into the checker or the "
                     "interpreter", imports=DOORS | {"asgteach.lessons", "asgteach.grading"},
                 names=CHECKER_NAMES | DOOR_NAMES, attrs=DOOR_ATTRS)

#: libraries that do an exercise's work for it (autodiff, symbolic algebra, another library's bfloat16, a graph
#: library's topological sort): the usual ``imports`` of an exercise's rule
STAND_INS = frozenset({"torch", "jax", "tensorflow", "autograd", "sympy", "scipy", "numdifftools", "ml_dtypes",
                       "bfloat16", "mpmath", "networkx", "graphlib", "sklearn"})


def no_asgteach(why: str) -> Rule:
    """The most common rule: write it yourself (numpy or plain Python), neither asgteach nor a library stand-in."""
    return Rule(why=why, imports=STAND_INS | {"asgteach"}, names=frozenset({"at", "asgteach"}))


@lru_cache(maxsize=None)
def lesson_modules() -> dict[str, ModuleType]:
    """The course's lesson modules by notebook stem: every module of :mod:`asgteach.lessons` that sets ``LESSON``.

    Found by walking the package (:func:`pkgutil.iter_modules`), so a lesson's module is found by being there:
    no list of them is kept by hand. Two modules claiming one lesson are an error.
    """
    from .. import lessons

    found: dict[str, ModuleType] = {}
    for info in sorted(pkgutil.iter_modules(lessons.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{lessons.__name__}.{info.name}")
        stem = getattr(module, "LESSON", None)
        if not isinstance(stem, str):
            continue
        if stem in found:
            raise RuntimeError(f"{found[stem].__name__} and {module.__name__} both say LESSON = {stem!r}")
        found[stem] = module
    return found


def all_rules() -> dict[tuple[str, int], Rule]:
    """Every exercise's own rule, keyed by (lesson stem, exercise): the lesson modules' ``RULES`` together."""
    return {(stem, n): rule for stem, module in lesson_modules().items()
            for n, rule in getattr(module, "RULES", {}).items()}


def rule_for(lesson: str, n: int) -> Rule | None:
    """Exercise ``n`` of ``lesson`` (its file stem)'s own rule, if it has one: its lesson module's ``RULES[n]``."""
    module = lesson_modules().get(lesson)
    return None if module is None else getattr(module, "RULES", {}).get(n)


def _root(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node.id if isinstance(node, ast.Name) else None


def problems(source: str, rule: Rule, allow_names: frozenset[str] = frozenset({"exercise"})) -> list[str]:
    """What ``source`` (an answer cell, or a function's source) does that ``rule`` forbids: one line each.

    A source that does not parse is left to Python (it fails when it runs); ``allow_names`` are
    names the answer cell itself must write (``with exercise(N):``).
    """
    try:
        tree = ast.parse(_without_magics(source))
    except SyntaxError:
        return []
    found: list[str] = []

    def bad(node: ast.AST, what: str) -> None:
        found.append(f"line {getattr(node, 'lineno', '?')}: {what}")

    def module_banned(name: str) -> bool:
        return any(name == m or name.startswith(m + ".") for m in rule.imports)

    def name_banned(name: str) -> bool:
        return name in rule.names or (rule is HANDS_OFF and _LESSON_MODULE.match(name) is not None)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if module_banned(alias.name):
                    bad(node, f"imports {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level == 0 and module_banned(base):
                bad(node, f"imports from {base}")
            elif node.level == 0:
                for alias in node.names:
                    if module_banned(f"{base}.{alias.name}"):
                        bad(node, f"imports {base}.{alias.name}")
            for alias in node.names:
                if name_banned(alias.name):
                    bad(node, f"imports {alias.name}")
        elif isinstance(node, ast.Name) and name_banned(node.id) and node.id not in allow_names:
            bad(node, f"uses {node.id}")
        elif isinstance(node, ast.Attribute) and node.attr in rule.attrs:
            bad(node, f"uses .{node.attr}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in rule.strings:
            bad(node, f"names {node.value!r} in a string")
        elif rule.complex_numbers and isinstance(node, ast.Constant) and isinstance(node.value, complex):
            bad(node, f"uses the complex number {node.value!r} (a complex-step derivative is not the chain rule)")
        elif rule.complex_numbers and isinstance(node, ast.Name) and node.id == "complex":
            bad(node, "uses complex()")
        elif rule.complex_numbers and isinstance(node, ast.Attribute) and (node.attr in ("imag", "real") or
                                                                           "complex" in node.attr):
            bad(node, f"uses .{node.attr} (complex numbers)")
        elif isinstance(node, (ast.Global, ast.Nonlocal)) and set(node.names) & rule.names:
            bad(node, f"rebinds {', '.join(sorted(set(node.names) & rule.names))}")
    return found


def _without_magics(source: str) -> str:
    """IPython's ``%magic`` and ``!shell`` lines as ``pass`` (Python cannot parse them)."""
    return "\n".join(("pass" if line.lstrip().startswith(("%", "!")) else line) for line in source.splitlines())


def enforce(answer: Any, rule: Rule | None, name: str = "your answer") -> None:
    """Raise ExerciseError naming the first thing ``answer`` (source text, or a function/class) does against ``rule``.

    A function whose source cannot be read (defined in a plain ``python -c``) is not judged here.
    """
    if rule is None:
        return
    if isinstance(answer, str):
        source = answer
    else:
        try:
            source = inspect.getsource(answer)
        except (OSError, TypeError):
            return
    import textwrap

    found = problems(textwrap.dedent(source), rule)
    if found:
        raise ExerciseError(f"{name} {found[0]}, which this exercise does not allow: {rule.why}")
