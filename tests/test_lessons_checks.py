"""asgteach.lessons: the exercise harness, the checks' messages, the planted bugs, lesson 13's references."""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at
from asgteach import resources
from asgteach.grading.keys import load as load_keys
from asgteach.lessons import (
    ExerciseError, bugs, check, check_array, check_equal, check_function, check_node_values, check_true,
    check_tensor, check_vjp_rule, exercise, lesson03, lesson08, lesson12, lesson13,
    numerical_gradient, status, without,
)
from asgteach.ops import registry

#: the course's answer keys (instructor/answer_keys.py): lesson 13's references
answer_keys = load_keys()


# --- exercise(n) / check(n) ----------------------------------------------------------------------

def test_placeholder_is_reported_as_not_done_and_the_check_does_not_fail(capsys: pytest.CaptureFixture) -> None:
    with exercise(91):
        raise NotImplementedError("exercise 91")
    assert status(91) == "not done"
    with check(91):
        check_array(undefined_answer, 1.0)  # noqa: F821 - the name the answer would have defined
    out = capsys.readouterr().out
    assert out.count("exercise 91: not done yet") == 2
    assert "passed" not in out


def test_not_done_even_when_stale_values_would_pass(capsys: pytest.CaptureFixture) -> None:
    answer = 2.0
    with exercise(92):
        raise NotImplementedError("exercise 92")
    with check(92):
        check_array(answer, 2.0)
    assert "exercise 92 passed" not in capsys.readouterr().out


def test_right_answer_passes_and_wrong_answer_raises_with_the_number(capsys: pytest.CaptureFixture) -> None:
    with exercise(93):
        answer = np.array([1.0, 2.0])
    assert status(93) == "done"
    with check(93):
        check_array(answer, [1.0, 2.0], name="answer")
    assert "exercise 93 passed" in capsys.readouterr().out
    with pytest.raises(ExerciseError, match=r"^exercise 93: answer is wrong at 1 of 2 element\(s\)"):
        with check(93):
            check_array(answer, [1.0, 3.0], name="answer")


def test_a_real_error_in_the_answer_is_not_swallowed() -> None:
    with pytest.raises(ZeroDivisionError):
        with exercise(94):
            1 / 0
    assert status(94) == "failed"
    with pytest.raises(ExerciseError, match="stopped with an error before it defined everything"):
        with check(94):
            check_array(never_defined, 1.0)  # noqa: F821
    with pytest.raises(NotImplementedError, match="something else"):
        with exercise(95):
            raise NotImplementedError("something else")


def test_answer_that_forgets_a_name_is_told_so() -> None:
    with exercise(96):
        pass
    with pytest.raises(ExerciseError, match="did not define what the check needs: name 'result96' is not defined"):
        with check(96):
            check_array(result96, 1.0)  # noqa: F821


def test_check_of_an_exercise_never_run(capsys: pytest.CaptureFixture) -> None:
    with check(97):
        check_array(result97, 1.0)  # noqa: F821
    assert "exercise 97: not done yet (its answer cell has not been run" in capsys.readouterr().out


# --- messages: what is wrong, where, expected vs got ------------------------------------------------

def test_check_array_names_the_worst_element_and_expected_vs_got() -> None:
    expected = np.arange(6.0).reshape(2, 3)
    got = expected.copy()
    got[1, 2] = 9.0
    with pytest.raises(ExerciseError, match=r"dW is wrong at 1 of 6 element\(s\)\. The worst: dW\[1, 2\] should be "
                                            r"5, got 9\."):
        check_array(got, expected, name="dW")


@pytest.mark.parametrize("got, expected, hint", [
    (-np.arange(1.0, 4.0), np.arange(1.0, 4.0), "The sign is flipped everywhere"),
    (0.25 * np.arange(1.0, 4.0), np.arange(1.0, 4.0), "0.25 times the expected one"),
    (np.arange(6.0).reshape(2, 3).T, np.arange(6.0).reshape(2, 3), "should have shape (2, 3), got (3, 2) (same "
                                                                   "number of elements"),
    (np.ones((4, 3)), np.ones(3), "was something not summed over a broadcast axis"),
    (None, 1.0, "is None"),
    ("abc", 1.0, "should be numbers"),
])
def test_check_array_guesses_the_kind_of_mistake(got: object, expected: object, hint: str) -> None:
    with pytest.raises(ExerciseError) as e:
        check_array(got, expected)
    assert hint in str(e.value)


