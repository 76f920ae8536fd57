"""Lesson 1b's checks (asgteach.lessons.lesson01b): right answers pass, the shortcuts fail and say why.

The lesson's `Value` is written out here as the notebook writes it (a float with `inputs` and a `_backward`
closure), so these tests run without a kernel; each wrong answer is one a student could write.
"""

from __future__ import annotations

import math
import sys

import pytest

import asgteach as at
from asgteach.lessons import ExerciseError, check, exercise, lesson01b


class Value:
    """The lesson's Value (section 1), with backward() (section 2)."""

    def __init__(self, data, inputs=(), op=""):
        self.data, self.grad, self.inputs, self.op = float(data), 0.0, tuple(inputs), op
        self._backward = lambda: None

    def __add__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data + other.data, (self, other), "+")

        def _backward():
            self.grad += out.grad
            other.grad += out.grad
        out._backward = _backward
        return out

    def __mul__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data * other.data, (self, other), "*")

        def _backward():
            self.grad += other.data * out.grad
            other.grad += self.data * out.grad
        out._backward = _backward
        return out

    def tanh(self):
        t = math.tanh(self.data)
        out = Value(t, (self,), "tanh")

        def _backward():
            self.grad += (1 - t * t) * out.grad
        out._backward = _backward
        return out

    def __radd__(self, other):
        return self + other

    def __rmul__(self, other):
        return self * other

    def backward(self):
        order = topo_order_recursive(self)
        for v in order:
            v.grad = 0.0
        self.grad = 1.0
        for v in reversed(order):
            v._backward()


def topo_order_recursive(root):
    order, visited = [], set()

    def visit(v):
        if v not in visited:
            visited.add(v)
            for child in v.inputs:
                visit(child)
            order.append(v)

    visit(root)
    return order


# --- the solutions -------------------------------------------------------------------------------

def topo_order(root):
    order, visited, stack = [], set(), [(root, False)]
    while stack:
        v, expanded = stack.pop()
        if expanded:
            order.append(v)
        elif v not in visited:
            visited.add(v)
            stack.append((v, True))
            stack.extend((c, False) for c in v.inputs if c not in visited)
    return order


def dot(ws, xs):
    out = Value(sum(w.data * x.data for w, x in zip(ws, xs)), (*ws, *xs), "dot")

    def _backward():
        for w, x in zip(ws, xs):
            w.grad += x.data * out.grad
            x.grad += w.data * out.grad
    out._backward = _backward
    return out


def value_pow(self, n):
    out = Value(self.data ** n, (self,), "**")

    def _backward():
        self.grad += n * self.data ** (n - 1) * out.grad
    out._backward = _backward
    return out


def test_the_solutions_pass_and_leave_no_profile_hook() -> None:
    before = sys.getprofile()
    lesson01b.topo_order_check(topo_order)
    lesson01b.dot_check(dot, Value)
    lesson01b.pow_check(value_pow, Value)
    assert sys.getprofile() is before


def test_other_right_answers_pass_too() -> None:
    def kahn(root):                      # count the users, peel from the root, reverse
        found, todo = {id(root): root}, [root]
        while todo:
            for c in todo.pop().inputs:
                if id(c) not in found:
                    found[id(c)] = c
                    todo.append(c)
        users = dict.fromkeys(found, 0)
        for v in found.values():
            for c in v.inputs:
                users[id(c)] += 1
        ready, out = [root], []
        while ready:
            v = ready.pop()
            out.append(v)
            for c in v.inputs:
                users[id(c)] -= 1
                if users[id(c)] == 0:
                    ready.append(c)
        return out[::-1]

    def pow_by_ratio(self, n):           # n x^(n-1) = n out / x: exact to round-off as well
        out = Value(self.data ** n, (self,), "**")

        def _backward():
            self.grad = self.grad + n * out.data / self.data * out.grad
        out._backward = _backward
        return out

    lesson01b.topo_order_check(kahn)
    lesson01b.pow_check(pow_by_ratio, Value)


