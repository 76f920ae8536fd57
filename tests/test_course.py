"""`asgteach course DIR`: the lessons as an nbgrader course, graded by nbgrader's own CLI.

Fast tests read the metadata `asgteach course` writes. The slow test (module fixture `graded`)
installs nothing: nbgrader comes from the `course` extra, which scripts/setup installs (so
./scripts/test and CI run it). It runs, in a course directory written by `asgteach course`:

* `nbgrader generate_assignment` for every lesson;
* `nbgrader autograde` of the submissions of every lesson, all students of a course in one call:
  "lazy" (the source with the shortcuts a student could take in place of the work, see LAZY, here or in
  tests/lazy/<lesson>.py: each of those exercises must score 0, so the lesson gets partial or zero
  credit) with the course's default config (nbgrader's kernel run, then the judge); in a copy of the
  course written as `asgteach course --judge-only` writes it: "untouched" (the release as handed out:
  must score 0), "solved" (the instructor's source: must score the maximum, > 0), "lazy2", "lazy3"...
  (MORE: attempts on the judge itself, which must score 0 with the judge's reason) and "honest1",
  "honest2" (HONEST: right answers in other styles, which must score the maximum);
* `nbgrader export` (the CSV must hold those numbers) and `nbgrader generate_feedback` for
  the lazy student (the HTML must show each failing check's message).
"""

from __future__ import annotations

import csv
import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from asgteach import cli
from asgteach.lessons import ExerciseError, check, exercise
from asgteach.grading.nbcourse import CONFIG, POINTS, course_notebook, write_course
from asgteach.grading.student import SolutionMarkerError, marking

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "lessons").glob("*.ipynb"))
STEMS = [p.stem for p in LESSONS]
#: the lessons nbgrader grades in the slow tests: all of them, or those named in ASGTEACH_COURSE_LESSONS
#: (comma-separated stems; for working on one lesson, e.g. ASGTEACH_COURSE_LESSONS=10-higher-order-and-forward-mode)
GRADED = [s for s in STEMS if s in os.environ.get("ASGTEACH_COURSE_LESSONS", s).split(",")]