def test_check_array_on_a_tensor_says_to_run_it() -> None:
    with at.Graph():
        x = at.input("x", (2,))
    with pytest.raises(ExerciseError, match="is a Tensor"):
        check_array(x, np.zeros(2))


def test_check_equal_and_check_true() -> None:
    check_equal([1, 2], (1, 2))
    with pytest.raises(ExerciseError, match=r"count should be 3, got 4\. hint"):
        check_equal(4, 3, name="count", hint="hint")
    with pytest.raises(ExerciseError, match="^H is not symmetric$"):
        check_true(False, "H is not symmetric")


def test_check_function_names_the_failing_case() -> None:
    def double(x):
        return 2 * x if x < 3 else 0

    check_function(double, [((1,), 2), ((2,), 4)])
    with pytest.raises(ExerciseError, match=r"the result \(test case 2: double\(5\)\) is wrong .* should be 10, got 0"):
        check_function(double, [((1,), 2), ((5,), 10)])
    with pytest.raises(ExerciseError, match=r"test case 1: pair\(1\) should return 2 values"):
        check_function(lambda x: x, [((1,), (1, 2))], name="pair")
    with pytest.raises(ExerciseError, match=r"test case 1: boom\(1\) raised ValueError: no"):
        check_function(lambda x: (_ for _ in ()).throw(ValueError("no")), [((1,), 1)], name="boom")


def test_check_node_values_names_the_first_wrong_node() -> None:
    with at.Graph() as g:
        x = at.input("x", (3,))
        y = at.tanh(x * 2.0)
        at.sum(y)
    X = np.array([0.1, -0.2, 0.3])
    values = {0: X, 1: np.array(2.0), 2: X * 2, 3: np.tanh(X * 2), 4: np.tanh(X * 2).sum()}
    check_node_values(values, g, {"x": X})
    values[3] = np.tanh(X)
    with pytest.raises(ExerciseError, match=r"the value of node #3 \(node #3 tanh 'tanh', created at .*test_lessons_"
                                            r"checks.py:\d+\) is wrong at 3 of 3"):
        check_node_values(values, g, {"x": X})
    del values[4]
    values[3] = np.tanh(X * 2)
    with pytest.raises(ExerciseError, match="no value for node #4 sum"):
        check_node_values(values, g, {"x": X})


def test_numerical_gradient_uses_only_the_forward_graph() -> None:
    with at.Graph():
        x = at.input("x", (2, 2))
        y = at.sum(x / at.sum(x, axis=1, keepdims=True))
        y2 = at.sum(x * x)
    X = np.array([[1.0, 2.0], [3.0, 5.0]])
    np.testing.assert_allclose(numerical_gradient(y2, x, {x: X}), 2 * X, rtol=1e-8)
    right = numerical_gradient(y, x, {x: X})
    with bugs.div_forgets_broadcast_sum():
        np.testing.assert_allclose(numerical_gradient(y, x, {x: X}), right)


def test_check_vjp_rule_accepts_the_real_rule_and_rejects_a_wrong_one() -> None:
    cases = [[(4, 3), (4, 1)], [(3,), ()]]

    def written_out(c, g):            # the rule as lesson 4's exercise 3 asks for it
        a, b = c.inputs
        return (at.sum_to(g / b, a.shape) if c.needs[0] else None,
                at.sum_to(at.neg(g) * c.out / b, b.shape) if c.needs[1] else None)

    check_vjp_rule("div", written_out, cases)
    library = registry.spec("div").vjp
    with pytest.raises(ExerciseError, match="the library's own backward rule of 'div'"):
        check_vjp_rule("div", library, cases)          # handing in the library's rule is not the exercise
    with bugs.mystery(4):
        planted = registry.spec("div").vjp             # the bug hunt's rule, which forgets to sum
    with pytest.raises(ExerciseError, match=r"case 1: div of shapes \[\(4, 3\), \(4, 1\)\]"):
        check_vjp_rule("div", planted, cases)
    with pytest.raises(ExerciseError, match="building the gradient with your rule failed"):
        check_vjp_rule("div", lambda c, g: (g, g), cases)
    assert registry.spec("div").vjp is library  # restored after each case


# --- planted bugs -------------------------------------------------------------------------------------