# --- exercise 1: the topological sort -------------------------------------------------------------

def no_visited_set(root):
    order = []

    def visit(v):
        for child in v.inputs:
            visit(child)
        if v not in order:               # duplicates dropped at the end: still one walk per path
            order.append(v)
    visit(root)
    return order


def lists_shared_nodes_twice(root):
    order, stack = [], [(root, False)]
    while stack:
        v, expanded = stack.pop()
        if expanded:
            order.append(v)
        else:
            stack.append((v, True))
            stack.extend((c, False) for c in v.inputs)
    return order


def root_first(root):
    return topo_order(root)[::-1]


def marks_the_nodes(root):
    order, stack = [], [(root, False)]
    while stack:
        v, expanded = stack.pop()
        if expanded:
            order.append(v)
        elif not getattr(v, "seen", False):
            v.seen = True
            stack.append((v, True))
            stack.extend((c, False) for c in v.inputs if not getattr(c, "seen", False))
    return order


@pytest.mark.parametrize(("answer", "words"), [
    (topo_order_recursive, "raised RecursionError"),
    (no_visited_set, "walks every PATH to a node"),
    (lists_shared_nodes_twice, "appears 2 times"),
    (root_first, "comes before its input 'x'"),
    (marks_the_nodes, "leave marks on the nodes"),
])
def test_a_wrong_sort_fails_and_says_why(answer, words: str) -> None:
    with pytest.raises(ExerciseError, match=words):
        lesson01b.topo_order_check(answer)


# --- exercise 2: dot --------------------------------------------------------------------------------

def dot_assigns(ws, xs):
    out = Value(sum(w.data * x.data for w, x in zip(ws, xs)), (*ws, *xs), "dot")

    def _backward():
        for w, x in zip(ws, xs):
            w.grad = x.data * out.grad
            x.grad = w.data * out.grad
    out._backward = _backward
    return out


def dot_of_small_values(ws, xs):
    return sum((w * x for w, x in zip(ws, xs)), Value(0.0))


def dot_by_asgteach(ws, xs):
    out = Value(sum(w.data * x.data for w, x in zip(ws, xs)), (*ws, *xs), "dot")

    def _backward():
        with at.Graph():
            w_t, x_t = at.input("w", (len(ws),)), at.input("x", (len(xs),))
            dw_t, dx_t = at.grad(at.sum(w_t * x_t), [w_t, x_t])
        dw, dx = at.run([dw_t, dx_t], {w_t: [w.data for w in ws], x_t: [x.data for x in xs]})
        for w, x, gw, gx in zip(ws, xs, dw, dx):
            w.grad += float(gw) * out.grad
            x.grad += float(gx) * out.grad
    out._backward = _backward
    return out


@pytest.mark.parametrize(("answer", "words"), [
    (dot_assigns, "instead of adding to them"),
    (dot_of_small_values, "dot must be ONE Value"),
    (dot_by_asgteach, "uses asgteach"),
])
def test_a_wrong_dot_fails_and_says_why(answer, words: str) -> None:
    with pytest.raises(ExerciseError, match=words):
        lesson01b.dot_check(answer, Value)


# --- exercise 3: the power rule -------------------------------------------------------------------

def pow_with(rule):
    def value_pow(self, n):
        out = Value(self.data ** n, (self,), "**")

        def _backward():
            self.grad += rule(self.data, n, out)
        out._backward = _backward
        return out
    return value_pow


def pow_assigns(self, n):
    out = Value(self.data ** n, (self,), "**")

    def _backward():
        self.grad = n * self.data ** (n - 1) * out.grad
    out._backward = _backward
    return out


def pow_by_asgteach(self, n):
    out = Value(self.data ** n, (self,), "**")

    def _backward():
        with at.Graph():
            x = at.input("x", ())
            d = at.grad(x ** n, x)
        self.grad += float(at.run(d, {x: self.data})) * out.grad
    out._backward = _backward
    return out


