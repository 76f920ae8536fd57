"""Checks for the exercises: on a wrong answer they say what is wrong and where.

Every check raises :class:`~asgteach.grading.exercises.ExerciseError` with a message a
student can act on — the shape that was expected, the element that differs most, the node
whose value is off, the test case a function fails on — and returns quietly (or prints a
short confirmation) when the answer is right. None of them is a bare ``assert``.

The reference values the checks compare with are computed independently of the code being
taught where that matters: :func:`numerical_gradient` uses only the forward graph (central
differences in float64), so a gradient check still tells the truth while a bug is planted
in a backward rule.
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from .exercises import ExerciseError

__all__ = [
    "check_array", "check_equal", "check_function", "check_node_values", "check_vjp_rule", "check_true",
    "numerical_gradient", "check_tensor", "without",
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
    if (~np.isfinite(arr) & np.isfinite(expected)).any():
        msg += (" It holds inf or nan where the expected value is finite: something overflowed (an exp of a large "
                "number?) or took the log of 0. For exp and log-sum-exp: subtract the max first.")
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
                   atol: float = 1e-9, hint: str = "") -> None:
    """Call the student's ``fn(*args)`` on each case and compare with the expected result.

    ``cases`` is a list of ``(args, expected)``; ``expected`` is an array, a number, or a
    tuple of arrays (for a function returning several). The message names the failing case;
    ``hint`` is added to it (say, what a common mistake looks like).
    """
    try:
        _check_cases(fn, cases, name, rtol, atol)
    except ExerciseError as e:
        if hint:
            raise ExerciseError(f"{e}\n  Hint: {hint}") from None
        raise


def _check_cases(fn: Any, cases: Iterable[tuple[tuple, Any]], name: str | None, rtol: float, atol: float) -> None:
    name = name or getattr(fn, "__name__", "your function")
    if not callable(fn):
        raise ExerciseError(f"{name} should be a function, got {type(fn).__name__}")
    for k, (args, expected) in enumerate(cases):
        shown = ", ".join(_short(a) for a in args)
        call = f"{name}({shown})"
        try:
            got = fn(*args)
        except (ExerciseError, NotImplementedError):
            raise  # NotImplementedError: the stub of an unfinished exercise; check(n) says "not done yet"
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

    library = {name: spec.vjp for name, spec in ops.REGISTRY.items() if getattr(spec, "vjp", None) is not None}
    borrowed = [name for name, vjp in library.items() if rule is vjp]
    if borrowed:
        raise ExerciseError(f"your rule is the library's own backward rule of {borrowed[0]!r}: the exercise asks you "
                            "to write it (in graph ops, from c.inputs, c.out and g)")

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
                except NotImplementedError:
                    raise  # the stub of an unfinished exercise: check(n) says "not done yet"
                except Exception as e:  # noqa: BLE001 - a rule that cannot even build is a finding
                    raise ExerciseError(f"case {k + 1} (input shapes {list(shapes)}): building the gradient with "
                                        f"your rule failed: {type(e).__name__}: {e}") from e
        feeds = {t: 0.5 + rng.random(s) for t, s in zip(ins, shapes)}  # positive: safe for div, log, pow
        feeds[w] = rng.standard_normal(out.shape)
        got = run(grads, feeds)
        for i, (t, gv) in enumerate(zip(ins, got)):
            check_array(gv, numerical_gradient(y, t, feeds), name=f"the gradient of input {i}",
                        where=f"case {k + 1}: {op} of shapes {list(shapes)}", rtol=1e-5, atol=1e-7)


def check_tensor(t: Any, inputs: Sequence[Any], expected: Callable[..., Any], name: str = "your tensor",
                 backward: bool = False, trials: int = 3, seed: int | None = None, rtol: float = 1e-6,
                 atol: float = 1e-9) -> None:
    """Run the student's Tensor ``t`` at FRESH values of ``inputs`` and compare with ``expected(*values)``.

    A value the student computed once (or copied from a check) cannot pass: the check draws
    new inputs (standard normal, ``trials`` times) that the student never saw. ``backward=True``
    also demands that ``t`` was made by ``at.grad`` (its graph holds backward nodes it depends on),
    not written out by hand with forward ops.
    """
    from ..backends import run
    from ..tensor import Tensor

    if not isinstance(t, Tensor):
        raise ExerciseError(f"{name} should be a Tensor (a node of your graph), got {type(t).__name__}: keep the "
                            "Tensor, the check runs it on inputs of its own")
    if backward:
        graph = t.graph
        seen, todo = set(), [t.node_id]
        while todo:
            i = todo.pop()
            if i not in seen:
                seen.add(i)
                todo.extend(graph.nodes[i].inputs)
        if not any(graph.nodes[i].phase == "backward" for i in seen):
            raise ExerciseError(f"{name} holds no backward node: build it with at.grad (the point of the exercise), "
                                "not by writing the derivative out with forward ops")
    elsewhere = [x for x in inputs if isinstance(x, Tensor) and x.graph is not t.graph]
    if elsewhere:   # (a cell that makes the inputs ran again after the answer: they are new, the answer is old)
        raise ExerciseError(f"{name} belongs to another graph than the input '{elsewhere[0].name}' it should depend "
                            "on: the cell that makes that input ran again after your answer cell. Run that "
                            "section's cells again in order, then your answer cell, then this one")
    rng = np.random.default_rng(seed)
    for k in range(trials):
        values = [rng.standard_normal(x.shape) for x in inputs]
        try:
            got = run(t, dict(zip(inputs, values)))
        except Exception as e:  # noqa: BLE001 - a tensor that cannot run on other values is a finding
            raise ExerciseError(f"{name} could not be run on fresh inputs ({type(e).__name__}: {e}): does it "
                                "depend on the inputs the exercise names?") from e
        check_array(got, expected(*values), name=name, where=f"at fresh input values, trial {k + 1}", rtol=rtol,
                    atol=atol)


@contextmanager
def without(*op_names: str, attrs: Sequence[tuple[Any, str]] = (), why: str = "") -> Iterator[None]:
    """Inside the block the library cannot do the exercise for the student.

    Each op of ``op_names`` (its kernel and its shape rule) and each attribute ``(owner, name)``
    of ``attrs`` raises ExerciseError naming what was called: a check computes its expected
    values first, then calls the student's function inside ``without(...)``, so a function that
    hands the work to ``at.log_softmax`` or ``at.optim.Adam`` fails with ``why``.

    Replacing them where they are looked up does not reach a function the answer already holds (a
    default argument ``_ref=at.optim.clip_grad_norm``, a closure, an op's kernel taken from its spec),
    so the block also watches what runs (:func:`~.calls.refusing_calls`): a call into the code of
    those functions fails the check however it was reached.
    """
    from ..ops import registry
    from .calls import refusing_calls

    def refuse(what: str) -> Callable[..., Any]:
        def refused(*args: Any, **kwargs: Any) -> Any:
            raise ExerciseError(f"your answer calls {what}, which the exercise asks you to write yourself"
                                + (f": {why}" if why else ""))
        return refused

    watched: list[tuple[Any, str]] = []
    with ExitStack() as stack:
        # an op's own kernel is watched; one that other ops share (a generic shape rule, a kernel reused
        # under two names) is not: an answer may use those other ops
        others = {}
        for name, entry in registry.REGISTRY.items():
            if name not in op_names:
                others[getattr(getattr(entry, "numpy", None), "__code__", None)] = name
        for op in op_names:
            kernel = registry.spec(op).numpy
            if getattr(kernel, "__code__", None) not in others:
                watched.append((kernel, f"the library's {op}"))
            stack.enter_context(registry.patched(op, numpy=refuse(f"the library's {op}"),
                                                 infer=refuse(f"the library's {op}")))
        for owner, attr in attrs:
            original = getattr(owner, attr)
            label = f"{getattr(owner, '__name__', type(owner).__name__)}.{attr}"
            watched.append((original, label))
            setattr(owner, attr, refuse(label))
            stack.callback(setattr, owner, attr, original)
        # keys=False: a check may compute its expected values inside the block (the checks that call the
        # student's code with the keys loaded watch them with refusing_calls themselves)
        stack.enter_context(refusing_calls("your answer", *watched, keys=False, why=why))
        yield
