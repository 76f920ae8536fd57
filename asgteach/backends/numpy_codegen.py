"""The numpy plan written out as straight-line Python (``plan.source``).

:func:`generate` turns the plan's steps into source code, one line per kernel, with ``del``
lines where values die and ``out=`` where a kernel writes in place, then compiles it (a long
plan as several functions of ``PART_STEPS`` steps, so that compiling takes little memory).
The text is not kept: :func:`source` writes it again whenever ``plan.source`` is read.
The generated program calls three helpers of this module to hand outputs over to the
caller (``_copy``, ``_own``, ``_writable``: see ``numpy_memory.plan_outputs``).

The NaN check that ``plan.run`` makes on the outputs is written out too
(:func:`write_nan_check`): one line per output, chosen from its declared kind and shape.
"""

from __future__ import annotations

import builtins
import math
import re
from array import array
from bisect import bisect_left
from dataclasses import dataclass
from functools import partial
from types import CodeType, TracebackType
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np

from .numpy_memory import Handover

if TYPE_CHECKING:
    from .numpy_plan import Step

__all__ = ["generate", "source", "write", "write_nan_check", "nan_in", "literal", "Program", "PART_STEPS"]


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


def nan_in(a: Any) -> bool:
    """Whether ``a`` (any output: an array, a numpy scalar, of any dtype) holds a NaN. Exact.

    The general form of the generated check below, for what it does not know in advance:
    one ``x . x`` for a float array (see :func:`write_nan_check`), and on a hit the
    element-by-element look that confirms it.
    """
    a = np.asarray(a)
    if a.dtype.kind not in "fc":
        return False
    flat = a.reshape(-1)
    r = flat.dot(flat)
    return bool(r != r) and bool(np.isnan(flat).any())


def literal(value: Any) -> str | None:
    """``value`` as Python source, when it is a plain literal that reads back equal; else None."""
    if value is None or type(value) in (bool, int, str) or (type(value) is float and math.isfinite(value)):
        return repr(value)
    if type(value) is tuple:
        parts = [literal(v) for v in value]
        if all(p is not None for p in parts):
            return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"  # type: ignore[arg-type]
    return None


_RESERVED = re.compile(r"[vo]\d+|a\d+_\w+|env|program|part_\d+|nan_check|_copy|_own|_writable")

#: A plan of more steps than this is written as several functions ("parts") of at most this many
#: steps each, and a function ``program`` that calls them in turn. CPython needs about 3 KB of
#: memory per line to compile a function (tokens, syntax tree, control-flow graph), all of it at
#: once: compiling a 50,000-step plan as one function took 330 MB, which the process then kept
#: (the C allocator rarely hands such memory back to the system). A part of 2,048 steps peaks
#: near 10 MB. Plans of up to this many steps (every lesson's, a training step's) are one
#: function, exactly as before; a value that crosses from one part to a later one costs a store
#: and a load (see :func:`write`).
PART_STEPS = 2048


@dataclass(slots=True)
class Program:
    """The compiled program, and what finds the step a traceback points at."""

    #: the function: ``run(env) -> outputs``
    run: Callable[[list[Any]], list[Any]]
    #: each part's code object -> the part's index (parts of ``PART_STEPS`` steps, in order)
    parts: dict[CodeType, int]
    #: step k -> its line number in the source of its part (array('I'): 4 bytes a step)
    lines: array
    #: the most steps in one part (``PART_STEPS`` when it was compiled)
    part_steps: int
    #: ``nan_check(outputs) -> bool``: whether an output may hold a NaN (see :func:`write_nan_check`)
    nan_check: Callable[[list[Any]], bool]

    def step_at(self, tb: TracebackType | None) -> int | None:
        """The index of the step whose line raised, from the exception's traceback (None if not ours)."""
        while tb is not None and tb.tb_frame.f_code not in self.parts:
            tb = tb.tb_next
        if tb is None:
            return None
        lo = self.parts[tb.tb_frame.f_code] * self.part_steps
        hi = min(lo + self.part_steps, len(self.lines))
        k = bisect_left(self.lines, tb.tb_lineno, lo, hi)   # lines grow with the steps within a part
        return k if k < hi and self.lines[k] == tb.tb_lineno else None