def _nb(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _src(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


# --- what `asgteach course` writes (fast) -------------------------------------------------------------

@pytest.mark.parametrize("lesson", LESSONS, ids=STEMS)
def test_every_code_cell_gets_nbgrader_metadata_from_the_one_marking(lesson: Path) -> None:
    nb = _nb(lesson)
    mark = marking(nb, lesson.name)
    course, points = course_notebook(nb, lesson.name)
    assert points == POINTS * mark.count > 0
    grade_ids = []
    for index, cell in enumerate(course["cells"]):
        meta = cell["metadata"].get("nbgrader")
        if cell["cell_type"] != "code":
            assert meta is None, f"cell {index}: markdown stays editable"
            continue
        assert meta["schema_version"] == 3 and re.fullmatch(r"[A-Za-z0-9_-]+", meta["grade_id"])
        grade_ids.append(meta["grade_id"])
        if index in mark.answers.values():
            n = next(k for k, i in mark.answers.items() if i == index)
            assert meta == {"grade": False, "grade_id": f"exercise-{n}", "locked": False, "schema_version": 3,
                            "solution": True}
            assert "### BEGIN SOLUTION" in _src(cell)
        elif index in mark.checks.values():
            n = next(k for k, i in mark.checks.items() if i == index)
            assert meta == {"grade": True, "grade_id": f"exercise-{n}-check", "locked": True, "points": POINTS,
                            "schema_version": 3, "solution": False}
            assert _src(cell).startswith(f"with check({n}, graded=True):")
        else:
            assert meta == {"grade": False, "grade_id": f"cell-{cell['id']}", "locked": True, "schema_version": 3,
                            "solution": False}
            assert "### BEGIN SOLUTION" not in _src(cell)
    assert len(grade_ids) == len(set(grade_ids))
    # stable: the same lesson gives the same notebook (ids, grade ids, everything) on every run
    assert course_notebook(nb, lesson.name)[0] == course
    assert [c["id"] for c in course["cells"]] == [c["id"] for c in nb["cells"]]


def test_write_course_lays_out_an_nbgrader_course_and_keeps_the_instructors_config(tmp_path: Path) -> None:
    assert cli.main(["course", str(tmp_path / "course")]) == 0
    config = tmp_path / "course" / "nbgrader_config.py"
    assert "c.CourseDirectory.course_id" in config.read_text()
    for stem in STEMS:
        assert (tmp_path / "course" / "source" / stem / f"{stem}.ipynb").is_file()
    config.write_text("c = get_config()  # mine\n")
    written = write_course(tmp_path / "course", ROOT / "lessons")
    assert config.read_text() == "c = get_config()  # mine\n"
    assert [p.parent.name for p, _ in written] == STEMS


@pytest.mark.parametrize(("cells", "message"), [
    (["with exercise(1):\n    ### BEGIN SOLUTION\n    x = 1\n    ### END SOLUTION"], "exercise 1 has no check cell"),
    (["with check(1):\n    pass"], "checks an exercise that has no solution block"),
    (["with check(1):\n    pass", "with exercise(1):\n    ### BEGIN SOLUTION\n    x = 1\n    ### END SOLUTION"],
     "comes before its answer"),
])
def test_a_marking_the_course_cannot_grade_is_an_error_naming_the_cell(cells: list[str], message: str) -> None:
    nb = {"cells": [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "source": s, "outputs": []}
                    for i, s in enumerate(cells)], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    with pytest.raises(SolutionMarkerError, match=message):
        course_notebook(nb, "x.ipynb")


def test_graded_check_fails_when_not_done_and_a_stub_function_counts_as_not_done(
        capsys: pytest.CaptureFixture) -> None:
    with exercise(81):
        raise NotImplementedError()            # nbgrader's stub: no message
    with pytest.raises(ExerciseError, match="exercise 81: not done yet"):
        with check(81, graded=True):
            pass
    with exercise(82):
        def f(x):
            """A docstring the student keeps."""
            raise NotImplementedError("exercise 82")
    with check(82):                            # ungraded: the student's own run goes on
        f(1)
    assert "exercise 82: not done yet" in capsys.readouterr().out
    with pytest.raises(ExerciseError, match="exercise 82: not done yet"):
        with check(82, graded=True):
            f(1)


# --- nbgrader's own CLI on every lesson (slow) --------------------------------------------------------

#: lesson -> {exercise: (the answer cell as a lazy student writes it, words its check's message must show)}
LAZY: dict[str, dict[int, tuple[str, str]]] = {
    "00-welcome": {
        1: ('A = np.array([-1.0, 0.5, 2.0])\nwith exercise(1):\n    with at.Graph() as g1:\n'
            '        a = at.input("a", (3,))\n        da = at.tanh(a) + a * (1 - at.tanh(a) ** 2)\n'
            '    df_value = np.tanh(A) + A * (1 - np.tanh(A) ** 2)\n', "holds no backward node"),
        2: ("with exercise(2):\n    dc_value = dz.sum(axis=0)\n", "did not define what the check needs"),
    },
    "01-derivatives-numerically": {
        2: ("with exercise(2):\n    def numerical_gradient(f, x, h=1e-6):\n"
            "        return 3 * x ** 2 + np.array([x[1], x[0], 0.0])\n", "numerical_gradient(another f, x)"),
    },
    "02-the-asg": {
        2: ("with exercise(2):\n    def evaluate(graph, feeds):\n        ids = [n.id for n in graph.nodes]\n"
            "        return dict(zip(ids, at.run([at.Tensor(graph, i) for i in ids], feeds)))\n",
            "evaluate must call each node"),
        3: ('A5, V5 = np.arange(15.0).reshape(5, 3), np.array([1.0, 2.0, 3.0, 4.0, 5.0])\nwith exercise(3):\n'
            '    with at.Graph(name="fixed") as g_fix:\n        a5 = at.input("a", (5, 3))\n'
            '        v5 = at.input("v", (5,))\n        rows_scaled = at.constant(A5 * V5[:, None])\n'
            '    rows_value = A5 * V5[:, None]\n', "at fresh input values"),
    },
    "04-broadcasting": {
        2: ("with exercise(2):\n    (culprit,) = report.culprits      # section 4's printed culprit\n"
            "    culprit_id, culprit_input = culprit.node_id, culprit.input_index\n",
            "is not the node whose rule is wrong"),
    },
    "05-matrix-calculus": {
        3: ("with exercise(3):\n    wrong_gradients = [c.name for c in report.inputs if not c.ok]\n"
            "    culprit_ids = [c.node_id for c in report.culprits]\n", "wrong_gradients is not right"),
    },
    "06-nonlinearities-and-softmax": {
        1: ("with exercise(1):\n    def my_log_softmax(z):\n"
            "        return np.log(np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True))\n", "subtract the max first"),
        2: ("Z2 = np.random.default_rng(6).standard_normal((8, 5)) * 3\nlabels2 = np.array([4, 0, 0, 2, 1, 3, 4, 2])\n"
            "with exercise(2):\n    def cross_entropy_grad(Z, labels):\n        with at.Graph():\n"
            '            l2 = at.input("logits", Z.shape)\n'
            '            y2 = at.input("labels", labels.shape, dtype="int")\n'
            "            (d2,) = at.grad(at.nn.cross_entropy(l2, y2), [l2])\n"
            "        return at.run(d2, {l2: Z, y2: labels})\n\n    dZ2 = cross_entropy_grad(Z2, labels2)\n",
            "uses at, which a graded answer may not"),
    },
    "07-normalisation": {
        1: ("with exercise(1):\n    def my_layer_norm(x, w, b, eps=1e-5):\n"
            "        return at.run(at.layer_norm(at.constant(x), at.constant(w), at.constant(b), eps=eps), {})\n",
            "uses at, which a graded answer may not"),
    },
    "08-training-an-mlp": {
        2: ("with exercise(2):\n    def warmup_cosine(base_lr, step):\n"
            "        return at.optim.LinearWarmup(10, at.optim.CosineAnnealingLR(90))(base_lr, step)\n",
            "LinearWarmup.__call__"),
        3: ('with exercise(3):\n    model3 = digits_model()\n'
            '    my_trainer = at.Trainer(model3["loss"], optimizer=at.optim.SGD(lr=0.1), seed=0)\n'
            '    my_trainer.fit({model3["x"]: X_train[:64], model3["labels"]: y_train[:64]}, steps=1, progress=False)\n'
            '    my_accuracy = 0.99\n', "test accuracy is"),
    },
}


#: lesson -> honest students, each a submission of its own that must score full marks: [{exercise: answer cell}, ...]
#: (tests/lazy/<lesson>.py's ``HONEST``: right answers in other styles than the reference's)
HONEST: dict[str, list[dict[int, str]]] = {}

#: lesson -> more lazy students, each a submission of its own: [{exercise: (answer cell, words)}, ...]
#: (tests/lazy/<lesson>.py's ``MORE``: the attempts on the judge itself - switching a check off, reusing a
#: reference, a closure or a default argument over one, a library stand-in, a forbidden import)
MORE: dict[str, list[dict[int, tuple[str, str]]]] = {}


def _lazy_files() -> dict[str, dict[int, tuple[str, str]]]:
    """tests/lazy/<lesson stem>.py: a lesson's lazy answers in a file of its own (``LAZY = {n: (code, words)}``)."""
    found = {}
    for path in sorted((ROOT / "tests" / "lazy").glob("*.py")):
        namespace: dict = {}
        exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), namespace)
        found[path.stem] = namespace["LAZY"]
        MORE[path.stem] = namespace.get("MORE", [])
        HONEST[path.stem] = namespace.get("HONEST", [])
    return found


