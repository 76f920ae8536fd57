"""The checks of lesson 17 ("your own op"): a student's OpSpec, tried where the student did not look.

An op written in a notebook cell is a bundle of promises: a shape rule, a numpy kernel, a backward
rule in graph ops, a WGSL formula and two explanations, all about the same function. A check that
ran the op at the lesson's own points with the lesson's own attribute value would pass a kernel
that ignores its attribute, a backward rule that is right only at ``alpha = 1`` and a GPU formula
with the number written in. So each check here

* builds its own graphs on **fresh shapes**, draws **fresh points** and **fresh attribute values**
  (never the default alone), and compares with a reference that lives only in this module;
* gradient-checks the backward rule in float64 at those points and values, and says so when the
  rule is right at the default value only;
* runs the GPU formula (``gpu=GPU(expr=...)``) on the wgpu backend (float32) against the numpy reference, or, where
  this machine has no adapter, says so loudly and evaluates the formula with a numpy stand-in
  for WGSL (which catches a wrong formula, not a WGSL syntax error);
* reads the explanation the inspector will show: both languages, all six fields, formulas that
  matplotlib's mathtext can draw.

:func:`bce_check` (exercise 2) also tries the op at **extreme** logits, where the textbook formula
overflows, and refuses the library's own ``softplus`` while the student's op runs. Wherever the student's
code runs (its shape rule, kernel, backward rule), what it runs is watched (:mod:`.calls`): a call into the
answer keys, or into softplus's kernel however the answer holds it, fails the check. ``RULES[2]`` (the loss
in numpy, not another library's, nor the library's softplus by its registry entry) is read from the kernel's source.

In the judge of a graded course (:func:`~asgteach.grading.exercises.in_judge`) the OpSpec a check gets is a new
one, built by the judge's own class from the submission's fields: its functions (``infer``, ``numpy``, ``vjp``)
are handles into the sandbox, its data (name, attributes, texts, ``gpu.expr``) plain values. The check asks the
submission's registry whether it holds those very functions (the student ran the whole answer cell), registers
the received spec in the judge's registry for the check's length, and runs what it runs in practice mode: the
shape rule and the kernel are called in the sandbox (what they compute there is the answer), the backward rule
builds its nodes there on a copy of the judge's graph, which comes back as JSON; the references, gradcheck, the
WGSL formula on the judge's own wgpu backend and the texts are the judge's. The runtime watches stand down there
(the student's code runs out of their sight): the answer's source rules (``RULES``, and the judge's hands-off rule
against the checker and the keys, which the sandbox does not even have) stand in for them.

This file gives the answers away: try the lesson first.
"""

from __future__ import annotations

import re
import warnings
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ..grading.calls import refusing_calls
from ..grading.checks import check_array, without
from ..grading import rules
from ..grading.rules import STAND_INS, Rule
from ..grading.exercises import ExerciseError, in_judge, on_submission_side
from ..grading.keys import MODULE as KEYS_MODULE
from ..grading.keys import load as load_keys
from .wgsl_standin import wgsl_standin

__all__ = ["LESSON", "RULES", "elu_check", "bce_check", "wgsl_standin"]

LESSON = "17-your-own-op"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {
    # numpy's own stable tools (np.logaddexp, np.log1p) are fair game: the point is a formula that stays finite,
    # in numpy, not another library's loss
    # the library's softplus kernel is that formula already: its ways in (the registry, at.softplus) are refused by
    # name, as the check switches the op off while the student's op runs (a kernel runs in the sandbox, out of sight)
    2: Rule(why="the loss in numpy, written out (another library's loss function, or the library's softplus, from "
                "its registry entry or at.softplus, is not the exercise)",
            imports=STAND_INS, names=frozenset({"spec", "lookup", "REGISTRY", "patched", "softplus"}),
            attrs=frozenset({"binary_cross_entropy_with_logits", "softplus", "spec", "lookup", "REGISTRY",
                             "patched"}),
            strings=frozenset({"softplus"})),      # apply("softplus", ...): the library's op by its name
}

