"""Lesson 1b's checks: an autograd from scratch (a topological sort, fan-out in one op, the power rule).

In lesson 1b the student writes ``Value``, a float that remembers its ``inputs`` and carries a
``_backward`` closure (micrograd style, in plain Python). Each check here runs the student's function
on expressions and graphs the lesson never showed, at fresh random points, and compares every gradient
with two referees that share none of the student's code:

* ``at.grad`` on the same expression built as an asgteach graph (scalar inputs), and
* central differences of the same expression evaluated with plain floats.

Three shortcuts must fail, each with a message that says why:

* handing the work to asgteach inside the answer (``at.grad``, a compiled plan, an op's kernel): the
  exercise's rule (``RULES[n]``: no asgteach) is read from the answer's source, and in a student's kernel,
  while the student's code runs, a profile hook also notes every call into the asgteach package (a check's
  own helpers excepted), and any such call fails the exercise — "plain Python" is the exercise. (In the
  judge of a graded course the hook stands down: the answer runs in the sandbox, and all the hook would see
  there is the channel to it; the rule, which the judge reads from the answer cell, decides);
* a derivative computed by finite differences, or the forward value sent back in its place: the op is
  first checked alone, exact to round-off (finite differences agree to ~10 digits only), and the
  message says what the wrong number looks like;
* a value written for the lesson's one point: every number is drawn fresh.

Each exercise's ``RULES[n]`` (no library's topological sort, no recursion, no asgteach) is read from the
answer's source before it runs.

What the student's functions take apart is made where they run: the nodes a ``topo_order`` walks
(``topo_graphs.submission_graph``, from a description of the check's graph as plain data), the expressions built
from the student's ``Value`` and ``dot``/``value_pow`` (:func:`submission_expression`). The checks fetch
these with ``on_submission_side``: in a student's kernel the functions themselves, in the judge of a graded
course handles to the sandbox's copies (the student's objects live there, and a judge-side object would not
answer their attribute reads). What comes back is believed only as far as identity goes: the sort's answer
is checked against the check's own description, node by node, and every number is compared here.

The lesson imports the three public checks only; this file gives the answers away: try the lesson first.
"""

from __future__ import annotations

import functools
import math
import operator
import os
import sys
from pathlib import Path
from types import CodeType
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ..grading import rules
from ..grading.rules import STAND_INS, Rule, no_asgteach
from ..grading.exercises import ExerciseError, in_judge, on_submission_side
from .topo_graphs import Shape, graphs, sorted_by_student

__all__ = ["LESSON", "RULES", "topo_order_check", "dot_check", "pow_check"]

LESSON = "01b-autograd-from-scratch"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {
    1: Rule(why="write the topological sort yourself, with an explicit stack (no recursion, no library)",
            imports=STAND_INS, names=frozenset({"topo_order_recursive", "at", "asgteach"})),
    2: no_asgteach("plain Python: the exercise is the _backward closure, and an answer that uses asgteach skips it"),
    3: no_asgteach("plain Python: the exercise is the power rule, and an answer that uses asgteach skips it"),
}

#: the asgteach package folder: a call into any file under it, from a student's answer, is the library's help
_PACKAGE = os.path.realpath(Path(__file__).resolve().parents[1])
_TIGHT = dict(rtol=1e-9, atol=1e-12)         # a gradient against at.grad: round-off only
_EXACT = dict(rtol=1e-12, atol=1e-14)        # one op's local derivative, alone: finite differences miss this


def _fresh(seed: int | None = None) -> np.random.Generator:
    return np.random.default_rng(seed)


def _num(v: float) -> str:
    return f"{v:.10g}"


# --- the guard: the answer must not call asgteach ---------------------------------------------------

@functools.lru_cache(maxsize=None)
def _in_package(filename: str) -> bool:
    return os.path.realpath(filename).startswith(_PACKAGE + os.sep)