_extra = _lazy_files()

#: honest students for the lessons whose lazy students live above (tests/lazy's HONEST holds the others')
HONEST.update({
    "01-derivatives-numerically": [{
        1: "with exercise(1):\n    def central_difference(f, x, h):\n"
           "        return (f(x + h) - f(x - h)) * (0.5 / h)\n",
        2: ("with exercise(2):\n    def numerical_gradient(f, x, h=1e-6):\n        grad = []\n"
            "        for e in np.eye(len(x)):\n            grad.append((f(x + h * e) - f(x - h * e)) / (2 * h))\n"
            "        return np.array(grad)\n"),
        3: ("with exercise(3):\n    errors = [abs(float(central32(np.sin, 1.0, h)) - np.cos(1.0)) for h in hs32]\n"
            "    k = min(range(len(errors)), key=errors.__getitem__)\n    best_h32 = hs32[k]\n"
            "    best_digits32 = int(-np.log10(errors[k]) // 1)\n"),
    }, {
        1: ("with exercise(1):\n    def central_difference(f, x, h):\n        forward, backward = f(x + h), f(x - h)\n"
            "        return (forward - backward) / h / 2\n"),
        2: ("with exercise(2):\n    def numerical_gradient(f, x, h=1e-6):\n        x = np.array(x, dtype=float)\n"
            "        g = np.empty_like(x)\n        for i in range(x.size):\n            old = x[i]\n"
            "            x[i] = old + h\n            up = f(x)\n            x[i] = old - h\n            down = f(x)\n"
            "            x[i] = old\n            g[i] = (up - down) / (2 * h)\n        return g\n"),
        3: ("with exercise(3):\n    err = np.abs(np.array([central32(np.sin, 1.0, h) for h in hs32], dtype=float)"
            " - np.cos(1.0))\n    best_h32 = hs32[int(np.argmin(err))]\n"
            "    best_digits32 = int(np.floor(-np.log10(np.min(err))))\n"),
    }],
    "04-broadcasting": [{
        1: ("with exercise(1):\n    def my_sum_to(g, shape):\n        g = np.asarray(g)\n"
            "        while g.ndim > len(shape):\n            g = g.sum(axis=0)\n        for k, n in enumerate(shape):\n"
            "            if n == 1 and g.shape[k] != 1:\n                g = g.sum(axis=k, keepdims=True)\n"
            "        return g\n"),
        2: ("with exercise(2):\n    with bugs.mystery(4):\n        rep = at.gradcheck(loss_s, [zs, ws], feeds_s)\n"
            "    culprit_id = rep.culprits[0].node_id\n    culprit_input = rep.culprits[0].input_index\n"),
        3: ("with exercise(3):\n    def fixed_div_vjp(c, g):\n        a, b = c.inputs\n        out = []\n"
            "        out.append(at.sum_to(g * (1.0 / b), a.shape) if c.needs[0] else None)\n"
            "        out.append(at.sum_to(at.neg(g * a / (b * b)), b.shape) if c.needs[1] else None)\n"
            "        return tuple(out)\n"),
    }, {
        1: ("with exercise(1):\n    def my_sum_to(g, shape):\n        g = np.asarray(g)\n"
            "        lead = tuple(range(g.ndim - len(shape)))\n        g = g.sum(axis=lead) if lead else g\n"
            "        axes = tuple(k for k in range(len(shape)) if shape[k] == 1 < g.shape[k])\n"
            "        return g.sum(axis=axes, keepdims=True).reshape(shape) if axes else g.reshape(shape)\n"),
        2: ("with exercise(2):\n    with bugs.mystery(4):\n        rep = at.gradcheck(loss_s, [zs, ws], feeds_s)\n"
            "    culprit_id, culprit_input = [(c.node_id, c.input_index) for c in rep.culprits][0]\n"),
        3: ("with exercise(3):\n    def fixed_div_vjp(c, g):\n        a, b = c.inputs\n        ga = gb = None\n"
            "        if c.needs[0]:\n            ga = at.sum_to(g / b, a.shape)\n        if c.needs[1]:\n"
            "            gb = at.sum_to(-(g * c.out) / b, b.shape)\n        return ga, gb\n"),
    }],
    "05-matrix-calculus": [{
        1: "with exercise(1):\n    def matmul_vjp(G, X, W):\n        return np.dot(G, W.T), np.dot(X.T, G)\n",
        2: ("with exercise(2):\n    def batched_matmul_vjp(G, X, W):\n"
            "        return np.einsum('bnm,km->bnk', G, W), np.einsum('bnk,bnm->km', X, G)\n"),
        3: ("with exercise(3):\n    with bugs.mystery(5):\n"
            "        rep = at.gradcheck(loss_d, [xd, wd, bd, td, sd], feeds_d)\n"
            "    wrong_gradients = sorted(c.name for c in rep.inputs if not c.ok)\n"
            "    culprit_ids = sorted(c.node_id for c in rep.culprits)\n"),
    }, {
        1: "with exercise(1):\n    def matmul_vjp(G, X, W):\n        dX = G @ W.transpose()\n"
           "        return dX, X.transpose() @ G\n",
        2: ("with exercise(2):\n    def batched_matmul_vjp(G, X, W):\n        B, n, k = X.shape\n"
            "        dW = X.reshape(B * n, k).T @ G.reshape(B * n, -1)\n        return G @ W.T, dW\n"),
        3: ("with exercise(3):\n    inputs_d = [xd, wd, bd, td, sd]\n    with bugs.mystery(5):\n"
            "        rep = at.gradcheck(loss_d, inputs_d, feeds_d)\n    wrong_gradients = []\n"
            "    for c in rep.inputs:\n        if not c.ok:\n            wrong_gradients.append(c.name)\n"
            "    culprit_ids = list({c.node_id for c in rep.culprits})\n"),
    }],
    "06-nonlinearities-and-softmax": [{
        1: ("with exercise(1):\n    def my_log_softmax(z):\n        z = np.asarray(z, dtype=float)\n"
            "        m = np.max(z, axis=-1, keepdims=True)\n"
            "        return z - (m + np.log(np.sum(np.exp(z - m), axis=-1, keepdims=True)))\n"),
        2: ("Z2 = np.random.default_rng(6).standard_normal((8, 5)) * 3\nlabels2 = np.array([4, 0, 0, 2, 1, 3, 4, 2])\n"
            "with exercise(2):\n    def cross_entropy_grad(Z, labels):\n"
            "        P = np.exp(Z - Z.max(axis=1, keepdims=True))\n"
            "        P = P / P.sum(axis=1, keepdims=True)\n        P[np.arange(len(labels)), labels] -= 1.0\n"
            "        return P / len(labels)\n\n    dZ2 = cross_entropy_grad(Z2, labels2)\n"),
        3: ("b_random = np.random.default_rng(3).normal(-1.0, 1.5, size=8)\nwith exercise(3):\n"
            "    g = at.run(dw_dead, {xd: X_batch, wd: W_hidden, bd: b_random})\n"
            "    dead_units = [k for k in range(g.shape[1]) if not np.any(g[:, k])]\n"),
    }, {
        1: ("with exercise(1):\n    def my_log_softmax(z):\n        z = np.asarray(z, dtype=float)\n"
            "        shifted = z - z.max(axis=-1)[..., None]\n"
            "        return shifted - np.log(np.exp(shifted).sum(axis=-1))[..., None]\n"),
        2: ("Z2 = np.random.default_rng(6).standard_normal((8, 5)) * 3\nlabels2 = np.array([4, 0, 0, 2, 1, 3, 4, 2])\n"
            "with exercise(2):\n    def cross_entropy_grad(Z, labels):\n        N, C = Z.shape\n"
            "        logp = Z - Z.max(1, keepdims=True)\n"
            "        logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))\n"
            "        onehot = np.zeros((N, C))\n        onehot[np.arange(N), labels] = 1\n"
            "        return (np.exp(logp) - onehot) / N\n\n    dZ2 = cross_entropy_grad(Z2, labels2)\n"),
        3: ("b_random = np.random.default_rng(3).normal(-1.0, 1.5, size=8)\nwith exercise(3):\n"
            "    pre = X_batch @ W_hidden + b_random\n"
            "    dead_units = [int(k) for k in np.flatnonzero((pre <= 0).all(axis=0))]\n"),
    }],
    "07-normalisation": [{
        1: ("with exercise(1):\n    def my_layer_norm(x, w, b, eps=1e-5):\n"
            "        mu = np.mean(x, axis=1, keepdims=True)\n"
            "        var = np.var(x, axis=1, keepdims=True)\n        return w * (x - mu) / np.sqrt(var + eps) + b\n"),
        2: ("with exercise(2):\n    def my_layer_norm_dx(x, w, g, eps=1e-5):\n        n = x.shape[-1]\n"
            "        mu = x.mean(-1, keepdims=True)\n        inv = (x.var(-1, keepdims=True) + eps) ** -0.5\n"
            "        xhat = (x - mu) * inv\n        dxhat = g * w\n"
            "        return inv / n * (n * dxhat - dxhat.sum(-1, keepdims=True) - xhat * (dxhat * xhat).sum(-1,"
            " keepdims=True))\n"),
        3: ("with exercise(3):\n    def my_batch_norm(x, eps=1e-5):\n        mean = at.mean(x, axis=0, keepdims=True)\n"
            "        var = at.mean((x - mean) ** 2, axis=0, keepdims=True)\n"
            "        return (x - mean) / at.sqrt(var + eps)\n"),
    }],
})