_FIELDS = ("headline", "what", "formula", "vjp", "why", "pitfalls")
_CYRILLIC = re.compile("[\u0400-\u04ff]")
#: float32 parity, as ``asgteach check`` measures it: a few float32 roundings per operation
_GPU_RTOL, _GPU_ATOL = 2e-5, 2e-5


# --- small helpers ----------------------------------------------------------------------------------

def _registered(op: Any, name: str, arity: int, what: str) -> Any:
    """The student's OpSpec, after checking that it is what the registry holds under ``name``.

    In practice mode that is this process's registry. In the judge of a graded course ``op`` is a new OpSpec
    built from the submission's fields (its functions are handles into the sandbox), registered there, in the
    sandbox's registry: the submission's entry must be made of the same functions and data.
    """
    from ..ops import REGISTRY, OpSpec

    if not isinstance(op, OpSpec):
        raise ExerciseError(f"{what} should be the OpSpec(...) you registered, got {type(op).__name__}: "
                            f"{op!r:.80}")
    if op.name != name:
        raise ExerciseError(f"{what} is called {op.name!r}; the exercise names it {name!r} (name={name!r})")
    for part in ("numpy", "vjp", "infer"):
        if getattr(getattr(op, part), "__module__", None) in (__name__, KEYS_MODULE):
            raise ExerciseError(f"{what}.{part} is this check's own reference: the exercise is to write it")
    if in_judge():
        entry = on_submission_side(f"{__name__}._registry_entry")(name)
        same = isinstance(entry, OpSpec) and all(getattr(entry, f) is getattr(op, f) for f in _FUNCTIONS) and \
            all(getattr(entry, f) == getattr(op, f) for f in _DATA)
    else:
        same = REGISTRY.get(name) is op
    if not same:
        raise ExerciseError(f"the op registered as {name!r} is not {what}: run your whole answer cell, which "
                            f"defines {what} and registers it with reregister({what})")
    if op.arity != arity:
        raise ExerciseError(f"{name} takes {arity} tensor input(s), but {what} says arity={op.arity}")
    return op


#: an OpSpec's fields that are functions (handles into the sandbox, in the judge) and those that are data
_FUNCTIONS = ("infer", "numpy", "vjp", "jvp")
_DATA = ("category", "arity", "attrs", "explain", "gpu", "input_kinds", "out_kind", "diff_inputs",
         "not_differentiable", "zero_gradient")


def _registry_entry(name: str) -> Any:
    """What this process's registry holds under ``name`` (the judge asks the submission's, through a handle)."""
    from ..ops import REGISTRY

    return REGISTRY.get(name)


@contextmanager
def _checked_here(op: Any, what: str) -> Iterator[None]:
    """In the judge, ``op`` (the submission's spec, as received) registered in the judge's own registry while the
    check runs, so that the judge's graphs, backends, autograd and inspector find it; in practice mode, nothing
    (the student's cell registered it in this very registry)."""
    if not in_judge():
        yield
        return
    from ..grading.remote import Remote
    from ..ops import REGISTRY, register, unregister

    stale = REGISTRY.get(op.name)
    if stale is not None:            # a spec received for an earlier check of this notebook, never the library's
        if not isinstance(stale.numpy, Remote):
            raise _fail(f"{op.name!r} is one of asgteach's own ops: give yours another name")
        unregister(op.name)
    try:
        register(op)
    except (TypeError, ValueError) as e:
        raise _fail(f"{what} cannot be registered: {e}") from None
    try:
        yield
    finally:
        if REGISTRY.get(op.name) is op:
            unregister(op.name)


def _from_submission(e: ExerciseError) -> ExerciseError:
    """An ExerciseError raised where the student's code ran, as the check reports it.

    In the judge, a kernel or a rule that reached for the answer keys raised the keys' own "missing" error in the
    sandbox (a submission never has them); it is said for what it is.
    """
    if in_judge() and "the course's answer keys" in str(e):
        return _fail("your op calls the check's own reference (the course's answer keys, which a graded "
                     "submission never has): the exercise is to write it yourself")
    return e


