"""What an answer cell may not write: read from its source with ``ast``, before it runs.

A check that runs the student's function can tell a wrong number from a right one, but not
*how* a right number was made: by the work the exercise asks for, or by a library that does it
(``ml_dtypes``' bfloat16 cast for "write the rounding yourself", ``graphlib`` for "a
topological sort without recursion"), or by reaching into the checker (replacing
``checks_precision.bfloat16_check``, calling a reference it holds). Those are visible in the
source, so this module reads it:

* :data:`HANDS_OFF` (every answer, in graded mode): no name of a checker module or check
  function, no ``lessons`` attribute (``at.lessons...``), none of the doors into the interpreter
  (``sys``, ``globals()``, ``getattr``, ``eval``/``exec``, ``__dict__``, ``__globals__``,
  frames...), no import of those modules;
* :data:`RULES` (per exercise, in both modes): the library stand-ins and the constructs the
  exercise's text forbids ("numpy only", "no asgteach", "without recursion").

:func:`problems` lists what a source breaks (with its line), :func:`enforce` raises the first
as an :class:`~asgteach.lessons.exercises.ExerciseError`. The judge of a graded course
(:mod:`asgteach.lessons.judge`) applies both to each answer cell; a check in a student's own
kernel applies :data:`RULES` to the function it was given (its source, via ``inspect``).
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass, field
from typing import Any

from .exercises import ExerciseError

__all__ = ["Rule", "RULES", "HANDS_OFF", "problems", "enforce", "rule_for"]

#: modules of asgteach.lessons and the names the lessons import from it: an answer never needs them
CHECKER_NAMES = frozenset({
    "checks", "lesson_checks", "checks_scratch", "checks_deep", "checks_memory", "checks_precision",
    "checks_custom_op", "checks_rnn", "exercises", "judge", "runner", "rules", "nbcourse", "student", "answer_keys",
    "check", "check_array", "check_equal", "check_function", "check_node_values", "check_tensor", "check_true",
    "check_vjp_rule", "without", "ExerciseError", "status", "suspects",
})
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
})
#: attributes that lead to a function's globals, a frame, a class's insides or the module table
DOOR_ATTRS = frozenset({
    "__dict__", "__globals__", "__code__", "__closure__", "__defaults__", "__kwdefaults__", "__builtins__",
    "__subclasses__", "__bases__", "__base__", "__mro__", "__getattribute__", "__import__", "__loader__",
    "__spec__", "__self__", "__func__", "__wrapped__", "__reduce__", "__reduce_ex__", "__setattr__",
    "__delattr__", "f_back", "f_globals", "f_locals", "f_builtins", "tb_frame", "gi_frame", "cr_frame",
    "ag_frame", "lessons", "modules", "_STATUS",
    "attrgetter", "methodcaller", "resolve_name", "locate",
})


@dataclass(frozen=True)
class Rule:
    """What one exercise forbids, and why (the message quotes ``why``)."""

    why: str
    imports: frozenset[str] = field(default_factory=frozenset)   # modules (and their submodules)
    names: frozenset[str] = field(default_factory=frozenset)     # names read or called
    attrs: frozenset[str] = field(default_factory=frozenset)     # attributes read or called
    complex_numbers: bool = False                                 # 1j literals, complex(), .imag (complex step)


#: a part of the rule every answer meets in a graded course (the judge's)
HANDS_OFF = Rule(why="an answer works with what the lesson gave it; it does not reach into the checker or the "
                     "interpreter", imports=DOORS | {"asgteach.lessons"}, names=CHECKER_NAMES | DOOR_NAMES,
                 attrs=DOOR_ATTRS)

_STAND_INS = frozenset({"torch", "jax", "tensorflow", "autograd", "sympy", "scipy", "numdifftools", "ml_dtypes",
                        "bfloat16", "mpmath", "networkx", "graphlib", "sklearn"})


def _no_asgteach(why: str) -> Rule:
    """The most common rule: write it yourself (numpy or plain Python), neither asgteach nor a library stand-in."""
    return Rule(why=why, imports=_STAND_INS | {"asgteach"}, names=frozenset({"at", "asgteach"}))


#: (lesson stem, exercise) -> the exercise's own rule; the notebook's text states each one
RULES: dict[tuple[str, int], Rule] = {
    ("01b-autograd-from-scratch", 1): Rule(
        why="write the topological sort yourself, with an explicit stack (no recursion, no library)",
        imports=_STAND_INS, names=frozenset({"topo_order_recursive", "at", "asgteach"})),
    ("03-chain-rule-and-reverse-mode", 1): Rule(
        why="numpy only: apply the chain rule node by node (no asgteach, no symbolic or complex-step derivative)",
        imports=_STAND_INS | {"asgteach", "cmath"}, names=frozenset({"at", "asgteach"}), complex_numbers=True),
    ("01b-autograd-from-scratch", 2): _no_asgteach(
        "plain Python: the exercise is the _backward closure, and an answer that uses asgteach skips it"),
    ("01b-autograd-from-scratch", 3): _no_asgteach(
        "plain Python: the exercise is the power rule, and an answer that uses asgteach skips it"),
    ("04-broadcasting", 1): _no_asgteach("numpy only: the reduction is the exercise"),
    ("05-matrix-calculus", 1): _no_asgteach("the two products by hand, in numpy"),
    ("05-matrix-calculus", 2): _no_asgteach("the two products by hand, in numpy"),
    ("06-nonlinearities-and-softmax", 1): _no_asgteach("with numpy only (no other library's log_softmax)"),
    ("06-nonlinearities-and-softmax", 2): _no_asgteach("with numpy only (no other library's gradient)"),
    ("07-normalisation", 1): _no_asgteach("with numpy only"),
    ("07-normalisation", 2): _no_asgteach("the formula of section 3, with numpy only"),
    ("08-training-an-mlp", 1): _no_asgteach("the update in numpy"),
    ("09-attention-and-a-transformer-block", 1): _no_asgteach("with numpy only"),
    ("12-convolution-and-pooling", 2): _no_asgteach("with numpy (no other library's convolution gradient)"),
    ("12-convolution-and-pooling", 3): _no_asgteach(
        "by hand (no asgteach): the routing of the gradient is the exercise"),
    ("10-higher-order-and-forward-mode", 4): Rule(
        why="the formula of section 6, with numpy only: asgteach's jvp, grad and softmax are the work which the "
            "exercise asks you to write yourself",
        imports=_STAND_INS | {"asgteach"}, names=frozenset({"at", "asgteach", "jvp", "grad", "hvp"})),
    ("10-higher-order-and-forward-mode", 5): Rule(
        why="build J t from reverse-mode sweeps (at.grad) only: an answer that calls asgteach.jvp uses forward mode",
        imports=_STAND_INS, names=frozenset({"jvp"}), attrs=frozenset({"jvp"})),
    ("14-deep-nets-vanishing-and-exploding", 2): Rule(
        why="a formula in width, std and slope: no network, no measurement",
        imports=_STAND_INS | {"asgteach"}, names=frozenset({"at", "asgteach", "feeds_for", "train"})),
    ("14-deep-nets-vanishing-and-exploding", 3): Rule(
        why="write the clipping with numpy: a call into asgteach hands the work to asgteach's own clipping "
            "(clip_grad_norm is what you are rebuilding)",
        imports=_STAND_INS | {"asgteach"}, names=frozenset({"at", "asgteach"}),
        attrs=frozenset({"clip_grad_norm", "clip_grad_norm_"})),
    ("16-precision-and-loss-scaling", 1): Rule(
        why="write the rounding yourself on the bits, with numpy (no bfloat16 type of another library)",
        imports=_STAND_INS | {"asgteach", "struct"}, names=frozenset({"at", "asgteach"})),
    ("17-your-own-op", 2): Rule(   # numpy's own stable tools (np.logaddexp, np.log1p) are fair game: the point is
        # a formula that stays finite, in numpy, not another library's loss
        why="the loss in numpy (another library's loss function is not the exercise)",
        imports=_STAND_INS, attrs=frozenset({"binary_cross_entropy_with_logits"})),
    ("18-rnn-and-backprop-through-time", 2): Rule(
        why="measure the norms by the backward recursion of section 3, with numpy",
        imports=_STAND_INS | {"asgteach"}, names=frozenset({"at", "asgteach"})),
}


def rule_for(lesson: str, n: int) -> Rule | None:
    """Exercise ``n`` of ``lesson`` (its file stem)'s own rule, if it has one."""
    return RULES.get((lesson, n))


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
                if alias.name in rule.names:
                    bad(node, f"imports {alias.name}")
        elif isinstance(node, ast.Name) and node.id in rule.names and node.id not in allow_names:
            bad(node, f"uses {node.id}")
        elif isinstance(node, ast.Attribute) and node.attr in rule.attrs:
            bad(node, f"uses .{node.attr}")
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