def _codes(*functions: Callable[..., Any]) -> frozenset[CodeType]:
    """The code objects of ``functions`` and of everything nested in them (lambdas, generator expressions)."""
    found: set[CodeType] = set()
    todo = [f.__code__ for f in functions]
    while todo:
        code = todo.pop()
        if code not in found:
            found.add(code)
            todo.extend(c for c in code.co_consts if isinstance(c, CodeType))
    return frozenset(found)


class _Guard:
    """Runs the student's code with a profile hook that notes the first call into the asgteach package.

    ``allowed`` are this module's own helpers that run under the hook (the expression builders). A hook
    switched off by the answer is noted too.
    """

    def __init__(self, allowed: frozenset[CodeType]) -> None:
        self.allowed = allowed
        self.touched: str | None = None
        self.escaped = False
        self._hook = self._profile            # one bound method: sys.getprofile() returns this same object

    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        if event != "call" or self.touched is not None:
            return
        code = frame.f_code
        if code not in self.allowed and _in_package(code.co_filename):
            where = os.path.relpath(os.path.realpath(code.co_filename), os.path.dirname(_PACKAGE))
            self.touched = f"{code.co_name} in {where}"

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        if in_judge():       # the student's code runs in the sandbox: the hook would see only the channel
            return fn(*args)
        previous = sys.getprofile()
        sys.setprofile(self._hook)
        try:
            return fn(*args)
        finally:
            if sys.getprofile() is not self._hook:
                self.escaped = True
            sys.setprofile(previous)

    def verdict(self, name: str) -> None:
        """Raise ExerciseError if the student's code called asgteach (or switched the hook off)."""
        if self.touched is not None:
            raise ExerciseError(
                f"{name} uses asgteach (it called {self.touched} while it ran): the exercise is to write it in "
                "plain Python (math or numpy), and the check compares your numbers with asgteach's own")
        if self.escaped:
            raise ExerciseError(f"{name} switched off the check's profile hook (sys.setprofile): leave it alone")