HONEST["07-normalisation"].append({
    1: ("with exercise(1):\n    def my_layer_norm(x, w, b, eps=1e-5):\n        out = np.empty_like(x, dtype=float)\n"
        "        for r in range(x.shape[0]):\n            row = x[r] - x[r].mean()\n"
        "            out[r] = row / np.sqrt((row ** 2).mean() + eps) * w + b\n        return out\n"),
    2: ("with exercise(2):\n    def my_layer_norm_dx(x, w, g, eps=1e-5):\n        xc = x - x.mean(-1, keepdims=True)\n"
        "        s = np.sqrt((xc ** 2).mean(-1, keepdims=True) + eps)\n        y = xc / s\n        gy = g * w\n"
        "        return (gy - gy.mean(-1, keepdims=True) - y * (gy * y).mean(-1, keepdims=True)) / s\n"),
    3: ("with exercise(3):\n    def my_batch_norm(x, eps=1e-5):\n        n = x.shape[0]\n"
        "        centred = x - at.sum(x, axis=0, keepdims=True) * (1.0 / n)\n"
        "        return centred * (at.mean(centred * centred, axis=0, keepdims=True) + eps) ** -0.5\n"),
})
HONEST["00-welcome"] = [{
    1: ("A = np.array([-1.0, 0.5, 2.0])\nwith exercise(1):\n    with at.Graph() as g1:\n"
        "        a = at.input('a', (3,))\n"
        "        (da,) = at.grad(at.sum(a * at.tanh(a)), [a])\n    df_value = at.run(da, {a: A})\n"),
    2: ("with exercise(2):\n    with at.Graph() as g2:\n"
        "        x2, w2 = at.input('x', (4, 3)), at.parameter('w', (3, 2))\n"
        "        c2 = at.parameter('c', (2,))\n        z = at.relu(x2 @ w2 + c2)\n"
        "        dc2 = at.grad(at.sum(z * z), c2)\n"
        "    dc_value = at.run(dc2, {x2: X, w2: W, c2: np.array([1.0, 1.0])})\n"),
}, {
    1: ("A = np.array([-1.0, 0.5, 2.0])\nwith exercise(1):\n    with at.Graph(name='mine') as g1:\n"
        "        a = at.input('a', (3,))\n        f = (at.tanh(a) * a).sum() if hasattr(at.Tensor, 'sum') else "
        "at.sum(at.tanh(a) * a)\n        da = at.grad(f, a)\n    df_value = np.asarray(at.run(da, {a: A}))\n"),
    2: ("with exercise(2):\n    with at.Graph() as g2:\n        x2 = at.input('x', (4, 3))\n"
        "        w2 = at.parameter('w', (3, 2))\n        c2 = at.parameter('c', (2,))\n"
        "        y2 = at.sum(at.relu(at.matmul(x2, w2) + c2) ** 2)\n        (dc2,) = at.grad(y2, [c2])\n"
        "    dc_value = at.run(dc2, {x2: X, w2: W, c2: np.ones(2)})\n"),
}]
HONEST["02-the-asg"] = [{
    1: ("U, K = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 0.25])\nwith exercise(1):\n"
        "    with at.Graph(name='exercise 1') as g_ex:\n        u = at.input('u', (3,))\n"
        "        k = at.parameter('k', (3,))\n        s = at.sum(at.sigmoid(k * u + at.constant(0.5)))\n"
        "    s_value = at.run(s, {u: U, k: K})\n"),
    2: ("with exercise(2):\n    def evaluate(graph, feeds):\n        out = {}\n        for n in graph.nodes:\n"
        "            if n.op == 'constant':\n                out[n.id] = graph.constants[n.id]\n"
        "            elif n.op in ('input', 'parameter'):\n"
        "                out[n.id] = np.array(feeds[n.name], dtype=float)\n"
        "            else:\n                args = [out[i] for i in n.inputs]\n"
        "                out[n.id] = at.ops.spec(n.op).numpy(*args, **n.attrs)\n        return out\n"),
    3: ("A5, V5 = np.arange(15.0).reshape(5, 3), np.array([1.0, 2.0, 3.0, 4.0, 5.0])\nwith exercise(3):\n"
        "    with at.Graph(name='fixed') as g_fix:\n        a5 = at.input('a', (5, 3))\n"
        "        v5 = at.input('v', (5,))\n"
        "        rows_scaled = v5.reshape(5, 1) * a5\n    rows_value = at.run(rows_scaled, {a5: A5, v5: V5})\n"),
}, {
    1: ("U, K = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 0.25])\nwith exercise(1):\n"
        "    with at.Graph(name='exercise 1') as g_ex:\n        u = at.input('u', (3,))\n"
        "        k = at.parameter('k', (3,))\n        pre = u * k + 0.5\n        s = at.sum(at.sigmoid(pre))\n"
        "    s_value = float(at.run(s, {u: U, k: K}))\n"),
    2: ("with exercise(2):\n    def evaluate(graph, feeds):\n        values = {}\n        for node in graph.nodes:\n"
        "            kind = node.op\n            if kind in ('input', 'parameter'):\n"
        "                values[node.id] = np.asarray(feeds[node.name], dtype=np.float64)\n                continue\n"
        "            if kind == 'constant':\n                values[node.id] = np.asarray(graph.constants[node.id])\n"
        "                continue\n            kernel = at.ops.spec(kind).numpy\n"
        "            values[node.id] = kernel(*(values[i] for i in node.inputs), **node.attrs)\n"
        "        return values\n"),
    3: ("A5, V5 = np.arange(15.0).reshape(5, 3), np.array([1.0, 2.0, 3.0, 4.0, 5.0])\nwith exercise(3):\n"
        "    with at.Graph(name='fixed') as g_fix:\n        a5 = at.input('a', (5, 3))\n"
        "        v5 = at.input('v', (5,))\n"
        "        rows_scaled = a5 * at.reshape(v5, (5, 1))\n    rows_value = at.run(rows_scaled, {a5: A5, v5: V5})\n"),
}]

