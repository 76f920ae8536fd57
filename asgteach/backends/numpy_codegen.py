"""The numpy plan written out as one straight-line Python function (``plan.source``).

:func:`generate` turns the plan's steps into source code, one line per kernel, with ``del``
lines where values die and ``out=`` where a kernel writes in place, then compiles it.
The generated program calls three helpers of this module to hand outputs over to the
caller (``_copy``, ``_own``, ``_writable``: see ``numpy_memory.plan_outputs``).
"""

from __future__ import annotations

import builtins
import math
import re
from functools import partial
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from .numpy_memory import Handover

if TYPE_CHECKING:
    from .numpy_plan import Step

__all__ = ["generate", "literal"]


def _copy(a: Any) -> np.ndarray:
    """A new array holding ``a``'s values (always an ndarray, also for a numpy scalar)."""
    return np.array(a, copy=True)


def _writable(a: Any) -> np.ndarray:
    """``a`` if it is a writable ndarray, else a writable copy."""
    return a if type(a) is np.ndarray and a.flags.writeable else np.array(a, copy=True)


def _own(a: Any, avoid: tuple[Any, ...]) -> np.ndarray:
    """``a`` if it owns its memory, is writable and is none of ``avoid``; else a copy.

    An array that owns its memory is no view of anything, so it can only alias another
    array by *being* it (a kernel may return its input unchanged): hence the ``is`` tests.
    """
    if type(a) is np.ndarray and a.flags.owndata and a.flags.writeable and not any(a is b for b in avoid):
        return a
    return np.array(a, copy=True)


def literal(value: Any) -> str | None:
    """``value`` as Python source, when it is a plain literal that reads back equal; else None."""
    if value is None or type(value) in (bool, int, str) or (type(value) is float and math.isfinite(value)):
        return repr(value)
    if type(value) is tuple:
        parts = [literal(v) for v in value]
        if all(p is not None for p in parts):
            return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"  # type: ignore[arg-type]
    return None


_RESERVED = re.compile(r"[vo]\d+|env|program|_copy|_own|_writable")


def generate(steps: list[Step], inplace: dict[int, int], preloaded: list[int], out_slots: list[int],
             handover: list[Handover], same: dict[int, int]) -> tuple[str, Callable[[list[Any]], list[Any]],
                                                                      dict[int, int]]:
    """Write the plan out as one straight-line Python function, and compile it.

    Walking a list of steps costs a few hundred nanoseconds of interpreter work per step;
    a function with one line per kernel costs only the call. The source reads like the
    graph itself: ``v9 = add(v8, v3)  # node #12`` adds values 8 and 3 (``v`` + the value's
    slot in the plan) and computes node #12; ``del`` lines free each value at its last use,
    exactly as the liveness plan says. A write in place passes the buffer as the ufunc's
    ``out`` and keeps its name: ``v8 = add(v8, v3, out=v8)``. Equal constants (``same``:
    slot -> first equal slot) share one name too. A name is deleted when the last value
    bound to it dies. The last lines hand the outputs over as ``plan_outputs`` decided
    (``o1 = _copy(v0)``: a feed asked for as an output is copied, not returned).

    Compiling Python source is not free (about ten microseconds per line, so a second for a
    graph of 60,000 steps), so the program holds nothing but the steps: no bookkeeping
    statement per step (which step failed is read from the traceback's line number:
    ``line -> step index`` is returned alongside the source and the function), and each
    constant read once.
    """
    lines = ["def program(env):"]
    var: dict[int, str] = {}    # slot -> its variable; a result written in place takes its buffer's variable
    users: dict[str, int] = {}  # variable -> how many live values are bound to it
    for s in preloaded:  # fed leaves, constants and folded values
        rep = same.get(s, s)
        var[s] = f"v{rep}"
        users[var[s]] = users.get(var[s], 0) + 1
        if rep == s:
            lines.append(f"    v{s} = env[{s}]")
    names: dict[str, Any] = {"_copy": _copy, "_own": _own, "_writable": _writable}
    kernel_name: dict[int, str] = {}   # id(kernel) -> its name in the program (one per distinct kernel)
    line_step: dict[int, int] = {}
    for k, step in enumerate(steps):
        kernel, args = step.kernel, ", ".join(var[a] for a in step.args)
        if isinstance(kernel, partial) and not kernel.args and all(key.isidentifier() for key in kernel.keywords):
            # pass the node's attributes as keywords directly: cheaper than calling a partial
            for key, value in kernel.keywords.items():
                text = literal(value)
                if text is None:  # not a plain literal (an array, a function): a name bound to it
                    text = f"a{k}_{key}"
                    names[text] = value
                args += f", {key}={text}"
            kernel = kernel.func
        name = kernel_name.get(id(kernel))
        if name is None:
            base = step.node.op   # the kernel is called by its op's name
            if not base.isidentifier() or _RESERVED.fullmatch(base):
                base = "k_" + re.sub(r"\W", "_", base)
            name, n = base, 1
            while name in names:
                n += 1
                name = f"{base}_{n}"
            names[name] = kernel
            kernel_name[id(kernel)] = name
        note = ""
        if step.node.id in inplace:  # ``v2 = tanh(v2, out=v2)``: the same buffer, so the same name
            var[step.out] = var[step.args[inplace[step.node.id]]]
            args += f", out={var[step.out]}"
            note = " (in place)"
        else:
            var[step.out] = f"v{step.out}"
        lines.append(f"    {var[step.out]} = {name}({args})  # node #{step.node.id}{note}")
        line_step[len(lines)] = k
        users[var[step.out]] = users.get(var[step.out], 0) + 1
        dead = []
        for f in step.free:
            users[var[f]] -= 1
            if not users[var[f]]:
                dead.append(var[f])
        if dead:
            lines.append("    del " + ", ".join(dead))
    for s in out_slots:
        var.setdefault(s, f"v{s}")
    for j, (s, (how, avoid, earlier)) in enumerate(zip(out_slots, handover)):
        v = var[s]
        if how == "as is":
            lines.append(f"    o{j} = {v}")
        elif how == "copy":
            lines.append(f"    o{j} = _copy({v})")
        elif how == "writable":
            lines.append(f"    o{j} = _writable({v})")
        else:
            others = [f"env[{a}]" for a in avoid] + [f"o{i}" for i in earlier]
            lines.append(f"    o{j} = _own({v}, ({', '.join(others)}{',' if len(others) == 1 else ''}))")
    lines.append(f"    return [{', '.join(f'o{j}' for j in range(len(out_slots)))}]")
    source = "\n".join(lines) + "\n"
    exec(builtins.compile(source, "<asgteach numpy plan>", "exec"), names)  # noqa: S102 - our own generated code
    return source, names["program"], line_step