def _fail(message: str, hint: str = "") -> ExerciseError:
    return ExerciseError(message + (f"\n  Hint: {hint}" if hint else ""))


def _first_line(e: BaseException, limit: int = 300, keep_lines: bool = False) -> str:
    """``Type: message``, on one line (or indented lines, for a shader compiler's picture of the error)."""
    lines = [line.rstrip() for line in str(e).splitlines() if line.strip()]
    if keep_lines:
        return f"{type(e).__name__}:\n" + "\n".join(f"    {line}" for line in lines)[:limit]
    return f"{type(e).__name__}: {' '.join(line.strip() for line in lines)[:limit]}"


def _build(name: str, shapes: Sequence[tuple[int, ...]], refuse: Sequence[Any] = (),
           **attrs: Any) -> tuple[list[Any], Any]:
    """Inputs of ``shapes`` and ``apply(name, *inputs, **attrs)`` in a fresh graph; the shape rule must agree.

    ``refuse`` (here and in :func:`_run`, :func:`_gradcheck`): the library's functions the student's code may not
    run, however it holds them; the answer keys are refused always (:func:`~.calls.refusing_calls`).
    """
    from .. import graph as _graph
    from ..ops import apply, leaves

    with _graph.Graph(f"check {name}"):
        xs = [leaves.input(f"in{i}", s) for i, s in enumerate(shapes)]
        try:
            with refusing_calls(name, *refuse):
                y = apply(name, *xs, **attrs)
        except NotImplementedError:
            raise
        except ExerciseError as e:
            raise _from_submission(e) from None
        except Exception as e:  # noqa: BLE001 - the student's shape rule failing is a finding
            shown = ", ".join(str(s) for s in shapes)
            raise _fail(f"{name} on input shape(s) {shown}: building the node failed ({_first_line(e)})",
                        "infer gets the input shapes (and the attributes as keywords: write **_ to accept them) "
                        "and returns the output shape") from None
    return xs, y


def _run(outputs: Any, feeds: dict[Any, np.ndarray], backend: str = "numpy", what: str = "",
         refuse: Sequence[Any] = ()) -> Any:
    from ..backends import run

    try:
        with refusing_calls(what or "your op", *refuse):
            return run(outputs, feeds, backend=backend, on_nan="ignore")
    except NotImplementedError:
        raise
    except ExerciseError as e:
        raise _from_submission(e) from None  # without(...) refusing the library's op; the keys, in the judge
    except Exception as e:  # noqa: BLE001 - a kernel that cannot run is a finding
        buried = _buried(e)
        if buried is not None:
            raise (_from_submission(buried) if isinstance(buried, ExerciseError) else buried) from None
        raise _fail(f"running {what} on the {backend} backend failed: "
                    f"{_first_line(e, 1200, keep_lines=backend != 'numpy')}") from None


def _buried(e: BaseException) -> BaseException | None:
    """An error a backend or autograd wrapped in its own that must reach ``check(n)`` as it is.

    ``without(...)``'s ExerciseError (the library's op was called) and an unfinished exercise's
    ``NotImplementedError`` (a stub function called by a kernel or a rule: "not done yet").
    """
    seen: set[int] = set()
    cause: BaseException | None = e
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, (ExerciseError, NotImplementedError)):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def _gpu() -> bool:
    from ..backends import available

    return "wgpu" in available()


def _loud(lines: Sequence[str]) -> None:
    bar = "!" * 78
    print("\n".join([bar, *(f"!! {line}" for line in lines), bar]))