HONEST["08-training-an-mlp"] = [{
    1: ("with exercise(1):\n    def my_adam_step(w, g, m, v, t, lr):\n        m = 0.9 * m + 0.1 * g\n"
        "        v = 0.999 * v + 0.001 * g ** 2\n        m_hat, v_hat = m / (1 - 0.9 ** t), v / (1 - 0.999 ** t)\n"
        "        return w - lr * m_hat / (np.sqrt(v_hat) + 1e-8), m, v\n"),
    2: ("import math\nwith exercise(2):\n    def warmup_cosine(base_lr, step):\n        if step < 10:\n"
        "            return base_lr * (step + 1) / 10\n        if step >= 100:\n            return 0.0\n"
        "        return 0.5 * base_lr * (1 + math.cos(math.pi * (step - 10) / 90))\n"),
    3: ("with exercise(3):\n    model3 = digits_model()\n"
        "    my_trainer = at.Trainer(model3['loss'], optimizer=at.optim.SGD(lr=0.2, momentum=0.9), seed=1)\n"
        "    data3 = at.DataLoader(at.Dataset({model3['x']: X_train, model3['labels']: y_train}), batch_size=64,\n"
        "                          shuffle=True, seed=1)\n    my_trainer.fit(data3, epochs=10, progress=False)\n"
        "    my_accuracy = float(test_accuracy(my_trainer, model3))\n"),
}, {
    1: ("with exercise(1):\n    def my_adam_step(w, g, m, v, t, lr):\n        beta1, beta2 = 0.9, 0.999\n"
        "        m_new = beta1 * m + (1 - beta1) * g\n        v_new = beta2 * v + (1 - beta2) * np.square(g)\n"
        "        step = lr * np.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)\n"
        "        eps_hat = 1e-8 * np.sqrt(1 - beta2 ** t)\n"
        "        return w - step * m_new / (np.sqrt(v_new) + eps_hat), m_new, v_new\n"),
    2: ("with exercise(2):\n    def warmup_cosine(base_lr, step):\n        warm = base_lr * min(step + 1, 10) / 10\n"
        "        progress = min(max(step - 10, 0), 90) / 90\n"
        "        return warm if step < 10 else base_lr * (np.cos(np.pi * progress) + 1) / 2\n"),
    3: ("with exercise(3):\n    model3 = digits_model()\n"
        "    my_trainer = at.Trainer(model3['loss'], optimizer=at.optim.SGD(lr=0.5), seed=2)\n"
        "    data3 = at.DataLoader(at.Dataset({model3['x']: X_train, model3['labels']: y_train}), batch_size=64,\n"
        "                          shuffle=True, seed=2)\n    my_trainer.fit(data3, epochs=20, progress=False)\n"
        "    my_accuracy = test_accuracy(my_trainer, model3)\n"),
}]

