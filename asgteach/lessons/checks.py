"""Checks for the exercises: on a wrong answer they say what is wrong and where.

Every check raises :class:`~asgteach.lessons.exercises.ExerciseError` with a message a
student can act on — the shape that was expected, the element that differs most, the node
whose value is off, the test case a function fails on — and returns quietly (or prints a
short confirmation) when the answer is right. None of them is a bare ``assert``.

The reference values the checks compare with are computed independently of the code being
taught where that matters: :func:`numerical_gradient` uses only the forward graph (central
differences in float64), so a gradient check still tells the truth while a bug is planted
in a backward rule.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from .exercises import ExerciseError

__all__ = [
    "check_array", "check_equal", "check_function", "check_node_values", "check_vjp_rule", "check_true",
    "numerical_gradient",
]


def _fmt(v: Any) -> str:
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.6g}"
    if isinstance(v, np.ndarray) and v.size > 12:
        with np.printoptions(precision=4, suppress=True, threshold=12):
            return np.array2string(v)
    if isinstance(v, np.ndarray):
        with np.printoptions(precision=6, suppress=True):
            return np.array2string(v, separator=", ")
    return repr(v)


def _as_numbers(got: Any, name: str) -> np.ndarray:
    if got is None:
        raise ExerciseError(f"{name} is None - did the answer forget to assign or return it?")
    if hasattr(got, "graph") and hasattr(got, "node_id"):
        raise ExerciseError(f"{name} is a Tensor (a node of a graph, no numbers yet); run it with at.run(...) "
                            "to get its value")
    try:
        arr = np.asarray(got, dtype=np.float64)
    except (TypeError, ValueError):
        raise ExerciseError(f"{name} should be numbers (an array or a float), got {type(got).__name__}: "
                            f"{got!r:.80}") from None
    return arr


def _hint(got: np.ndarray, expected: np.ndarray) -> str:
    """A guess at the kind of mistake: a flipped sign, a constant factor, a transposed matrix."""
    if expected.size == 0 or not np.all(np.isfinite(got)):
        return ""
    scale = float(np.max(np.abs(expected))) or 1.0
    if np.allclose(got, -expected, atol=1e-8 * scale, rtol=1e-6):
        return " The sign is flipped everywhere."
    nz = np.abs(expected) > 1e-12 * scale
    if nz.any():
        ratios = got[nz] / expected[nz]
        r = float(ratios.flat[0])
        if abs(r) > 1e-12 and np.allclose(ratios, r, rtol=1e-6) and not np.isclose(r, 1.0):
            return f" Every element is {r:.4g} times the expected one: a constant factor is off."
    if got.ndim == 2 and got.shape == expected.shape[::-1] and np.allclose(got.T, expected, rtol=1e-6, atol=1e-9):
        return " It is the transpose of the expected matrix."
    return ""


def check_array(got: Any, expected: Any, name: str = "your answer", rtol: float = 1e-6, atol: float = 1e-9,
                where: str = "") -> None:
    """Raise ExerciseError unless ``got`` has ``expected``'s shape and values (within rtol/atol).

    The message names ``name`` (and ``where`` it came from), the shape, how many elements
    differ, the worst one (index, expected, got), and a guess at the mistake.
    """
    label = f"{name} ({where})" if where else name
    expected = np.asarray(expected, dtype=np.float64)
    arr = _as_numbers(got, label)
    if arr.shape != expected.shape:
        extra = ""
        if arr.size == expected.size:
            extra = " (same number of elements: a reshape or transpose is missing?)"
        elif expected.shape and arr.ndim > expected.ndim:
            extra = " (more axes than expected: was something not summed over a broadcast axis?)"
        raise ExerciseError(f"{label} should have shape {expected.shape}, got {arr.shape}{extra}")
    bad = ~np.isclose(arr, expected, rtol=rtol, atol=atol) | (np.isnan(arr) != np.isnan(expected))
    if not bad.any():
        return
    diff = np.where(bad, np.abs(np.nan_to_num(arr - expected, nan=np.inf)), -1.0)
    k = np.unravel_index(int(np.argmax(diff)), arr.shape) if arr.shape else ()
    at = f"[{', '.join(str(int(i)) for i in k)}]" if arr.shape else ""
    msg = (f"{label} is wrong at {int(bad.sum())} of {arr.size} element(s). The worst: {name}{at} should be "
           f"{float(expected[k]):.6g}, got {float(arr[k]):.6g}.")
    if arr.size > 1:
        msg += f"\n  expected: {_fmt(expected)}\n  got:      {_fmt(arr)}"
    raise ExerciseError(msg + _hint(arr, expected))


def check_equal(got: Any, expected: Any, name: str = "your answer", hint: str = "") -> None:
    """Raise ExerciseError unless ``got == expected`` (for names, counts, shapes, node ids, lists)."""
    if isinstance(expected, (list, tuple)) and isinstance(got, (list, tuple)):
        same = list(got) == list(expected)
    else:
        same = bool(np.all(got == expected)) if isinstance(got, np.ndarray) else got == expected
    if not same:
        raise ExerciseError(f"{name} should be {expected!r}, got {got!r}" + (f". {hint}" if hint else ""))


def check_true(condition: bool, message: str) -> None:
    """Raise ExerciseError(message) unless ``condition``: for facts a value check cannot express."""
    if not condition:
        raise ExerciseError(message)


def check_function(fn: Any, cases: Iterable[tuple[tuple, Any]], name: str | None = None, rtol: float = 1e-6,
                   atol: float = 1e-9) -> None:
    """Call the student's ``fn(*args)`` on each case and compare with the expected result.

    ``cases`` is a list of ``(args, expected)``; ``expected`` is an array, a number, or a
    tuple of arrays (for a function returning several). The message names the failing case.
    """
    name = name or getattr(fn, "__name__", "your function")
    if not callable(fn):
        raise ExerciseError(f"{name} should be a function, got {type(fn).__name__}")
    for k, (args, expected) in enumerate(cases):
        shown = ", ".join(_short(a) for a in args)
        call = f"{name}({shown})"
        try:
            got = fn(*args)
        except ExerciseError:
            raise
        except Exception as e:  # noqa: BLE001 - the student's function failing is a finding, reported as such
            raise ExerciseError(f"test case {k + 1}: {call} raised {type(e).__name__}: {e}") from e
        if isinstance(expected, tuple):
            if not isinstance(got, (tuple, list)) or len(got) != len(expected):
                raise ExerciseError(f"test case {k + 1}: {call} should return {len(expected)} values, got "
                                    f"{type(got).__name__}{'' if not isinstance(got, (tuple, list)) else len(got)}")
            for j, (g, e) in enumerate(zip(got, expected)):
                check_array(g, e, name=f"result {j}", where=f"test case {k + 1}: {call}", rtol=rtol, atol=atol)
        else:
            check_array(got, expected, name="the result", where=f"test case {k + 1}: {call}", rtol=rtol, atol=atol)


def _short(a: Any) -> str:
    if isinstance(a, np.ndarray):
        return f"<array {a.shape}>"
    if callable(a):
        return getattr(a, "__name__", "f")
    text = repr(a)
    return text if len(text) <= 30 else text[:27] + "..."


def check_node_values(values: Mapping[int, Any], graph: Any, feeds: Mapping[Any, Any]) -> None:
    """Compare the student's value of every node (``{node id: array}``) with the numpy backend's.

    The first node (in graph order) that is missing or wrong is named: its id, op, name,
    the line that created it, expected vs got. Leaves count too.
    """
    from ..backends import numpy_backend
    from ..backends.common import resolve_feeds

    ids = [n.id for n in graph.nodes if n.op not in ("input", "parameter")]
    plan = numpy_backend.compile(graph, ids)
    expected = dict(zip(ids, plan.run(feeds, dtype=np.float64)))
    for nid, v in resolve_feeds(graph, feeds).items():
        expected[nid] = np.asarray(v, dtype=np.float64)
    if not isinstance(values, Mapping):
        raise ExerciseError(f"the values should be a dict {{node id: array}}, got {type(values).__name__}")
    for node in graph.nodes:
        where = f"node #{node.id} {node.op} '{node.name}', created at {node.source}"
        if node.id not in values:
            raise ExerciseError(f"no value for {where}: every node needs one (walk all of graph.nodes)")
        check_array(values[node.id], expected[node.id], name=f"the value of node #{node.id}", where=where)


def numerical_gradient(y: Any, x: Any, feeds: Mapping[Any, Any], eps: float = 1e-6) -> np.ndarray:
    """d y / d x by central differences of the FORWARD graph only, in float64 (``y`` a scalar Tensor).

    It never touches a backward rule, so it stays right while a bug is planted in one.
    """
    from ..backends import numpy_backend
    from ..backends.common import resolve_feeds

    if y.shape != ():
        raise ValueError(f"numerical_gradient needs a scalar y, got shape {y.shape}")
    plan = numpy_backend.compile(y.graph, [y.node_id])
    base = {k: np.asarray(v, dtype=np.float64) for k, v in resolve_feeds(y.graph, feeds).items()}
    x0 = base[x.node_id]
    out = np.zeros(x0.shape)
    for i in np.ndindex(*x0.shape):
        plus, minus = x0.copy(), x0.copy()
        plus[i] += eps
        minus[i] -= eps
        fp = float(plan.run({**base, x.node_id: plus}, dtype=np.float64)[0])
        fm = float(plan.run({**base, x.node_id: minus}, dtype=np.float64)[0])
        out[i] = (fp - fm) / (2 * eps)
    return out


def check_vjp_rule(op: str, rule: Callable, cases: Sequence[Sequence[tuple[int, ...]]],
                   seed: int = 0) -> None:
    """Check a backward rule written by the student for a binary op against finite differences.

    For each case (a list of input shapes, e.g. ``[(4, 3), (4, 1)]``), builds
    ``sum(w * op(a, b))`` with random values, differentiates it with ``rule`` patched in
    (``asgteach.ops.patched``), and compares each input's gradient with central
    differences. The message names the case, the input and the worst element.
    """
    from .. import ops
    from ..autograd import grad
    from ..backends import run
    from ..graph import Graph

    rng = np.random.default_rng(seed)
    for k, shapes in enumerate(cases):
        with Graph(f"check {op}"):
            ins = [ops.input(f"in{i}", s) for i, s in enumerate(shapes)]
            out = ops.apply(op, *ins)
            w = ops.input("w", out.shape)
            y = ops.sum(w * out)
            with ops.patched(op, vjp=rule):
                try:
                    grads = grad(y, ins)
                except Exception as e:  # noqa: BLE001 - a rule that cannot even build is a finding
                    raise ExerciseError(f"case {k + 1} (input shapes {list(shapes)}): building the gradient with "
                                        f"your rule failed: {type(e).__name__}: {e}") from e
        feeds = {t: 0.5 + rng.random(s) for t, s in zip(ins, shapes)}  # positive: safe for div, log, pow
        feeds[w] = rng.standard_normal(out.shape)
        got = run(grads, feeds)
        for i, (t, gv) in enumerate(zip(ins, got)):
            check_array(gv, numerical_gradient(y, t, feeds), name=f"the gradient of input {i}",
                        where=f"case {k + 1}: {op} of shapes {list(shapes)}", rtol=1e-5, atol=1e-7)