def _gpu_or_standin(name: str, expr: Any, cases: Sequence[tuple[dict[str, Any], dict[str, np.ndarray]]],
                    reference: Callable[..., np.ndarray], hint: str, refuse: Sequence[Any] = ()) -> None:
    """Run ``name`` on wgpu for each (attrs, inputs) case against ``reference``; without a GPU, the stand-in."""
    if not isinstance(expr, str):
        raise _fail(f"{name}'s gpu=GPU(expr=...) should be the formula as text, "
                    f"got {type(expr).__name__}: {expr!r:.60}")
    gpu = _gpu()
    if not gpu:
        _loud([f"NO WGPU ADAPTER on this machine: your GPU formula for {name} was NOT compiled or run as a shader.",
               "The check evaluates it with a numpy stand-in for WGSL instead: that tests the formula,",
               "not its WGSL syntax. Run this check where a GPU or Mesa's lavapipe (mesa-vulkan-drivers)",
               "is installed, or run asgteach doctor to see what is missing."])
    for attrs, inputs in cases:
        f32 = {k: v.astype(np.float32) for k, v in inputs.items()}
        want = reference(*(v.astype(np.float64) for v in f32.values()), **attrs)
        label = f"{name}({', '.join(f32)}{''.join(f', {k}={v:.4g}' for k, v in attrs.items())})"
        if gpu:
            xs, y = _build(name, [v.shape for v in f32.values()], refuse, **attrs)
            got = _run(y, dict(zip(xs, f32.values())), backend="wgpu", what=f"{label} (your GPU formula)",
                       refuse=refuse)
            place = "on the GPU (wgpu, float32)"
        else:
            if expr.count("(") != expr.count(")"):
                raise _fail(f"your GPU formula {expr!r} has {expr.count('(')} '(' but {expr.count(')')} ')': a shader "
                            "compiler would refuse it")
            try:
                got = wgsl_standin(expr, **f32, **attrs)
            except ValueError as e:
                print(f"(the stand-in could not evaluate it - {e} - so the formula was not checked)")
                return
            place = "in the numpy stand-in for WGSL (float32)"
        scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
        try:
            check_array(got, want, name=label, where=f"your GPU formula {expr!r}, {place}", rtol=_GPU_RTOL,
                        atol=_GPU_ATOL * scale)
        except ExerciseError as e:
            raise _fail(str(e), hint) from None


#: what KaTeX (the inspector's renderer) draws and matplotlib's mathtext does not, as mathtext writes it
_KATEX_TO_MATHTEXT = [
    (re.compile(r"\\begin\{(?:cases|dcases|rcases)\}"), r"\\{\\ "),
    (re.compile(r"\\end\{(?:cases|dcases|rcases)\}"), ""),
    (re.compile(r"\\(?:begin|end)\{(?:aligned|align\*?|gathered|split|array|matrix|[pbvBV]matrix)\}"
                r"(?:\{[lcr|]*\})?"), ""),
    (re.compile(r"\\\\"), r";\\ "), (re.compile(r"&"), r"\\ "),
    (re.compile(r"\\(?:text|textrm|textit|operatorname\*?|mathop)\{"), r"\\mathrm{"),
    (re.compile(r"\\[dt]frac\b"), r"\\frac"),
    (re.compile(r"\\displaystyle(?![A-Za-z])"), ""),
    # KaTeX's short names for symbols mathtext knows by their long ones (\le for \leq: standard LaTeX)
    (re.compile(r"\\(le|ge|lt|gt|land|lor|lnot|iff|implies|gets|lVert|rVert|lvert|rvert|isin|infin|sdot)"
                r"(?![A-Za-z])"),
     lambda m: {"le": r"\leq", "ge": r"\geq", "lt": "<", "gt": ">", "land": r"\wedge", "lor": r"\vee",
                "lnot": r"\neg", "iff": r"\Leftrightarrow", "implies": r"\Rightarrow", "gets": r"\leftarrow",
                "lVert": r"\Vert", "rVert": r"\Vert", "lvert": "|", "rvert": "|", "isin": r"\in",
                "infin": r"\infty", "sdot": r"\cdot"}[m.group(1)]),
]


def _as_mathtext(tex: str) -> str:
    """``tex`` with KaTeX's environments and text commands turned into what mathtext lays out (for the check only)."""
    for pattern, repl in _KATEX_TO_MATHTEXT:
        tex = pattern.sub(repl, tex)
    return tex