def _layer_norm_like() -> tuple:
    with at.Graph() as g:
        x = at.input("x", (3, 4))
        centred = x - at.mean(x, axis=-1, keepdims=True)
        out = centred / at.sqrt(at.mean(centred * centred, axis=-1, keepdims=True) + 1e-5)
        loss = at.sum(out * at.constant(np.linspace(-1, 1, 12).reshape(3, 4)))
    feeds = {x: np.random.default_rng(0).standard_normal((3, 4))}
    return g, x, out, loss, feeds


def test_div_bug_is_named_by_gradcheck_and_removed_afterwards() -> None:
    g, x, out, loss, feeds = _layer_norm_like()
    with bugs.div_forgets_broadcast_sum():
        report = at.gradcheck(loss, [x], feeds)
    assert not report.ok
    assert [(c.node_id, c.op, c.input_index) for c in report.culprits] == [(out.node_id, "div", 1)]
    assert at.gradcheck(loss, [x], feeds).ok


def test_div_bug_keeps_the_first_copy_only() -> None:
    with at.Graph():
        a = at.input("a", (2, 3))
        b = at.input("b", ())
        with bugs.div_forgets_broadcast_sum():
            (db,) = at.grad(at.sum(a / b), [b])
    A = np.arange(1.0, 7.0).reshape(2, 3)
    np.testing.assert_allclose(at.run(db, {a: A, b: np.array(2.0)}), -A[0, 0] / 4)  # only a[0, 0]'s copy


def test_sub_bug_flips_the_second_input_only() -> None:
    with at.Graph():
        a, b = at.input("a", (3,)), at.input("b", (3,))
        y = at.sum((a - b) * at.constant([1.0, 2.0, 3.0]))
        with bugs.mystery(5):
            report = at.gradcheck(y, [a, b], {a: np.zeros(3), b: np.ones(3)})
            da, db = at.grad(y, [a, b])
    assert [c.ok for c in report.inputs] == [True, False]
    assert [(c.op, c.input_index) for c in report.culprits] == [("sub", 1)]
    np.testing.assert_allclose(at.run([da, db], {a: np.zeros(3), b: np.ones(3)}), [[1, 2, 3], [1, 2, 3]])


def test_fanout_bug_keeps_the_last_contribution_and_has_no_culprit_rule() -> None:
    with at.Graph():
        x = at.input("x", (3,))
        y = at.sum(x * x + x)
        with bugs.fanout_overwrites():
            report = at.gradcheck(y, [x], {x: np.ones(3)})
            (dx,) = at.grad(y, [x])
        (dx_right,) = at.grad(y, [x])
    assert not report.ok and report.culprits == []
    assert "how the rules' results are put together" in report.summary()
    np.testing.assert_allclose(at.run(dx_right, {x: np.ones(3)}), [3.0, 3.0, 3.0])
    assert not np.allclose(at.run(dx, {x: np.ones(3)}), 3.0)


def test_bugs_are_removed_even_after_an_error() -> None:
    div, sub = registry.spec("div"), registry.spec("sub")
    for lesson in (3, 4, 5):
        with pytest.raises(RuntimeError):
            with bugs.mystery(lesson):
                raise RuntimeError("student code failed")
    assert registry.spec("div") is div and registry.spec("sub") is sub
    with at.Graph():   # the fan-out bug is gone too: x used twice gets both contributions
        x = at.input("x", (3,))
        dx = at.grad(at.sum(x * x + x), x)
    np.testing.assert_allclose(at.run(dx, {x: np.ones(3)}), [3.0, 3.0, 3.0])
    with pytest.raises(KeyError, match="lessons with a bug hunt: \\[3, 4, 5\\]"):
        with bugs.mystery(7):
            pass


def test_check_diagnosis() -> None:
    bugs.check_diagnosis(4, "div", 1)
    bugs.check_diagnosis(3, None, None)
    with pytest.raises(ExerciseError, match="is not 'mul'"):
        bugs.check_diagnosis(4, "mul", 1)
    with pytest.raises(ExerciseError, match="input 0 is not the one whose gradient is off"):
        bugs.check_diagnosis(5, "sub", 0)
    with pytest.raises(ExerciseError, match="report.culprits lists the ones it found wrong"):
        bugs.check_diagnosis(3, "add", 0)
    with pytest.raises(ExerciseError, match="a single backward rule IS to blame"):
        bugs.check_diagnosis(4, None, None)
    assert "div (input 1)" in bugs.reveal(4)


# --- lesson 13's reference answers -------------------------------------------------------------------