def _call(guard: _Guard, name: str, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` under the guard; an exception becomes an ExerciseError naming ``name`` (a stub's passes)."""
    try:
        result = guard.call(fn, *args)
    except NotImplementedError:
        raise                               # the stub of an unfinished exercise: check(n) says "not done yet"
    except ExerciseError:
        raise
    except Exception as e:  # noqa: BLE001 - the student's code failing is a finding, reported as such
        guard.verdict(name)                 # an asgteach call that failed is reported as the asgteach call
        hint = ""
        if isinstance(e, AttributeError) and "'backward'" in str(e):
            hint = ("\n  Hint: running the `class Value` cell again makes a new class, without the methods added "
                    "after it: run section 2's cell (Value.backward = backward) again, then this one")
        raise ExerciseError(f"{name} raised {type(e).__name__}: {e}{hint}") from e
    guard.verdict(name)
    return result


# --- the same expression in three worlds: the student's Values, an asgteach graph, floats ----------------

class _Ops(NamedTuple):
    """What an expression needs besides + and *: tanh, and the op under test (dot, pow)."""

    tanh: Callable[[Any], Any]
    dot: Callable[[Sequence[Any], Sequence[Any]], Any]
    pow: Callable[[Any, float], Any]


def _plain_dot(ws: Sequence[Any], xs: Sequence[Any]) -> Any:
    return functools.reduce(operator.add, [w * x for w, x in zip(ws, xs)])


def _plain_pow(x: Any, n: float) -> Any:
    return x ** n


def _value_tanh(v: Any) -> Any:
    return v.tanh()


def _graph_ops() -> _Ops:
    import asgteach as at

    return _Ops(at.tanh, _plain_dot, _plain_pow)


_FLOATS = _Ops(math.tanh, _plain_dot, _plain_pow)


class _Expression(NamedTuple):
    """An expression of scalar leaves, written once for any of the three worlds: ``build(ops, *leaves)``."""

    text: str
    leaves: tuple[str, ...]
    build: Callable[..., Any]
    positive: bool = False                  # leaves drawn > 0 (a fractional power of a negative number)
    key: tuple[Any, ...] = ()               # plain data that names it: _expression_for(key) makes it again


def _referees(expr: _Expression, values: Sequence[float]) -> tuple[float, np.ndarray, np.ndarray]:
    """(value, at.grad's gradient, central differences' gradient) of ``expr`` at ``values``; they must agree."""
    import asgteach as at

    with at.Graph(name=f"check: {expr.text}"):
        leaves = [at.input(name, ()) for name in expr.leaves]
        root = expr.build(_graph_ops(), *leaves)
        grads = at.grad(root, leaves)
    out = at.run([root, *grads], {t: np.float64(v) for t, v in zip(leaves, values)})
    value, by_grad = float(out[0]), np.array([float(g) for g in out[1:]])
    by_fd = np.zeros(len(values))
    for i, v in enumerate(values):
        h = 1e-6 * max(1.0, abs(v))
        up, down = list(values), list(values)
        up[i], down[i] = v + h, v - h
        by_fd[i] = (expr.build(_FLOATS, *up) - expr.build(_FLOATS, *down)) / (2 * h)
    if not np.allclose(by_grad, by_fd, rtol=1e-5, atol=1e-7):   # the referees disagree: a bug of this check
        raise RuntimeError(f"check error: at.grad {by_grad} and central differences {by_fd} disagree on "
                           f"{expr.text} at {list(values)}")
    return value, by_grad, by_fd


def _draw(expr: _Expression, rng: np.random.Generator) -> list[float]:
    if expr.positive:
        return [float(v) for v in rng.uniform(0.4, 1.8, size=len(expr.leaves))]
    return [float(v) * float(rng.choice([-1.0, 1.0])) for v in rng.uniform(0.3, 1.5, size=len(expr.leaves))]


def _make_leaves(Value: Any, values: Sequence[float]) -> list[Any]:
    return [Value(v) for v in values]


def _student_run(expr: _Expression, ops: _Ops, leaves: Sequence[Any]) -> Any:
    """Build ``expr`` on the student's Values ``leaves`` with ``ops``, and run its backward(): the root."""
    root = expr.build(ops, *leaves)
    root.backward()
    return root


def submission_expression(key: Sequence[Any], fn: Callable[..., Any], leaves: Sequence[Any]) -> Any:
    """The expression ``key`` names (``_expression_for``), built where the student's code runs on the student's
    Values ``leaves`` with the student's op ``fn`` (a dot or a power), swept by its backward(): the root.

    The check fetches this function with ``on_submission_side``: in a graded course the student's Values and
    functions live in the sandbox, and a judge's own ``+`` or ``*`` of them could not run there.
    """
    key = tuple(key)
    expr = _expression_for(key)
    ops = _Ops(_value_tanh, fn, _plain_pow) if key[0] == "dot" else _Ops(_value_tanh, _plain_dot, fn)
    return _student_run(expr, ops, leaves)


def _compare_with_referees(expr: _Expression, Value: Any, fn: Callable[..., Any], values: Sequence[float],
                           guard: _Guard, name: str, hint: str) -> None:
    """The student's value and gradients of ``expr`` at ``values`` against at.grad and central differences."""
    value, by_grad, by_fd = _referees(expr, values)
    at_point = ", ".join(f"{n}={_num(v)}" for n, v in zip(expr.leaves, values))
    call = f"{expr.text} (built with your {name})"
    leaves = _call(guard, call, _make_leaves, Value, list(values))
    root = _call(guard, call, on_submission_side(f"{__name__}.submission_expression"), list(expr.key), fn, leaves)
    got_value = float(getattr(root, "data", np.nan))
    if not np.isclose(got_value, value, **_TIGHT):
        raise ExerciseError(f"the value of {expr.text} at {at_point} should be {_num(value)}, your Values give "
                            f"{_num(got_value)}: check the forward part of {name} (out.data)")
    for leaf, n, want, fd in zip(leaves, expr.leaves, by_grad, by_fd):
        got = float(leaf.grad)
        if not np.isclose(got, want, **_TIGHT):
            raise ExerciseError(
                f"d/d{n} of {expr.text} at {at_point} should be {_num(want)} (at.grad on the same expression: "
                f"{_num(want)}, central differences: {fd:.8g}), backward() with your {name} gives {_num(got)}."
                + (f"\n  Hint: {hint}" if hint else ""))


# --- exercise 1: topo_order on graphs of the check's own (their structure checks: topo_graphs.py) ----------------

class _Scalar:
    """The check's own Value (add, mul, tanh), for exercise 1's gradients: it is ordered by the student's sort."""

    def __init__(self, data: float, inputs: Sequence[_Scalar] = (), name: str = "") -> None:
        self.data, self.grad, self.inputs, self.name = float(data), 0.0, tuple(inputs), name
        self._backward: Callable[[], None] = lambda: None

    def __add__(self, other: _Scalar) -> _Scalar:
        out = _Scalar(self.data + other.data, (self, other), "+")

        def back() -> None:
            self.grad += out.grad
            other.grad += out.grad
        out._backward = back
        return out

    def __mul__(self, other: _Scalar) -> _Scalar:
        out = _Scalar(self.data * other.data, (self, other), "*")

        def back() -> None:
            self.grad += other.data * out.grad
            other.grad += self.data * out.grad
        out._backward = back
        return out

    def tanh(self) -> _Scalar:
        t = math.tanh(self.data)
        out = _Scalar(t, (self,), "tanh")

        def back() -> None:
            self.grad += (1 - t * t) * out.grad
        out._backward = back
        return out

    def __repr__(self) -> str:
        return f"<{self.name} {self.data:.4g}>"


def _shape_of(root: _Scalar) -> tuple[Shape, list[_Scalar]]:
    """The check's own Values below ``root`` as a Shape (a post-order of its own, the root last), and them."""
    order: list[_Scalar] = []
    index: dict[int, int] = {}
    stack: list[tuple[_Scalar, bool]] = [(root, False)]
    while stack:
        v, expanded = stack.pop()
        if expanded:
            index[id(v)] = len(order)
            order.append(v)
        elif id(v) not in index:             # a DAG: a node is never below itself on the stack
            stack.append((v, True))
            stack.extend((c, False) for c in v.inputs if id(c) not in index)
    shape = Shape()
    for k, v in enumerate(order):
        name = v.name if not v.inputs else f"{v.name} #{k}"
        shape.add(name, *(index[id(c)] for c in v.inputs))
    return shape, order



def _recipe(rng: np.random.Generator, leaves: int, inner: int) -> list[tuple[int, int, int]]:
    """A random expression with shared subexpressions: node k = tanh(node u * node v) + node w (u, v, w earlier)."""
    return [tuple(int(j) for j in rng.integers(0, leaves + k, size=3)) for k in range(inner)]


def _recipe_expression(recipe: list[tuple[int, int, int]], leaves: int) -> _Expression:
    def build(ops: Any, *xs: Any) -> Any:
        nodes = list(xs)
        for u, v, w in recipe:
            nodes.append(ops.tanh(nodes[u] * nodes[v]) + nodes[w])
        return nodes[-1] + nodes[-2] * nodes[-3]
    names = tuple("abcdefgh"[:leaves])
    return _Expression(f"a random expression of {len(recipe)} steps in {', '.join(names)}", names, build)


def topo_order_check(topo_order: Callable[[Any], Any], trials: int = 2) -> None:
    """Exercise 1: ``topo_order(root)``, every node reachable once, inputs first, on graphs of the check's own.

    Structure first, on nodes that have only ``inputs`` (a leaf, x * x, a diamond, a chain of ~30 diamonds that
    a sort without a visited set walks 2**30 times, random graphs with shared nodes, a chain longer than
    Python's recursion limit), each sorted twice (a sort that leaves marks on the nodes fails the second time).
    Then gradients: fresh random expressions of the check's own Value, ordered by ``topo_order`` (on nodes of
    the same shape, built where it runs) and swept backwards, against at.grad and central differences.
    """
    rules.enforce(topo_order, RULES[1], "topo_order")
    if not callable(topo_order):
        raise ExerciseError(f"topo_order should be a function, got {type(topo_order).__name__}")
    rng = _fresh()
    for where, shape in graphs(rng):
        sorted_by_student(topo_order, shape, f"on {where}", twice=len(shape) < 1000)
    for k in range(trials):
        leaves = 3
        expr = _recipe_expression(_recipe(rng, leaves, int(rng.integers(6, 10))), leaves)
        values = _draw(expr, rng)
        value, by_grad, by_fd = _referees(expr, values)
        xs = [_Scalar(v, name=n) for n, v in zip(expr.leaves, values)]
        root = expr.build(_Ops(_value_tanh, _plain_dot, _plain_pow), *xs)
        shape, scalars = _shape_of(root)
        got = [scalars[i] for i in sorted_by_student(topo_order, shape, f"on {expr.text}", twice=False)]
        for v in got:
            v.grad = 0.0
        root.grad = 1.0
        for v in reversed(got):
            v._backward()
        for leaf, want, fd in zip(xs, by_grad, by_fd):
            if not np.isclose(leaf.grad, want, **_TIGHT):
                raise ExerciseError(f"sweeping {expr.text} in the reverse of your order gives d/d{leaf.name} = "
                                    f"{_num(leaf.grad)}, but at.grad says {_num(want)} (central differences "
                                    f"{fd:.8g})")


# --- exercise 2: a fused dot, fan-out inside one op ------------------------------------------------------

def _dot_1(ops: Any, x: Any) -> Any:
    return ops.dot([x], [x])


def _dot_2(ops: Any, a: Any, b: Any, c: Any) -> Any:
    return ops.dot([a, a], [b, c])


def _dot_3(ops: Any, a: Any, b: Any) -> Any:
    return ops.dot([a, b], [b, a]) * a


def _dot_4(ops: Any, a: Any, b: Any, c: Any) -> Any:
    p = a * b
    q = ops.tanh(c)
    return ops.dot([p, q, p], [q, p, c]) + p * q


def _dot_5(ops: Any, a: Any, b: Any) -> Any:
    return ops.tanh(ops.dot([a, b, a], [a, a, b])) * ops.dot([b], [a])


_DOT_EXPRESSIONS = tuple(expr._replace(key=("dot", k)) for k, expr in enumerate((
    _Expression("dot([x], [x])", ("x",), _dot_1),
    _Expression("dot([a, a], [b, c])", ("a", "b", "c"), _dot_2),
    _Expression("dot([a, b], [b, a]) * a", ("a", "b"), _dot_3),
    _Expression("dot([p, q, p], [q, p, c]) + p * q with p = a * b, q = tanh(c)", ("a", "b", "c"), _dot_4),
    _Expression("tanh(dot([a, b, a], [a, a, b])) * dot([b], [a])", ("a", "b"), _dot_5),
)))


def submission_kind(out: Any, Value: Any) -> str:
    """What ``out`` is, said where the student's code runs: "Value" (an instance of the class ``Value`` with a
    Value's attributes), "older Value" (of a class of that name, not that one), else its type's name.

    The check fetches this function with ``on_submission_side`` (in a graded course ``out`` and ``Value`` live in
    the sandbox); what it says only picks the message: the check then reads ``out``'s numbers itself.
    """
    if isinstance(out, Value) and all(hasattr(out, a) for a in ("data", "grad", "inputs", "_backward")):
        return "Value"
    if type(out).__name__ == getattr(Value, "__name__", ""):
        return "older Value"
    return type(out).__name__


def _not_a_value(call: str, out: Any, Value: Any) -> ExerciseError | None:
    """None when ``out`` is a Value of the class the check was given; else the error that says what it is."""
    kind = on_submission_side(f"{__name__}.submission_kind")(out, Value)
    if kind == "Value":
        return None
    if kind == "older Value":
        return ExerciseError(f"{call} returned a Value of an older `class Value` than the one the check was given: "
                             "was the class cell run again after this answer? Run the lesson's cells again in order")
    return ExerciseError(f"{call} should return a Value (one new node), got {str(kind)[:60]}: {out!r:.60}")


def _dot_alone(dot: Callable[..., Any], Value: Any, rng: np.random.Generator) -> None:
    """One call of dot with repeated inputs, its _backward called alone: exact, added to what was there."""
    names = ("a", "b", "c")
    data = [float(v) for v in rng.uniform(-1.5, 1.5, size=3)]
    before = [float(v) for v in rng.uniform(-1.0, 1.0, size=3)]
    pick_w, pick_x = [0, 1, 0, 2], [2, 0, 1, 0]            # a appears 4 times, b twice, c twice
    guard = _Guard(frozenset())
    leaves = [Value(v) for v in data]
    for leaf, g in zip(leaves, before):
        leaf.grad = g
    ws, xs = [leaves[i] for i in pick_w], [leaves[i] for i in pick_x]
    call = "dot([a, b, a, c], [c, a, b, a])"
    point = ", ".join(f"{n}={_num(v)}" for n, v in zip(names, data))
    out = _call(guard, call, dot, ws, xs)
    if (error := _not_a_value(call, out, Value)) is not None:
        raise error
    want = sum(data[i] * data[j] for i, j in zip(pick_w, pick_x))
    if not np.isclose(out.data, want, **_EXACT):
        raise ExerciseError(f"{call} at {point}: out.data should be {_num(want)}, got {_num(out.data)}")
    inputs = list(getattr(out, "inputs", ()))
    for leaf, n in zip(leaves, names):
        if not any(v is leaf for v in inputs):
            raise ExerciseError(
                f"{call}: {n} is not among out.inputs. dot must be ONE Value whose inputs are the ws and the xs "
                "(not a chain of * and + Values): the topological sort reaches a node only through .inputs")
    g = float(rng.uniform(1.2, 2.2)) * float(rng.choice([-1.0, 1.0]))   # never near 1: a missing out.grad shows
    out.grad = g
    _call(guard, f"{call}'s _backward", out._backward)
    contributions: list[list[float]] = [[], [], []]
    for i, j in zip(pick_w, pick_x):
        contributions[i].append(data[j] * g)                 # d(w x)/dw = x
        contributions[j].append(data[i] * g)                 # d(w x)/dx = w
    got = [float(leaf.grad) for leaf in leaves]
    if all(np.isclose(gv, b, **_EXACT) for gv, b in zip(got, before)):
        raise ExerciseError(
            f"after {call} and a call of out._backward(), no input's grad changed. Did you assign "
            "out._backward = your closure? dot must be ONE Value whose _backward sends to every w and every x")
    for n, gv, b, parts in zip(names, got, before, contributions):
        want_g = b + sum(parts)
        if np.isclose(gv, want_g, **_EXACT):
            continue
        where = (f"{n} appears {len(parts)} times among the inputs of {call} (at {point}, out.grad = {_num(g)}), "
                 f"and had grad {_num(b)} already (from its other uses)")
        if np.isclose(gv, sum(parts), **_EXACT):
            why = ("Its grad became the sum of its contributions but lost the grad it had before: a contribution "
                   "must be ADDED to what is there, never replace it (section 3)")
        elif any(np.isclose(gv, p, **_EXACT) or np.isclose(gv, b + p, **_EXACT) for p in parts):
            why = (f"Only one of its {len(parts)} contributions survived: each later one replaced the earlier ones "
                   "instead of adding to them (section 3)")
        elif np.isclose(gv - b, sum(parts) / g, **_EXACT):
            why = "Each contribution must be multiplied by out.grad (the chain rule)"
        else:
            why = "Each w gets x * out.grad and each x gets w * out.grad, every one of them added to its grad"
        raise ExerciseError(f"{where}: its grad should now be {_num(want_g)}, got {_num(gv)}. {why}")


def dot_check(dot: Callable[..., Any], Value: Any, trials: int = 2) -> None:
    """Exercise 2: ``dot(ws, xs)``, ONE Value for sum(w * x), whose _backward adds at every repeated input.

    First alone (repeated inputs, grads already non-zero, out.grad not 1: a contribution assigned with ``=``
    instead of added shows at once), then in fresh fan-out expressions (x . x, a node used by dot and by
    other ops, dot inside tanh) built from the student's Value, swept by its backward(), against at.grad and
    central differences. asgteach must not be called while the student's code runs.
    """
    rules.enforce(dot, RULES[2], "dot")
    if not callable(dot):
        raise ExerciseError(f"dot should be a function dot(ws, xs), got {type(dot).__name__}")
    rng = _fresh()
    _dot_alone(dot, Value, rng)
    for _ in range(trials):
        for expr in _DOT_EXPRESSIONS:
            _compare_with_referees(expr, Value, dot, _draw(expr, rng), _Guard(_ALLOWED), "dot",
                                   hint="a Value used several times, inside one dot or by dot and other ops, "
                                        "must receive every contribution, added up")


# --- exercise 3: the power rule as a _backward ----------------------------------------------------------

def _pow_1(ops: Any, x: Any, n: float) -> Any:
    return ops.pow(x, n)


def _pow_2(ops: Any, x: Any, y: Any, n: float) -> Any:
    return ops.tanh(ops.pow(x, n)) * y


def _pow_3(ops: Any, x: Any, y: Any, n: float) -> Any:
    return ops.pow(x * y, n) + x


def _pow_4(ops: Any, x: Any, n: float, m: float) -> Any:
    return ops.pow(x, n) * ops.pow(x, m)


def _pow_5(ops: Any, x: Any, y: Any, n: float, m: float) -> Any:
    return ops.pow(ops.pow(x, n) + y * y, m)


_POW_BUILDERS = (_pow_1, _pow_2, _pow_3, _pow_4, _pow_5)
#: (text, leaves, builder) of each power expression; the text's {n} and {m} are the exponents
_POW_EXPRESSIONS = (
    ("x ** {n}", ("x",), _pow_1),
    ("tanh(x ** {n}) * y", ("x", "y"), _pow_2),
    ("(x * y) ** {n} + x", ("x", "y"), _pow_3),
    ("x ** {n} * x ** {m}", ("x",), _pow_4),
    ("(x ** {n} + y * y) ** {m}", ("x", "y"), _pow_5),
)


def _pow_expression(k: int, n: float, m: float) -> _Expression:
    """Power expression ``k`` of _POW_EXPRESSIONS with the exponents n (and m), leaves drawn > 0."""
    text, leaves, builder = _POW_EXPRESSIONS[k]
    exponents = {"n": n, "m": m} if "{m}" in text else {"n": n}
    return _Expression(text.format(n=repr(n), m=repr(m)), leaves, functools.partial(builder, **exponents),
                       positive=True, key=("pow", k, n, m))


def _exponents(rng: np.random.Generator) -> list[float]:
    """Fresh exponents: integers of both signs, halves, and one of any size."""
    pool = [2, 3, -1, -2, 0.5, 1.5, -0.5, 2.5]
    picks = [pool[int(i)] for i in rng.permutation(len(pool))[:4]]
    return [*picks, round(float(rng.uniform(0.3, 2.7)), 3)]


def _pow_alone(value_pow: Callable[..., Any], Value: Any, rng: np.random.Generator) -> None:
    """x ** n alone, for fresh x and n: out.data, out.inputs, and _backward's exact, added contribution."""
    guard = _Guard(frozenset())
    for n in _exponents(rng):
        integer = float(n).is_integer()
        x0 = float(rng.uniform(0.4, 1.8)) * (float(rng.choice([-1.0, 1.0])) if integer else 1.0)
        before = float(rng.uniform(-1.0, 1.0))
        g = float(rng.uniform(1.2, 2.2)) * float(rng.choice([-1.0, 1.0]))   # never near 1: a missing out.grad shows
        call = f"value_pow(x, {n!r}) at x = {_num(x0)}"
        x = Value(x0)
        x.grad = before
        out = _call(guard, call, value_pow, x, n)
        if (error := _not_a_value(call, out, Value)) is not None:
            raise error
        forward = x0 ** n
        if not np.isclose(out.data, forward, **_EXACT):
            raise ExerciseError(f"{call}: out.data should be x ** n = {_num(forward)}, got {_num(out.data)}")
        if not any(v is x for v in getattr(out, "inputs", ())):
            raise ExerciseError(f"{call}: x is not in out.inputs; the topological sort reaches x only through it")
        out.grad = g
        _call(guard, f"{call}: out._backward", out._backward)
        got = float(x.grad) - before
        want = n * x0 ** (n - 1) * g
        if np.isclose(got, want, **_EXACT):
            continue
        head = (f"{call}, with out.grad = {_num(g)} and x.grad = {_num(before)} before: out._backward() should add "
                f"{_num(want)} to x.grad, it added {_num(got)}")
        if np.isclose(float(x.grad), before, **_EXACT):
            why = "Nothing reached x.grad: did you assign out._backward = your closure?"
        elif np.isclose(float(x.grad), want, **_EXACT):
            why = ("The gradient x had before (from its other uses) was lost: add your contribution to x.grad "
                   "(+=), never replace it")
        elif np.isclose(got, forward * g, rtol=1e-9) or np.isclose(got, forward, rtol=1e-9):
            why = ("That is the forward value x ** n (times out.grad): _backward must send the DERIVATIVE of x ** n "
                   "with respect to x, times out.grad")
        elif np.isclose(got, want, rtol=1e-4, atol=1e-8):
            digits = -math.log10(abs(got - want) / max(abs(want), 1e-300))
            why = (f"They agree to {digits:.0f} digits only ({got!r} vs {want!r}): that is what finite differences "
                   "give. Write the exact derivative (the power rule): it agrees to round-off")
        elif np.isclose(got * g, want, **_EXACT):
            why = "Multiply the local derivative by out.grad (the chain rule)"
        else:
            why = "The local derivative d(x ** n)/dx, times out.grad, is what x must receive"
        raise ExerciseError(f"{head}. {why}")


def pow_check(value_pow: Callable[..., Any], Value: Any, trials: int = 2) -> None:
    """Exercise 3: ``value_pow(x, n)`` = x ** n for a constant n, with its exact, accumulating _backward.

    Alone first (fresh x and n, integer and fractional, out.grad not 1, x.grad not 0: the forward value,
    a finite difference, a forgotten out.grad, an ``=`` each get a message of their own), then inside fresh
    expressions (tanh(x**n) * y, (x*y)**n + x, x**n * x**m, (x**n + y*y)**m) swept by the student's
    backward(), against at.grad and central differences. asgteach must not be called while it runs.
    """
    rules.enforce(value_pow, RULES[3], "value_pow")
    if not callable(value_pow):
        raise ExerciseError(f"value_pow should be a function value_pow(x, n), got {type(value_pow).__name__}")
    rng = _fresh()
    _pow_alone(value_pow, Value, rng)
    for _ in range(trials):
        n, m = _exponents(rng)[:2]
        for k in range(len(_POW_EXPRESSIONS)):
            expr = _pow_expression(k, n, m)
            _compare_with_referees(expr, Value, value_pow, _draw(expr, rng), _Guard(_ALLOWED), "value_pow",
                                   hint="check value_pow alone first: out.data = x ** n, and x.grad += "
                                        "(d(x ** n)/dx) * out.grad")


# --- the expressions of exercises 2 and 3, named by plain data ----------------------------------------------

def _expression_for(key: tuple[Any, ...]) -> _Expression:
    """The expression ``key`` names: ``("dot", k)``, or ``("pow", k, n, m)`` (the check's own tables)."""
    if key[0] == "dot" and len(key) == 2:
        return _DOT_EXPRESSIONS[int(key[1])]
    if key[0] == "pow" and len(key) == 4:
        k, n, m = key[1:]
        if all(type(e) in (int, float) for e in (n, m)):
            return _pow_expression(int(k), n, m)
    raise ValueError(f"no expression {key!r}")


#: the check's own code that runs under the guard's profile hook (the student's Values and op, built and swept)
_ALLOWED = _codes(_make_leaves, submission_expression, _expression_for, _pow_expression, _student_run, _value_tanh,
                  _plain_dot, _plain_pow, *(e.build for e in _DOT_EXPRESSIONS), *_POW_BUILDERS)