def _explain_record(op: Any, name: str, must_name: str = "") -> None:
    """Both languages, all six fields as non-empty text, Russian in the Russian one, drawable formulas."""
    from matplotlib.mathtext import MathTextParser

    from .. import explain

    rec = op.explain
    if not isinstance(rec, dict) or set(rec) < {"en", "ru"}:
        have = sorted(rec) if isinstance(rec, dict) else rec
        raise _fail(f"{name}'s explain should hold one record per language, 'en' and 'ru'; it has {have!r}",
                    "explain={'en': {'headline': ..., 'what': ..., ...}, 'ru': {...}}")
    parser = MathTextParser("path")   # lays the formula out as matplotlib would draw it, without a figure
    for lang in ("en", "ru"):
        fields = rec[lang]
        missing = [f for f in _FIELDS if not (isinstance(fields.get(f), str) and fields[f].strip())]
        if missing:
            raise _fail(f"explain[{lang!r}] of {name} has no {', '.join(missing)}: the inspector shows all six "
                        f"fields ({', '.join(_FIELDS)})")
        for f in ("formula", "vjp"):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    parser.parse(f"${_as_mathtext(fields[f])}$")
            except Exception as e:  # noqa: BLE001 - LaTeX that does not draw is the finding
                raise _fail(f"explain[{lang!r}][{f!r}] of {name} is not LaTeX the inspector can draw (KaTeX's: the "
                            "check lays it out with matplotlib's mathtext after turning \\begin{cases}, "
                            "\\begin{aligned}, \\text, \\operatorname, \\dfrac, \\le and \\\\ into mathtext's): "
                            f"{_first_line(e, 200)}", "write it without the $...$ around it, e.g. "
                            r"'y = \frac{x}{1 + |x|}'; braces must pair up") from None
            if must_name and not re.search(rf"\\{must_name}\b|\b{must_name}\b|α", fields[f]):
                raise _fail(f"explain[{lang!r}][{f!r}] of {name} does not show {must_name}: the formula and the "
                            f"backward rule both depend on it (write \\{must_name} in LaTeX)")
    prose = " ".join(rec["ru"][f] for f in ("headline", "what", "why", "pitfalls"))
    if not _CYRILLIC.search(prose):
        raise _fail(f"explain['ru'] of {name} has no Russian in its headline, what, why or pitfalls: a student "
                    "who picks Russian in the inspector would read English",
                    "formulas stay the same in every language; the words do not")
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # a missing language would warn and fall back to English
        for lang in ("en", "ru"):
            text = explain.explain(name, lang)
            if text.headline != rec[lang]["headline"]:
                raise _fail(f"explain.explain({name!r}, {lang!r}) does not show your record: re-run your answer "
                            "cell so that the registry holds the OpSpec you wrote")


# --- exercise 1: elu(x, alpha) --------------------------------------------------------------------------

def _gradcheck(y: Any, xs: Sequence[Any], feeds: dict[Any, np.ndarray],
               refuse: Sequence[Any] = ()) -> Any:
    from .. import gradcheck

    try:
        with refusing_calls("your vjp", *refuse):
            return gradcheck(y, list(xs), feeds, atol=1e-7, rtol=1e-6, progress=False)
    except NotImplementedError:
        raise
    except ExerciseError as e:
        raise _from_submission(e) from None
    except Exception as e:  # noqa: BLE001 - a rule that cannot build is a finding
        buried = _buried(e)
        if buried is not None:
            raise (_from_submission(buried) if isinstance(buried, ExerciseError) else buried) from None
        raise _fail(f"building the gradient with your vjp failed: {_first_line(e)}",
                    "vjp(c, g) returns a tuple with one Tensor per input, made of graph ops: at.exp, at.where, "
                    "*, + ... on c.inputs, c.out and g (never numpy arrays, which have no graph)") from None


def _away_from_zero(rng: np.random.Generator, shape: tuple[int, ...], lo: float = 0.15, hi: float = 2.5) -> np.ndarray:
    return rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape)