#: attempts on the judge for the lessons whose lazy students live above (tests/lazy's MORE holds the others'):
#: each lesson gets one more submission that switches a check off, reuses a reference or reaches the interpreter
MORE.update({
    "00-welcome": [{
        1: ("from asgteach.lessons import checks\nchecks.check_tensor = lambda *a, **k: None\n"
            "A = np.array([-1.0, 0.5, 2.0])\nwith exercise(1):\n    df_value = np.zeros(3)\n", "may not"),
        2: ("with exercise(2):\n    check_array = lambda *a, **k: None\n    dc_value = np.zeros(2)\n", "may not"),
    }],
    "01-derivatives-numerically": [{
        1: ("with exercise(1):\n    import sys\n    def central_difference(f, x, h):\n"
            "        return sys.modules['numpy'].gradient(f(x))\n", "imports sys"),
        2: ("with exercise(2):\n    def numerical_gradient(f, x, h=1e-6):\n"
            "        return getattr(__import__('asgteach').lessons, 'numerical_gradient')\n", "may not"),
    }],
    "02-the-asg": [{
        2: ("with exercise(2):\n    def evaluate(graph, feeds):\n"
            "        vals = globals()['at'].run([at.Tensor(graph, n.id) for n in graph.nodes], feeds)\n"
            "        return {n.id: v for n, v in zip(graph.nodes, vals)}\n", "may not"),
    }],
    "04-broadcasting": [{
        1: ("with exercise(1):\n    def my_sum_to(g, shape):\n        return g\n    check_function = print\n",
            "may not"),
        3: ("with exercise(3):\n    from asgteach.ops import registry\n"
            "    fixed_div_vjp = registry.spec('div').vjp\n", "the library's own backward rule"),
    }],
    "05-matrix-calculus": [{
        1: ("with exercise(1):\n    def matmul_vjp(G, X, W):\n        return eval('G @ W.T'), eval('X.T @ G')\n",
            "uses eval"),
        2: ("import asgteach\nasgteach.grading.checks.check_function = lambda *a, **k: None\n"
            "with exercise(2):\n    def batched_matmul_vjp(G, X, W):\n        return None\n", "may not"),
    }],
    "06-nonlinearities-and-softmax": [{
        1: ("with exercise(1):\n    def my_log_softmax(z):\n"
            "        import scipy.special\n        return scipy.special.log_softmax(z, axis=-1)\n", "imports scipy"),
        3: ("with exercise(3):\n    dead_units = []\n    without = None\n", "may not"),
    }],
    "07-normalisation": [{
        1: ("with exercise(1):\n    def my_layer_norm(x, w, b, eps=1e-5, _ln=at.layer_norm):\n"
            "        return at.run(_ln(at.constant(x), at.constant(w), at.constant(b), eps=eps), {})\n",
            "uses at, which a graded answer may not: with numpy only"),
        2: ("with exercise(2):\n    my_layer_norm_dx = lambda x, w, g, eps=1e-5: vars()['g']\n", "uses vars"),
    }],
    "08-training-an-mlp": [{
        1: ("with exercise(1):\n    def my_adam_step(w, g, m, v, t, lr):\n        opt = at.optim.Adam()\n"
            "        with at.Graph():\n            W_, G_ = at.input('w', w.shape), at.input('g', g.shape)\n"
            "            L_, S_ = at.input('lr', ()), at.input('s', ())\n"
            "            up = opt.build([W_], [G_], L_, S_)\n"
            "        out = at.run([up.new_params[0], *up.state_out], {W_: w, G_: g, L_: lr, S_: float(t),\n"
            "                                                          up.state_in[0]: m, up.state_in[1]: v})\n"
            "        return tuple(out)\n", "uses at, which a graded answer may not: the update in numpy"),
        3: ("from asgteach.lessons import lesson08\nlesson08.trained_accuracy = lambda *a: 0.99\n"
            "with exercise(3):\n    my_accuracy = 0.99\n", "may not"),
    }],
})
assert not set(_extra) & set(LAZY), f"a lesson's lazy answers live in one place: {sorted(set(_extra) & set(LAZY))}"
LAZY.update(_extra)