def test_reference_memory_and_fusion_on_a_small_plan() -> None:
    with at.Graph() as g:
        x = at.input("x", (4, 5))
        w = at.input("w", (5, 5))
        a = at.tanh(x @ w) * 2.0           # matmul, tanh -> mul: tanh fuses into mul
        b = at.exp(a) + a                  # a has two readers: not fusible; exp -> add fuses
        y = at.sum(b)
    plan = at.compile([y])
    ids = {n.op: n.id for n in g.nodes}
    assert answer_keys.fusible_values(plan) == [ids["tanh"], ids["exp"]]
    assert answer_keys.fusion_chains(plan) == [[ids["tanh"], ids["mul"]], [ids["exp"], ids["add"]]]
    assert answer_keys.live_bytes(plan, itemsize=8) == [r["live_bytes"] for r in plan.liveness(8)]


def test_lessons_folder_is_the_one_with_notebooks_not_the_package() -> None:
    assert resources.lessons_dir().name == "lessons"
    assert next(resources.lessons_dir().glob("*.ipynb"), None) is not None
    assert resources.is_checkout()


# --- checks that only the work passes (issue 14): the shortcuts fail, fast --------------------------------

def test_check_tensor_runs_at_fresh_inputs_and_wants_at_grads_nodes() -> None:
    with at.Graph():
        a = at.input("a", (3,))
        (da,) = at.grad(at.sum(at.tanh(a) * a), [a])
        typed = at.tanh(a) + a * (1 - at.tanh(a) ** 2)     # the derivative written out: no backward node
        frozen = at.constant(np.ones(3)) + 0.0 * a           # a value computed once
    def truth(A):
        return np.tanh(A) + A * (1 - np.tanh(A) ** 2)
    check_tensor(da, [a], truth, backward=True)
    with pytest.raises(ExerciseError, match="holds no backward node"):
        check_tensor(typed, [a], truth, backward=True)
    with pytest.raises(ExerciseError, match="at fresh input values"):
        check_tensor(frozen, [a], truth)
    with pytest.raises(ExerciseError, match="should be a Tensor"):
        check_tensor(np.ones(3), [a], truth)


def test_without_switches_the_library_off_and_back_on() -> None:
    def lazy(z):
        return at.run(at.log_softmax(at.constant(z)), {})
    with without("log_softmax", why="write it with numpy"):
        with pytest.raises(ExerciseError, match="the library's log_softmax.*write it with numpy"):
            check_function(lazy, [((np.zeros(3),), np.log(np.full(3, 1 / 3)))])
    np.testing.assert_allclose(lazy(np.zeros(3)), np.log(np.full(3, 1 / 3)))   # restored
    with without(attrs=[(at.optim.Adam, "build")]):
        with pytest.raises(ExerciseError, match="Adam.build"):
            at.optim.Adam().build([], [], None, None)
    assert at.optim.Adam.build.__name__ == "build"


def test_without_refuses_the_library_held_where_no_name_shows() -> None:
    """A default argument, a closure or a spec's kernel taken before the block: each is the library, and is refused."""
    def by_default(z, _k=registry.spec("log_softmax").numpy):
        return _k(z, axis=-1)
    kernel = registry.spec("softmax").numpy

    def by_closure(z):
        return np.log(kernel(z, axis=-1))

    def clipped(gs, _clip=at.optim.clip_grad_norm):
        return _clip(gs, 1.0)
    case = [((np.zeros(3),), np.log(np.full(3, 1 / 3)))]
    for lazy in (by_default, by_closure):
        with pytest.raises(ExerciseError, match="the library's (log_)?softmax.*with numpy"):
            with without("log_softmax", "softmax", why="with numpy"):
                check_function(lazy, case)
    with pytest.raises(ExerciseError, match="clip_grad_norm"):
        with without(attrs=[(at.optim, "clip_grad_norm")]):
            clipped([np.ones(3)])

    def honest(z):            # numpy only; other ops of the library stay usable inside the block
        shifted = z - z.max(axis=-1, keepdims=True)
        return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    with without("log_softmax", "softmax", why="with numpy"):
        check_function(honest, case)
        assert at.run(at.exp(at.constant(np.zeros(2))), {}).tolist() == [1.0, 1.0]