def elu_check(op: Any, seed: int | None = None) -> None:
    """Exercise 1: the student's ``elu`` OpSpec (attribute ``alpha``) at fresh shapes, points and alphas.

    In order: registered under "elu" with ``alpha`` a number attribute defaulting to 1.0; the shape
    rule on shapes of its own; the numpy kernel against the reference for three alphas (1 and two
    fresh ones); the backward rule by a float64 gradcheck at each of them (right at alpha = 1 only
    is named as such); the explanation in both languages; the WGSL formula on the GPU at the two fresh
    alphas and 1.0 (a formula with the number written in fails), or the stand-in without one. In the judge, ``op``
    is the submission's spec as received, registered here for the check's length (see the module's docstring).
    """
    _registered(op, "elu", 1, "ELU")
    with _checked_here(op, "ELU"):
        _elu(op, seed)


def _elu(op: Any, seed: int | None) -> None:
    keys = load_keys()   # the references, loaded only when a check runs
    name = "elu"
    if op.category != "activation":
        raise _fail(f"elu is an activation: category='activation' (got {op.category!r}), which nn.MLP and the "
                    "graph view's colours read")
    if "alpha" not in op.float_attrs or op.attrs.get("alpha") != 1.0:
        raise _fail(f"elu's attributes should be {{'alpha': 1.0}} (a number, default 1.0); got attrs={op.attrs!r}",
                    "attrs lists the static arguments with their defaults; the kernel reads them as keywords")
    rng = np.random.default_rng(seed)
    alphas = [1.0, *(float(a) for a in rng.uniform(0.2, 0.8, 1)), *(float(a) for a in rng.uniform(1.5, 3.0, 1))]

    # the shape rule
    for shape in [(), (int(rng.integers(2, 7)),), (2, int(rng.integers(2, 5)), 3)]:
        _, y = _build(name, [shape], alpha=alphas[1])
        if y.shape != shape:
            raise _fail(f"elu of an input of shape {shape} should have shape {shape} (elementwise), the shape rule "
                        f"gave {y.shape}")

    # the numpy kernel, at each alpha
    shape = (int(rng.integers(2, 5)), int(rng.integers(3, 6)))
    X = rng.standard_normal(shape) * 2.0
    right_at: list[float] = []
    for a in alphas:
        (x,), y = _build(name, [shape], alpha=a)
        got = _run(y, {x: X}, what=f"elu(x, alpha={a:.4g})")
        try:
            check_array(got, keys.elu(X, a), name=f"elu(x, alpha={a:.4g})", where="your numpy kernel, at fresh points",
                        rtol=1e-9, atol=1e-12)
            right_at.append(a)
        except ExerciseError as e:
            hint = ("it is right at alpha=1.0 only: the kernel gets alpha as a keyword argument "
                    "(numpy=lambda x, alpha=1.0: ...) and must use it" if 1.0 in right_at else
                    "elu(x) = x for x > 0 and alpha * (exp(x) - 1) for x <= 0")
            raise _fail(str(e), hint) from None

    # the backward rule, at each alpha: a float64 gradcheck of sum(w * elu(x)) away from the kink at 0
    from ..ops import leaves

    right_at = []
    for a in alphas:
        (x,), y = _build(name, [shape], alpha=a)
        with y.graph:
            w = leaves.input("w", shape)
            loss = _sum(w * y)
        feeds = {x: _away_from_zero(rng, shape), w: rng.standard_normal(shape)}
        report = _gradcheck(loss, [x], feeds)
        if report.ok:
            right_at.append(a)
            continue
        bad = report.inputs[0]
        where = f"[{', '.join(str(int(i)) for i in bad.worst_index)}]" if bad.worst_index is not None else ""
        xv = float(feeds[x][tuple(bad.worst_index)]) if bad.worst_index is not None else float("nan")
        msg = (f"your vjp gives a wrong gradient for elu(x, alpha={a:.4g}) (float64 gradcheck at fresh points): "
               f"the worst element, x{where} = {xv:.4g}: numerical {bad.numerical:.6g} vs your rule "
               f"{bad.analytical:.6g}")
        if 1.0 in right_at:
            raise _fail(msg, "it is right at alpha=1.0 only: read the node's own alpha in the rule, c.attrs['alpha']")
        raise _fail(msg, "d elu/dx is 1 for x > 0 and alpha * exp(x) (= elu(x) + alpha) for x <= 0; the rule "
                         "returns g times that, as a tuple: (g * ...,)")

    _explain_record(op, name, must_name="alpha")

    # the WGSL formula: two fresh alphas (and the default), fresh points, float32
    expr = op.gpu.expr
    if isinstance(expr, str) and not re.search(r"\balpha\b", expr):
        raise _fail(f"your GPU formula {expr!r} never names alpha, so every elu node would compute with the same "
                    "number, whatever its alpha", "the kernel gets each number attribute by its own name: write "
                    "alpha in the formula, as the input is x")
    Xg = rng.standard_normal((3, int(rng.integers(3, 7)))) * 2.0
    _gpu_or_standin(name, expr, [({"alpha": a}, {"x": Xg}) for a in alphas[1:] + alphas[:1]], keys.elu,
                    hint="WGSL's if-else for one value is select(if_false, if_true, condition); the attribute is "
                         "alpha, the input x, and float literals need a point (1.0)")