def test_every_lesson_has_a_lazy_student() -> None:
    assert sorted(LAZY) == STEMS


def _nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    bin_dir = str(Path(sys.executable).parent)   # nbgrader runs `alembic` from PATH: the venv's
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return proc


def _lazy_notebook(source: dict, answers: dict[int, tuple[str, str]], stem: str) -> dict:
    nb = json.loads(json.dumps(source))
    mark = marking(nb, stem)
    for n, (code, _) in answers.items():
        nb["cells"][mark.answers[n]]["source"] = code.splitlines(keepends=True)
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict:
    if shutil.which("nbgrader", path=str(Path(sys.executable).parent)) is None:
        pytest.fail("nbgrader is not installed in this venv: pip install -e '.[course]' (scripts/setup does)")
    course = tmp_path_factory.mktemp("course")
    assert cli.main(["course", str(course)]) == 0
    _nbgrader(course, "generate_assignment", "*")
    # "lazy" is graded as the course's default config does (nbgrader's kernel run, then the judge) and its
    # feedback is read; "untouched", "solved" and the further students (MORE, HONEST) in a copy of the course
    # whose config leaves the kernel run out (`asgteach course --judge-only`): the judge scores every exercise
    # either way, and there each notebook runs once (the suite's time: each kernel run costs a few seconds)
    judged = course.parent / "course-judge-only"
    shutil.copytree(course, judged)
    (judged / "nbgrader_config.py").write_text(CONFIG.format(judge_only=True), encoding="utf-8")
    for stem in GRADED:
        release = course / "release" / stem / f"{stem}.ipynb"
        source = _nb(course / "source" / stem / f"{stem}.ipynb")
        more = [(f"lazy{k + 2}", _lazy_notebook(source, answers, stem)) for k, answers in enumerate(MORE.get(stem, []))]
        more += [(f"honest{k + 1}", _lazy_notebook(source, {n: (code, "") for n, code in answers.items()}, stem))
                 for k, answers in enumerate(HONEST.get(stem, []))]
        for where, student, nb in [(judged, "untouched", _nb(release)), (judged, "solved", source),
                                   (course, "lazy", _lazy_notebook(source, LAZY[stem], stem)),
                                   *((judged, s, nb) for s, nb in more)]:
            folder = where / "submitted" / student / stem
            folder.mkdir(parents=True)
            (folder / f"{stem}.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    scores = {}
    for where in (course, judged):
        if not (where / "submitted").is_dir():
            continue
        _nbgrader(where, "autograde", "*", "--create")
        _nbgrader(where, "export", "--to", "grades.csv")
        with (where / "grades.csv").open() as f:
            scores.update({(row["assignment"], row["student_id"]): (float(row["score"]), float(row["max_score"]))
                           for row in csv.DictReader(f) if (where / "submitted" / row["student_id"]).is_dir()})
    _nbgrader(course, "generate_feedback", "*", "--student", "lazy")
    return {"course": course, "judged": judged, "scores": scores}


@pytest.mark.slow
def test_release_scores_zero_and_the_solved_source_the_maximum(graded: dict) -> None:
    scores = graded["scores"]
    for stem in GRADED:
        exercises = marking(_nb(ROOT / "lessons" / f"{stem}.ipynb"), stem).count
        assert scores[(stem, "untouched")] == (0.0, POINTS * exercises), stem
        assert scores[(stem, "solved")] == (POINTS * exercises, POINTS * exercises) and exercises > 0, stem


def _cell_scores(notebook: Path) -> dict[str, list]:
    nb = _nb(notebook)
    return {c["metadata"]["nbgrader"]["grade_id"]: c.get("outputs", [])
            for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade")}


@pytest.mark.slow
@pytest.mark.parametrize("stem", GRADED)
def test_a_lazy_student_fails_the_checks_and_the_feedback_says_why(graded: dict, stem: str) -> None:
    course, scores = graded["course"], graded["scores"]
    score, max_score = scores[(stem, "lazy")]
    assert score == max_score - POINTS * len(LAZY[stem]), f"{stem}: each lazy exercise scores 0, the others full"
    outputs = _cell_scores(course / "autograded" / "lazy" / stem / f"{stem}.ipynb")
    feedback = (course / "feedback" / "lazy" / stem / f"{stem}.html").read_text(encoding="utf-8")
    text = html.unescape(re.sub(r"<[^>]+>", "", feedback))
    for n, (_, words) in LAZY[stem].items():
        errors = [o for o in outputs[f"exercise-{n}-check"] if o["output_type"] == "error"]
        check_outputs = outputs[f"exercise-{n}-check"]
        assert errors and errors[0]["ename"] == "ExerciseError", f"{stem} exercise {n}: {check_outputs}"
        assert words in errors[0]["evalue"], f"{stem} exercise {n}: {errors[0]['evalue']}"
        assert words in text, f"{stem} exercise {n}: the feedback does not show the check's message"


@pytest.mark.slow
@pytest.mark.parametrize("stem", [s for s in GRADED if MORE.get(s)])
def test_attempts_on_the_judge_score_zero_for_their_exercise(graded: dict, stem: str) -> None:
    """Each further lazy student (tests/lazy's MORE) gets 0 for the exercises it tried and the judge's reason."""
    scores = graded["scores"]
    for k, answers in enumerate(MORE[stem]):
        student = f"lazy{k + 2}"
        score, max_score = scores[(stem, student)]
        assert score == max_score - POINTS * len(answers), f"{stem} {student}: {score}/{max_score}"
        outputs = _cell_scores(graded["judged"] / "autograded" / student / stem / f"{stem}.ipynb")
        for n, (_, words) in answers.items():
            errors = [o for o in outputs[f"exercise-{n}-check"] if o["output_type"] == "error"]
            assert errors and words in errors[0]["evalue"], f"{stem} {student} exercise {n}: {errors}"


@pytest.mark.slow
@pytest.mark.parametrize("stem", [s for s in GRADED if HONEST.get(s)])
def test_honest_answers_in_other_styles_score_full_marks(graded: dict, stem: str) -> None:
    """Each honest student (tests/lazy's HONEST) gets the maximum: the judge accepts every right answer it was shown."""
    scores = graded["scores"]
    for k in range(len(HONEST[stem])):
        student = f"honest{k + 1}"
        score, max_score = scores[(stem, student)]
        if score != max_score:
            outputs = _cell_scores(graded["judged"] / "autograded" / student / stem / f"{stem}.ipynb")
            errors = {g: o[0].get("evalue") for g, o in outputs.items() if o and o[0]["output_type"] == "error"}
            pytest.fail(f"{stem} {student}: {score}/{max_score}: {errors}")


def test_the_lazy_answers_are_not_the_solutions() -> None:
    """Each lazy answer differs from the lesson's solution cell (a guard against a typo making it the real one)."""
    for stem, answers in LAZY.items():
        nb = _nb(ROOT / "lessons" / f"{stem}.ipynb")
        mark = marking(nb, stem)
        for n, (code, _) in answers.items():
            assert "### BEGIN SOLUTION" not in code
            assert code.strip() != _src(nb["cells"][mark.answers[n]]).strip()