def write(steps: list[Step], inplace: dict[int, int], preloaded: list[int], out_slots: list[int],
          handover: list[Handover], same: dict[int, int], names: dict[str, Any], part_steps: int | None = None
          ) -> Iterator[tuple[str, str, list[int]]]:
    """The program's source, one function at a time: (its name, its source, the line of each of its steps).

    Walking a list of steps costs a few hundred nanoseconds of interpreter work per step;
    a function with one line per kernel costs only the call. The source reads like the
    graph itself: ``v9 = add(v8, v3)  # node #12`` adds values 8 and 3 (``v`` + the value's
    slot in the plan) and computes node #12; ``del`` lines free each value at its last use,
    exactly as the liveness plan says. A write in place passes the buffer as the ufunc's
    ``out`` and keeps its name: ``v8 = add(v8, v3, out=v8)``. Equal constants (``same``:
    slot -> first equal slot) share one name too. A name is deleted when the last value
    bound to it dies. Feeds, constants and folded values arrive in ``env`` (``v0 = env[0]``).
    The last lines hand the outputs over as ``plan_outputs`` decided (``o1 = _copy(v0)``:
    a feed asked for as an output is copied, not returned).

    A plan of more than ``part_steps`` steps (default ``PART_STEPS``) is written as parts
    (``part_1``, ``part_2``, ...) and a ``program`` that calls them in turn. A part's own
    values are its local variables, as above. A value that a later part reads is also stored
    in ``env`` as it is made (``v12 = env[12] = tanh(v11)``). A later part reads it from
    there, as it reads feeds: where it is used once, in place (``mul(env[12], v40)``, and
    ``env[12] = None`` where it dies), else into a local at the part's start (``v12 =
    env[12]``), cleared from env right away when no later part reads it (``env[12] =
    env[13] = None``: the local is then its only holder, and ``del v12`` frees it). Memory
    is freed exactly where a one-function program frees it. (Crossing costs tens of
    nanoseconds a value: the gradient of a 12,500-tanh chain, whose every forward value
    crosses, ran 4-8 % slower than as one function.)

    What the program calls is put into ``names`` (its globals): each kernel under its op's
    name, and each attribute that is not a plain literal under a name of its own.
    """
    size = PART_STEPS if part_steps is None else part_steps
    n_parts = max(1, -(-len(steps) // size))
    var: dict[int, int] = {}     # slot -> the number of its variable (v<number>); in place: its buffer's
    for s in preloaded:  # fed leaves, constants and folded values
        var[s] = same.get(s, s)
    # Which part makes each variable (-1: it is in env from the start), which part reads it last, and how
    # often each part reads a variable it did not make ("many" for an in-place write: it needs a local name).
    home: dict[int, int] = dict.fromkeys(var.values(), -1)
    last: dict[int, int] = {}
    reads: list[dict[int, int]] = [{} for _ in range(n_parts)]   # part -> {variable: reads}
    # (worked out for one part too, where nothing reads it: compiling stays as linear as the program's size)
    many = 2
    for k, step in enumerate(steps):
        p = k // size
        for a in step.args:
            last[var[a]] = p
            if home[var[a]] != p:
                reads[p][var[a]] = reads[p].get(var[a], 0) + 1
        if step.node.id in inplace:
            out = var[step.args[inplace[step.node.id]]]
            if home[out] != p:
                reads[p][out] = many
        else:
            out = step.out
            home[out] = p
        var[step.out] = out
    for s in out_slots:
        n = var.get(s, s)
        last[n] = n_parts - 1
        if home[n] != n_parts - 1:
            reads[-1][n] = many
    var = {s: same.get(s, s) for s in preloaded}
    users: dict[int, int] = {}   # variable -> how many live values are bound to it
    for s in preloaded:
        users[var[s]] = users.get(var[s], 0) + 1
    kernel_name: dict[int, str] = {}   # id(kernel) -> its name in the program (one per distinct kernel)
    for part in range(n_parts):
        fn = "program" if n_parts == 1 else f"part_{part + 1}"
        here: set[int] = set()     # the variables this part has: made here, or read from env at its start
        loads: list[int] = []

        def ref(n: int, once: dict[int, int] = reads[part] if n_parts > 1 else {}) -> str:
            if n not in here:
                if once.get(n) == 1:
                    return f"env[{n}]"   # read once here: straight from env
                here.add(n)
                loads.append(n)
            return f"v{n}"

        body: list[str] = []
        step_lines: list[int] = []
        for k in range(part * size, min(len(steps), (part + 1) * size)):
            step = steps[k]
            kernel, args = step.kernel, ", ".join(ref(var[a]) for a in step.args)
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
            if step.node.id in inplace:  # ``v2 = tanh(v2, out=v2)``: the same buffer, so the same name
                out = var[step.args[inplace[step.node.id]]]
                line = f"    v{out} = {name}({args}, out=v{out})  # node #{step.node.id} (in place)"
            else:
                out = step.out
                later = n_parts > 1 and last.get(out, part) > part   # a later part reads it: keep it in env
                line = f"    v{out} = {f'env[{out}] = ' if later else ''}{name}({args})  # node #{step.node.id}"
            var[step.out] = out
            here.add(out)
            body.append(line)
            step_lines.append(len(body))
            users[out] = users.get(out, 0) + 1
            dead, gone = [], []   # local variables to delete; values to let go of in env
            for f in step.free:
                users[var[f]] -= 1
                if not users[var[f]]:
                    d = var[f]
                    if d in here:
                        dead.append(f"v{d}")
                    elif 0 <= home[d] < part:   # read from env where it was made (feeds and constants stay there)
                        gone.append(f"env[{d}]")
            if dead:
                body.append("    del " + ", ".join(dead))
            if gone:
                body.append("    " + " = ".join(gone) + " = None")
        if part == n_parts - 1:
            body += _handover_lines(out_slots, handover, var, ref)
        loads.sort()
        # what an earlier part made and no later part reads is cleared from env: the local holds it now
        taken = [f"env[{n}]" for n in loads if 0 <= home[n] < part and last[n] == part]
        head = [f"def {fn}(env):"] + [f"    v{n} = env[{n}]" for n in loads]
        for j in range(0, len(taken), 8):
            head.append("    " + " = ".join(taken[j:j + 8]) + " = None")
        if part == 0 and n_parts > 1:
            head[:0] = [f"# {len(steps)} steps, written as {n_parts} functions of at most {size} steps",
                        "# (compiling one long function takes far more memory): a value that a later part",
                        "# reads waits in env, from where it is made until it dies"]
        yield fn, "\n".join(head + body) + "\n", [len(head) + line for line in step_lines]
    if n_parts > 1:
        calls = [f"    part_{p + 1}(env)" for p in range(n_parts - 1)]
        yield "program", "\n".join(["def program(env):", *calls, f"    return part_{n_parts}(env)"]) + "\n", []


def _handover_lines(out_slots: list[int], handover: list[Handover], var: dict[int, int],
                    ref: Callable[[int], str]) -> list[str]:
    """The program's last lines: each output handed over as ``plan_outputs`` decided, then returned."""
    lines = []
    for j, (s, (how, avoid, earlier)) in enumerate(zip(out_slots, handover)):
        v = ref(var.get(s, s))
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
    return lines


def write_nan_check(outputs: list[tuple[bool, int]]) -> str:
    """The source of ``nan_check(outs)``: whether an output may hold a NaN (``plan.run``'s ``on_nan``).

    ``outputs``: for each output, whether its node is a float and how many axes it has.

    **What it must do.** ``plan.run`` promises that a NaN in an output does not pass
    silently: it is explained (the op that made it, its inputs, the user's line). So every
    element of every float output is looked at, on every run: no smaller set of values
    would do. Checking only the loss is not enough: a finite forward pass can have a NaN
    gradient (``sqrt`` at 0 gives ``inf``, times a zero gives NaN), and a NaN in a fed
    parameter reaches only that parameter's update. And the outputs already are the values
    that every NaN ends up in: a NaN that no output receives (masked by a ``where``) is not
    an error. The check does not judge infinities (they are values; the Trainer, which
    refuses a step with an infinite gradient, checks that itself).

    **How cheaply.** One pass over each array, no temporary: ``x . x`` (one BLAS dot
    product) is NaN exactly when some element of ``x`` is. Its terms are squares, never
    negative, so no ``inf - inf`` can make a NaN that is not there, and an overflow gives
    ``inf``, not NaN. (A sum would raise false alarms from ``inf - inf``; ``min`` also
    propagates NaN, but was slower than the dot here; ``np.isnan(x).any()`` writes a
    temporary as big as ``x``.) A hit is confirmed element by element (:func:`nan_in`)
    before the step-by-step search that names the op.

    **Why it is written out** rather than a loop over the outputs: what each output is is
    known when compiling. An integer output cannot hold a NaN and gets no line; a 0-d
    output (a loss) is tested by ``math.isnan`` itself; a 1-d one needs no ``reshape``.
    For a training step's seven outputs that halves the Python work around the dot
    products (about 1.5 us of 7 per step for bench/mlp_step.py's MLP; the rest is the
    reading of 110,000 numbers, most of them the first layer's new weights).

    A kernel that returns another shape than its op declared (a user's op with a bug)
    makes a line raise (``math.isnan`` of an array, the dot of a matrix): ``plan.run``
    then checks each output with :func:`nan_in`, which assumes nothing.
    """
    lines = ["def nan_check(outs):",
             "    # plan.run's NaN check: x . x is NaN exactly when an element of x is (one pass, no temporary)"]
    if len(outputs) > PART_STEPS:   # (a function of one line per output would take long to compile)
        return "\n".join([*lines, "    return any(map(_nan_in, outs))"]) + "\n"
    for j, (is_float, ndim) in enumerate(outputs):
        if not is_float:
            continue   # an integer output holds no NaN
        if ndim == 0:
            lines.append(f"    if _isnan(outs[{j}]):")
        else:
            lines.append(f"    x = outs[{j}]" + (".reshape(-1)" if ndim > 1 else ""))
            lines.append("    if _isnan(x.dot(x)):")
        lines.append("        return True")
    lines.append("    return False")
    return "\n".join(lines) + "\n"


def _helpers() -> dict[str, Any]:
    return {"_copy": _copy, "_own": _own, "_writable": _writable, "_isnan": math.isnan, "_nan_in": nan_in}


def generate(steps: list[Step], inplace: dict[int, int], preloaded: list[int], out_slots: list[int],
             handover: list[Handover], same: dict[int, int], outputs: list[tuple[bool, int]]) -> Program:
    """Write the plan out as straight-line Python (see :func:`write`) and compile it, one part at a time.

    Compiling Python source is not free (about ten microseconds per line, so a second for a
    graph of 60,000 steps), so the program holds nothing but the steps: no bookkeeping
    statement per step (which step failed is read from the traceback's line number:
    :meth:`Program.step_at`), and each constant read once. Nothing of the source is kept:
    :func:`source` writes it again when asked (``plan.source``). ``outputs`` (each output's
    kind and number of axes) is for the NaN check, :func:`write_nan_check`.
    """
    names = _helpers()
    parts: dict[CodeType, int] = {}
    lines = array("I")
    size = PART_STEPS
    for fn, text, step_lines in write(steps, inplace, preloaded, out_slots, handover, same, names, size):
        exec(builtins.compile(text, "<asgteach numpy plan>", "exec"), names)  # noqa: S102 - our own generated code
        if not (fn == "program" and parts):   # a part (not the driver that calls several parts)
            parts[names[fn].__code__] = len(parts)
        lines.extend(step_lines)
    exec(builtins.compile(write_nan_check(outputs), "<asgteach numpy plan>", "exec"), names)  # noqa: S102
    return Program(names["program"], parts, lines, size, names["nan_check"])


def source(steps: list[Step], inplace: dict[int, int], preloaded: list[int], out_slots: list[int],
           handover: list[Handover], same: dict[int, int], outputs: list[tuple[bool, int]],
           part_steps: int | None = None) -> str:
    """The text of the program :func:`generate` compiled for the same arguments, and of its NaN
    check (written again, not kept)."""
    parts = write(steps, inplace, preloaded, out_slots, handover, same, _helpers(), part_steps)
    return "\n".join([*(text for _, text, _ in parts), write_nan_check(outputs)])