def _sum(t: Any) -> Any:
    from ..ops import apply

    return apply("sum", t, axis=tuple(range(len(t.shape))), keepdims=False)


# --- exercise 2: binary cross-entropy with logits, stable ------------------------------------------------

def _extreme(rng: np.random.Generator, shape: tuple[int, ...], lo: float, hi: float) -> np.ndarray:
    return rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape)


def bce_check(op: Any, seed: int | None = None) -> None:
    """Exercise 2: the student's ``bce_logits(z, t)`` at fresh shapes, moderate and EXTREME logits.

    The numpy kernel in float64 at |z| up to 1000 (where exp(z) overflows), the backward rule by a
    gradcheck at moderate points and against the reference gradient at extreme ones (no NaN from
    inf/inf), the WGSL formula in float32 at |z| up to 300 (where exp(z) overflows float32).
    The library's softplus is switched off while the student's op runs (in practice mode; in the judge, where the
    kernel runs in the sandbox, ``RULES[2]`` refuses the ways to it in the answer's source).
    """
    keys = load_keys()   # the references, loaded only when a check runs
    from ..ops import spec

    rules.enforce(getattr(op, "numpy", None), RULES[2], "bce_numpy")
    name = "bce_logits"
    # the library's softplus kernel itself, taken before without(...) switches the op off in the registry: an
    # answer holding it (a default argument, a closure) runs this very function
    library = ((spec("softplus").numpy, "the library's softplus (its numpy kernel)"),)
    _registered(op, name, 2, "BCE")
    with _checked_here(op, "BCE"):
        _bce(op, seed, keys, library)