def test_nested_watches_both_keep_watching() -> None:
    """A check's own watch inside without(...) does not switch the outer one off."""
    from asgteach.grading.calls import refusing_calls
    kernel = registry.spec("softmax").numpy
    with pytest.raises(ExerciseError, match="the library's softmax"):
        with without("softmax"), refusing_calls("inner", np.linalg.norm):
            kernel(np.zeros(3), axis=-1)


def test_a_naive_log_softmax_is_told_to_subtract_the_max() -> None:
    def naive(z):
        return np.log(np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True))
    with np.errstate(all="ignore"), pytest.raises(ExerciseError, match="subtract the max first"):
        check_function(naive, [((np.array([1000.0, 0.0, -1000.0]),), np.array([0.0, -1000.0, -2000.0]))])


def test_chain_rule_by_hand_rejects_finite_differences_and_says_so() -> None:
    def exact(p, q):
        t = np.tanh(p)
        return (p + q) * (1 - t * t) + t, t

    def central(p, q, h=1e-6):
        g = lambda p, q: (p + q) * np.tanh(p)  # noqa: E731
        return (g(p + h, q) - g(p - h, q)) / (2 * h), (g(p, q + h) - g(p, q - h)) / (2 * h)

    lesson03.chain_rule_by_hand(exact)
    with pytest.raises(ExerciseError, match="finite differences give"):
        lesson03.chain_rule_by_hand(central)
    with pytest.raises(ExerciseError, match="fresh point"):
        lesson03.chain_rule_by_hand(lambda p, q: (-1.264420, 0.291313))   # lesson 3's printed values


def test_lesson_13_answers_are_checked_on_other_plans_and_are_not_importable() -> None:
    import importlib

    with pytest.raises(ImportError):
        importlib.import_module("asgteach.lessons.reference")
    with at.Graph():
        x = at.input("x", (4, 5))
        plan = at.compile([at.sum(at.tanh(x) * 2.0)])
    copied = answer_keys.fusible_values(plan)          # right for the lesson's plan, copied as numbers
    with pytest.raises(ExerciseError, match="my_fusible"):
        lesson13.fusible_check(lambda p: copied)
    lessons_copy = answer_keys.live_bytes(plan, 4)     # the lesson's plan, copied as numbers
    with pytest.raises(ExerciseError, match="bytes_alive"):
        lesson13.alive_check(lambda p, k: lessons_copy)


def test_lesson_13_checks_refuse_their_own_references_however_the_answer_holds_them() -> None:
    """A check loads the answer keys while it runs: an answer that reaches them then (through an attribute path
    built from strings, a default argument, a plain call) hands in the reference. What runs is watched, not names."""
    import operator

    find = operator.attrgetter("grading.k" + "eys.load")      # at.grading.keys.load, named by strings
    for check_fn, answer in [
        (lesson13.kept_check, lambda p: find(at)().kept_for_backward(p)),
        (lesson13.fusible_check, lambda p, _ref=answer_keys.fusible_values: _ref(p)),
        (lesson13.alive_check, lambda p, k: answer_keys.live_bytes(p, k)),
    ]:
        with pytest.raises(ExerciseError, match="the check's own reference"):
            check_fn(answer)


def _fusible(plan: object, by_steps: bool) -> list[int]:
    """Lesson 13's exercise 3 as a student writes it; a value one step reads twice counts once ``by_steps``."""
    readers: dict[int, list] = {}
    for step in plan.steps:
        for i in (set(step.node.inputs) if by_steps else step.node.inputs):
            readers.setdefault(i, []).append(step.node)
    elementwise = ("arithmetic", "activation", "comparison")
    return [s.node.id for s in plan.steps
            if registry.spec(s.node.op).category in elementwise and s.node.id not in plan.outputs
            and s.node.id not in plan.folded and len(readers.get(s.node.id, [])) == 1
            and registry.spec(readers[s.node.id][0].op).category in elementwise
            and readers[s.node.id][0].shape == s.node.shape]


def test_lesson_13_fusible_counts_a_value_that_one_step_reads_twice_either_way() -> None:
    """"Read by exactly one step": d * d reads d twice, in one step. Counting reads (the reference), d is written;
    counting steps (the GPU's chains pass), d fuses into d * d. Both pass; the check's plans hold such a value."""
    differed = []

    def by_steps(plan: object) -> list[int]:
        mine = _fusible(plan, by_steps=True)
        differed.append(mine != _fusible(plan, by_steps=False))
        return mine

    lesson13.fusible_check(by_steps)
    lesson13.fusible_check(lambda p: _fusible(p, by_steps=False))
    assert any(differed)
    with pytest.raises(ExerciseError, match="may count as read once or twice"):   # wrong where it matters
        lesson13.fusible_check(lambda p: [] if _fusible(p, True) != _fusible(p, False) else _fusible(p, True))


