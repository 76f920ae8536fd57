"""Lesson 5's checks (matrix calculus), with the bug hunt's truth kept inside them.

* Exercise 1, ``linear_vjp(G, X, W)``: the backward rule of ``Y = X W^T + b`` (a weight stored out by in, as
  PyTorch's ``nn.Linear`` does), which the lesson never derives: :func:`linear_vjp_check` calls it on shapes of its
  own (one row, one input feature, more outputs than inputs...) and compares with what ``at.grad`` gives.
* Exercise 2, ``matmul_vjp(G, X, W)`` for batch axes that broadcast in any way (a shared ``W``, a shared ``X``,
  batch axes of size 1 on either side): :func:`batched_vjp_check` calls it on shape pairs the lesson never showed
  and compares with ``at.grad``; section 4's one case (a shared ``W``, summed over axis 0) does not pass the others.
  ``RULES`` keeps both numpy only: the products, and the sums, by hand.
* Exercise 3, the bug hunt: :func:`sub_diagnosis` asks gradcheck itself, inside ``bugs.mystery(5)``,
  which inputs get a wrong gradient and which nodes' rules it blames, and compares the student's lists
  with that; a wrong list is told how many are missing or which are right after all, never the answer.

This file gives the answers away: try the lesson first.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ..grading.checks import check_function
from ..grading.exercises import ExerciseError
from ..grading import rules
from ..grading.rules import Rule, no_asgteach
from .common import fresh, mystery_report

__all__ = ["LESSON", "RULES", "linear_vjp_check", "batched_vjp_check", "sub_diagnosis"]

LESSON = "05-matrix-calculus"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {
    1: no_asgteach("derive the rule and write it in numpy"),
    2: no_asgteach("the products and the sums over the broadcast batch axes by hand, in numpy"),
}


def _autograd_vjp(G: np.ndarray, arrays: Sequence[np.ndarray], forward: Any) -> tuple[np.ndarray, ...]:
    """The gradients of sum(forward(*inputs) * G) with respect to each input, by ``at.grad``: the reference."""
    import asgteach as at

    with at.Graph(name="check: reference"):
        ins = [at.input(f"in{i}", a.shape) for i, a in enumerate(arrays)]
        out = forward(*ins)
        g = at.input("G", out.shape)
        grads = at.grad(at.sum(out * g), ins)
    return tuple(np.asarray(v) for v in at.run(list(grads), {**dict(zip(ins, arrays)), g: G}))


def linear_vjp_check(fn: Any) -> None:
    """Exercise 1: ``linear_vjp(G, X, W) -> (dX, dW, db)`` for Y = X W^T + b, on shapes of the check's own."""
    import asgteach as at

    rules.enforce(fn, RULES[1], "linear_vjp")
    rng = fresh()
    cases = []
    for n, k, m in [(5, 3, 4), (1, 4, 2), (3, 1, 6), (6, 5, 5)]:
        X, W, b = rng.standard_normal((n, k)), rng.standard_normal((m, k)), rng.standard_normal(m)
        G = rng.standard_normal((n, m))
        dX, dW, db = _autograd_vjp(G, [X, W, b], lambda x, w, bias: x @ at.transpose(w, (1, 0)) + bias)
        cases.append(((G, X, W), (dX, dW, db)))
    check_function(fn, cases, name="linear_vjp",
                   hint="Y = X W^T: each result has its input's shape ((n, k), (m, k), (m,)). Find the products by "
                        "shapes, then check one element by index notation; b is added to every row (lesson 4)")


#: (X's shape, W's shape): batch axes broadcast in every way section 4 did not show, and its one case
_BATCHED = [((4, 3, 2), (2, 5)), ((3, 2), (4, 2, 5)), ((4, 3, 2), (4, 2, 5)), ((2, 1, 3, 2), (4, 2, 5)),
            ((1, 3, 2), (4, 2, 5)), ((2, 3), (3, 4))]


def batched_vjp_check(fn: Any) -> None:
    """Exercise 2: ``matmul_vjp(G, X, W) -> (dX, dW)`` for any broadcasting batch axes, against ``at.grad``."""
    rules.enforce(fn, RULES[2], "matmul_vjp")
    rng = fresh()
    cases = []
    for sx, sw in _BATCHED:
        X, W = rng.standard_normal(sx), rng.standard_normal(sw)
        G = rng.standard_normal(np.broadcast_shapes(sx[:-2], sw[:-2]) + (sx[-2], sw[-1]))
        cases.append(((G, X, W), _autograd_vjp(G, [X, W], lambda x, w: x @ w)))
    check_function(fn, cases, name="matmul_vjp",
                   hint="each gradient has its input's shape: where an input was broadcast over a batch axis (it "
                        "had none there, or size 1), its gradient is summed over that axis (lesson 4's sum_to)")


def sub_diagnosis(wrong_gradients: Any, culprit_ids: Any, loss: Any, inputs: Sequence[Any],
                  feeds: Mapping[Any, Any]) -> None:
    """Lesson 5: which inputs get a wrong gradient under the planted bug, and which nodes' rules gradcheck blames."""
    report = mystery_report(5, loss, inputs, feeds)
    wrong = sorted(c.name for c in report.inputs if not c.ok)
    if not isinstance(wrong_gradients, (list, tuple, set)) or not all(isinstance(w, str) for w in wrong_gradients):
        raise ExerciseError(f"wrong_gradients should be a list of input names, got {wrong_gradients!r:.80}")
    got = sorted(wrong_gradients)
    if got != wrong:
        missing, extra = sorted(set(wrong) - set(got)), sorted(set(got) - set(wrong))
        parts = []
        if missing:
            parts.append(f"{len(missing)} input(s) with a wrong gradient are missing")
        if extra:
            parts.append(f"{', '.join(extra)} {'gets' if len(extra) == 1 else 'get'} a right gradient")
        raise ExerciseError(f"wrong_gradients is not right: {'; '.join(parts)}. Gradient-check every input of the "
                            "graph inside bugs.mystery(5) and read report.inputs")
    blamed = sorted(c.node_id for c in report.culprits)
    if not isinstance(culprit_ids, (list, tuple, set)):
        raise ExerciseError(f"culprit_ids should be a list of node ids, got {culprit_ids!r:.80}")
    ids = sorted(int(i) for i in culprit_ids)
    if ids != blamed:
        ops = sorted({loss.graph.nodes[i].op for i in ids if 0 <= i < len(loss.graph.nodes)})
        raise ExerciseError(f"culprit_ids {ids} are not the nodes whose rule is wrong ({len(blamed)} node(s) are; "
                            f"you named {', '.join(ops) or 'no'} node(s)). Read report.culprits")