def _bce(op: Any, seed: int | None, keys: Any, library: Any) -> None:
    name = "bce_logits"
    rng = np.random.default_rng(seed)
    why = "the exercise is the stable formula itself, written with numpy (section 5 shows how softplus is made stable)"
    shape = (int(rng.integers(2, 5)), int(rng.integers(3, 7)))
    Zm, Tm = rng.standard_normal(shape) * 3.0, rng.uniform(0.0, 1.0, shape)
    Ze, Te = _extreme(rng, shape, 40.0, 1000.0), rng.uniform(0.0, 1.0, shape)
    Te[0, 0], Te[-1, -1] = 0.0, 1.0
    with without("softplus", why=why):
        (z, t), y = _build(name, [shape, shape], library)
        if y.shape != shape:
            raise _fail(f"bce_logits of two inputs of shape {shape} should have shape {shape}, got {y.shape}")
        for label, Z, T in [("moderate", Zm, Tm), ("extreme", Ze, Te)]:
            got = _run(y, {z: Z, t: T}, what=f"bce_logits at {label} logits", refuse=library)
            try:
                check_array(got, keys.bce_with_logits(Z, T), name="bce_logits(z, t)",
                            where=f"your numpy kernel in float64, at fresh {label} logits |z| up to "
                                  f"{np.abs(Z).max():.0f}", rtol=1e-9, atol=1e-12)
            except ExerciseError as e:
                hint = ("at |z| that large, exp(z) overflows float64 (above z = 709.8) and sigmoid(z) rounds to "
                        "exactly 1 (above z = 37), so log(1 - sigmoid(z)) is log(0): rewrite it so that exp only "
                        "ever sees -|z|" if label == "extreme" else
                        "loss = -t log(sigmoid(z)) - (1 - t) log(1 - sigmoid(z)): check the algebra of your form")
                raise _fail(str(e), hint) from None

        # the backward rule: gradcheck at moderate points, the reference at extreme ones
        from ..autograd import grad
        from ..ops import leaves

        with y.graph:
            w = leaves.input("w", shape)
            loss = _sum(w * y)
        W = rng.standard_normal(shape)
        report = _gradcheck(loss, [z, t], {z: Zm, t: Tm, w: W}, library)
        if not report.ok:
            bad = next(c for c in report.inputs if not c.ok)
            which = "z" if bad is report.inputs[0] else "t"
            hint = ("d loss/dz = sigmoid(z) - t and d loss/dt = -z, each times g; return both, (dz, dt): None for an "
                    "input says its gradient is 0" + (", which is wrong for t" if bad.analytical == 0 else ""))
            raise _fail(f"your vjp gives a wrong gradient for input {which} (float64 gradcheck at fresh moderate "
                        f"points): numerical {bad.numerical:.6g} vs your rule {bad.analytical:.6g}", hint)
        try:
            with y.graph, refusing_calls("bce_vjp", *library):
                dz, dt = grad(loss, [z, t])
        except NotImplementedError:
            raise
        except ExerciseError as e:
            raise _from_submission(e) from None
        except Exception as e:  # noqa: BLE001 - a rule that cannot build is a finding
            raise _fail(f"building the gradient with your vjp failed: {_first_line(e)}") from None
        gz, gt = _run([dz, dt], {z: Ze, t: Te, w: W}, what="your vjp at extreme logits", refuse=library)
        for label, got, want in [("d/dz", gz, W * (keys.sigmoid(Ze) - Te)), ("d/dt", gt, -W * Ze)]:
            try:
                check_array(got, want, name=f"the gradient {label}", where="your vjp in float64, at fresh extreme "
                            f"logits |z| up to {np.abs(Ze).max():.0f}", rtol=1e-9, atol=1e-12)
            except ExerciseError as e:
                raise _fail(str(e), "exp(z) / (1 + exp(z)) is inf / inf = nan for large z: at.sigmoid is written "
                                    "stably (or use exp(-|z|) only)") from None

        # the GPU formula in float32, where exp(z) overflows above 88.7
        expr = op.gpu.expr
        if isinstance(expr, str) and not (re.search(r"\ba\b", expr) and re.search(r"\bb\b", expr)):
            raise _fail(f"your GPU formula {expr!r} should use both inputs: in WGSL they are called a (the logits z) "
                        "and b (the targets t)")
        shape_g = (2, int(rng.integers(3, 7)))
        cases = [({}, {"a": rng.standard_normal(shape_g) * 3.0, "b": rng.uniform(0, 1, shape_g)}),
                 ({}, {"a": _extreme(rng, shape_g, 90.0, 300.0), "b": rng.uniform(0, 1, shape_g)})]
        _gpu_or_standin(name, expr, cases, keys.bce_with_logits, refuse=library,
                        hint="in float32, exp(a) overflows above a = 88.7: the same stable formula as your numpy "
                             "kernel (max(a, 0.0), abs, exp of -|a| only); f_log1p(e) from "
                             "shaders/elementwise_math.wgsl is log(1 + e) that keeps a tiny e")