def test_trained_accuracy_is_measured_from_the_weights_not_typed() -> None:
    class Trained:
        params = {"mlp.0.weight": np.eye(2), "mlp.0.bias": np.zeros(2), "mlp.1.weight": np.eye(2),
                  "mlp.1.bias": np.zeros(2)}
    x = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 1.0], [0.0, 3.0]])
    assert lesson08.trained_accuracy(Trained(), x, np.array([0, 1, 0, 0])) == 0.75
    with pytest.raises(ExerciseError, match="digits_model"):
        lesson08.trained_accuracy(object(), x, np.zeros(4))


def test_max_pool_grad_is_checked_on_images_of_the_checks_own() -> None:
    """Lesson 12's exercise 3: the routing by hand, on ties, negative images and other sizes; autograd is refused."""
    def by_loops(x, g):
        dx = np.zeros(x.shape)
        for i in range(g.shape[0]):
            for j in range(g.shape[1]):
                window = x[2 * i: 2 * i + 2, 2 * j: 2 * j + 2]
                a, b = np.unravel_index(np.argmax(window), window.shape)
                dx[2 * i + a, 2 * j + b] = g[i, j]
        return dx

    def by_columns(x, g):                  # the first maximum reading each window column by column
        return by_loops(x.T, g.T).T

    def from_zero(x, g):                   # a maximum that starts at 0 never moves on a negative window
        dx = np.zeros(x.shape)
        for i in range(g.shape[0]):
            for j in range(g.shape[1]):
                best, at_ = 0.0, (2 * i, 2 * j)
                for a in range(2):
                    for b in range(2):
                        if x[2 * i + a, 2 * j + b] > best:
                            best, at_ = x[2 * i + a, 2 * j + b], (2 * i + a, 2 * j + b)
                dx[at_] = g[i, j]
        return dx

    def split_ties(x, g):                  # every maximum of a window gets an equal share
        h, w = x.shape
        win = x.reshape(h // 2, 2, w // 2, 2)
        top = win == win.max(axis=(1, 3), keepdims=True)
        return (top * g[:, None, :, None] / top.sum(axis=(1, 3), keepdims=True)).reshape(h, w)

    def typed(x, g):                       # the lesson's dX5, worked out on paper
        return np.array([[1.0, 0, 0, 0], [0, 0, 2.0, 0], [3.0, 0, 4.0, 0], [0, 0, 0, 0]])

    def autograd(x, g):
        with at.Graph():
            xi, gi = at.input("x", (1, 1) + x.shape), at.input("g", (1, 1) + g.shape)
            (d,) = at.grad(at.sum(at.max_pool2d(xi, 2) * gi), [xi])
        return at.run(d, {xi: x[None, None], gi: g[None, None]})[0, 0]

    x5 = np.array([[5.0, 5.0, 1.0, 2.0], [0.0, 5.0, 3.0, 0.0], [7.0, 1.0, 2.0, 2.0], [1.0, 7.0, 2.0, 2.0]])
    g5 = np.array([[1.0, 2.0], [3.0, 4.0]])
    for right_here in (by_loops, by_columns, from_zero, typed):   # each is right on the lesson's image...
        lesson12.max_pool_routing(right_here(x5, g5), x5, g5)
    with pytest.raises(ExerciseError, match="dX5 is wrong"):
        lesson12.max_pool_routing(split_ties(x5, g5), x5, g5)
    lesson12.max_pool_grad_check(by_loops)
    for wrong in (by_columns, from_zero, split_ties):             # ...only the first-maximum rule on the check's
        with pytest.raises(ExerciseError, match=r"max_pool_grad\(<array .*is wrong"):
            lesson12.max_pool_grad_check(wrong)
    with pytest.raises(ExerciseError, match=r"max_pool_grad\(<array .*(should have shape|is wrong)"):
        lesson12.max_pool_grad_check(typed)
    with pytest.raises(ExerciseError, match="uses at, which this exercise does not allow: by hand"):
        lesson12.max_pool_grad_check(autograd)
    with pytest.raises(ExerciseError, match="should be a function"):
        lesson12.max_pool_grad_check(typed(x5, g5))