def central(x, n, out, h=1e-6):
    return ((x + h) ** n - (x - h) ** n) / (2 * h) * out.grad


@pytest.mark.parametrize(("answer", "words"), [
    (pow_with(lambda x, n, out: out.data * out.grad), "That is the forward value"),
    (pow_with(central), "that is what finite differences give"),
    (pow_with(lambda x, n, out: n * x ** (n - 1)), "times out.grad|by out.grad"),
    (pow_assigns, "never replace it"),
    (pow_by_asgteach, "uses asgteach"),
    (lambda self, n: self.data ** n, "should return a Value"),
])
def test_a_wrong_power_rule_fails_and_says_why(answer, words: str) -> None:
    with pytest.raises(ExerciseError, match=words):
        lesson01b.pow_check(answer, Value)


def test_an_answer_cannot_borrow_the_checks_own_value_class() -> None:
    def borrowed(self, n):
        from asgteach.lessons.lesson01b import _Scalar
        return Value(_Scalar(self.data).tanh().data)

    with pytest.raises(ExerciseError, match="uses asgteach"):
        lesson01b.pow_check(borrowed, Value)


def test_a_stub_is_not_done_yet(capsys: pytest.CaptureFixture) -> None:
    with exercise(71):
        def stub(self, n):
            raise NotImplementedError("exercise 71")
    with check(71):
        lesson01b.pow_check(stub, Value)
    assert "exercise 71: not done yet" in capsys.readouterr().out


def test_a_class_cell_run_again_is_named_as_the_likely_cause() -> None:
    dropped = ("backward", "__dict__", "__weakref__")
    fresh = type("Value", (), {k: v for k, v in vars(Value).items() if k not in dropped})   # the cell, run again

    def pow_of(cls):
        def value_pow(self, n):
            out = cls(self.data ** n, (self,), "**")

            def _backward():
                self.grad += n * self.data ** (n - 1) * out.grad
            out._backward = _backward
            return out
        return value_pow

    with pytest.raises(ExerciseError, match="returned a Value of an older `class Value`"):
        lesson01b.pow_check(pow_of(Value), fresh)        # the answer still makes the old class's Values
    with pytest.raises(ExerciseError, match=r"run section 2's cell \(Value.backward = backward\) again"):
        lesson01b.pow_check(pow_of(fresh), fresh)        # the new class lost backward()


def test_in_the_judge_the_nodes_are_built_where_the_answer_runs_and_the_hook_stands_down(monkeypatch) -> None:
    """Graded mode, simulated: the checks fetch their builders with on_submission_side (here resolved in this
    process, as the sandbox resolves them there), and the profile hook, which in the judge would see only the
    channel to the sandbox, is not set while the student's code runs (the answer's source rules decide there)."""
    import importlib

    from asgteach.grading import exercises

    asked: list[str] = []

    def resolve(dotted: str):
        asked.append(dotted)
        module, _, attr = dotted.rpartition(".")
        return getattr(importlib.import_module(module), attr)

    monkeypatch.setattr(exercises, "IN_JUDGE", True)
    monkeypatch.setattr(exercises, "SUBMISSION_SIDE", resolve)
    before, hooks = sys.getprofile(), []

    def watched_pow(self, n):
        hooks.append(sys.getprofile())
        return value_pow(self, n)

    lesson01b.topo_order_check(topo_order)
    lesson01b.dot_check(dot, Value)
    lesson01b.pow_check(watched_pow, Value)
    assert {d.rpartition(".")[2] for d in asked} == {"submission_graph", "submission_expression", "submission_kind"}
    assert hooks and all(h is before for h in hooks)

    def preorder(root):
        order, seen, stack = [], set(), [root]
        while stack:
            v = stack.pop()
            if v not in seen:
                seen.add(v)
                order.append(v)
                stack.extend(v.inputs)
        return order

    with pytest.raises(ExerciseError, match="comes before its input"):
        lesson01b.topo_order_check(preorder)
