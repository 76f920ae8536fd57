"""The checks of single exercises, with their answers kept inside them.

A check cell shows what it compares, which is good for a student reading a failure, but when
the expected value is an expression there, copying that expression passes the check without
the exercise's work. The checks here hold what a notebook must not: the reference solutions
(lesson 13's memory planning, lesson 11's kernel arithmetic), the truth of a bug hunt, the
exact derivative a "by hand" answer must reproduce. Each one runs the student's function or
graph on inputs the student never saw (a fresh graph, fresh points, another plan), so a value
copied from an earlier output fails too. The lessons import the check functions only (never
the private ``_reference`` helpers), and this file gives the answers away: try the lesson first.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .calls import refusing_calls
from .checks import check_array, check_equal, check_function, without
from .exercises import ExerciseError
from .rules import enforce, rule_for

__all__ = [
    "chain_rule_by_hand", "lost_contribution", "fanout_check", "more_rules_check", "div_culprit", "sub_diagnosis",
    "trained_accuracy",
    "hessian_from_hvp", "jacobian_by_jvp", "softmax_jacobian_check", "jvp_by_transposition_check",
    "broadcast_strides_check", "offset_check", "groups_check",
    "max_pool_routing", "max_pool_grad_check", "memory_check", "last_use_check", "fusible_check", "show_fusion",
]


def _fresh(seed: int | None = None) -> np.random.Generator:
    return np.random.default_rng(seed)


def _borrowed(fn: Any, *originals: Any) -> str | None:
    """The notebook name under which ``fn``'s globals hold one of ``originals`` (the library's answer), if any."""
    if fn in originals:
        return getattr(fn, "__name__", "it")
    for name, value in getattr(fn, "__globals__", {}).items():
        if any(value is o for o in originals) and name in getattr(getattr(fn, "__code__", None), "co_names", ()):
            return name
    return None


# --- lesson 3: the chain rule by hand ----------------------------------------------------------------

def chain_rule_by_hand(fn: Callable[[float, float], tuple[float, float]], trials: int = 5) -> None:
    """``fn(p, q) -> (dg/dp, dg/dq)`` for g = (p + q) tanh(p), exact to round-off at fresh points.

    Finite differences agree to 6-10 digits only; the chain rule agrees to ~15, so the tight
    tolerance tells the two apart (and the message says which it looks like). The exercise's rule
    (numpy only: no asgteach, no symbolic or complex-step derivative) is read from ``fn``'s source.
    """
    enforce(fn, rule_for("03-chain-rule-and-reverse-mode", 1), "chain_rule_grads")
    rng = _fresh()
    for k in range(trials):
        p, q = (float(v) for v in rng.uniform(-2.0, 2.0, size=2))
        t = np.tanh(p)
        want = ((p + q) * (1 - t * t) + t, t)
        try:
            got = fn(p, q)
        except NotImplementedError:
            raise
        except Exception as e:  # noqa: BLE001 - the student's function failing is a finding
            raise ExerciseError(f"chain_rule_grads({p:.4f}, {q:.4f}) raised {type(e).__name__}: {e}") from e
        try:   # a tuple, a list or an array of the two numbers: all say the same
            pair = np.asarray(got, dtype=np.float64).reshape(-1) if np.size(got) == 2 else None
        except (TypeError, ValueError):
            pair = None
        if pair is None:
            raise ExerciseError(f"chain_rule_grads(p, q) should return two numbers (dg_dp, dg_dq), got {got!r:.80}")
        for name, g, w in zip(("dg/dp", "dg/dq"), pair, want):
            try:
                check_array(g, w, name=name, where=f"at fresh point p={p:.4f}, q={q:.4f}", rtol=1e-12, atol=1e-13)
            except ExerciseError as e:
                close = np.isclose(float(np.asarray(g)), w, rtol=1e-4, atol=1e-6)
                extra = ("\n  It agrees to a few digits only: that is what finite differences give. Apply the "
                         "chain rule node by node (s = p + q, t = tanh(p), g = s * t): it is exact to "
                         "round-off." if close else "")
                raise ExerciseError(f"{e}{extra}") from None


def lost_contribution(fn: Callable[[float, float], Any], trials: int = 4) -> None:
    """Lesson 3's bug hunt: ``fn(A, B)``, what node c's gradient loses under the bug at a = A, b = B.

    Called at points the lesson never used: a number read off section 5's output cannot pass; the
    diagnosis (which use of c survives, which is lost) can.
    """
    if not callable(fn):
        raise ExerciseError(f"c_lost should be a function c_lost(A, B), got {type(fn).__name__}")
    rng = _fresh()
    for _ in range(trials):
        A, B = (float(v) for v in rng.uniform(-1.5, 1.5, size=2))
        check_function(fn, [((A, B), B)], name="c_lost", rtol=1e-6, atol=1e-9,
                       hint="under the bug only the last contribution to c's gradient survives: which use of c "
                            "does the lost one come from, and what is its local derivative?")


def _fanouts(graph: Any) -> list[int]:
    consumers = graph.consumers()
    return sorted(n.id for n in graph.nodes if n.phase == "forward"
                  and len([i for i in consumers[n.id] if graph.nodes[i].phase == "forward"]) > 1)


def fanout_check(fn: Callable[[Any], Any]) -> None:
    """``fn(graph)`` -> ids of the forward nodes read by more than one forward node, on graphs of the check's own."""
    import asgteach as at

    graphs = []
    with at.Graph(name="check: fan-out 1") as g1:
        x, w = at.input("x", (3,)), at.input("w", (3,))
        h = at.tanh(x * w)
        at.grad(at.sum(h * h + x), [x, w])      # backward nodes read forward ones: they do not count
    graphs.append(g1)
    with at.Graph(name="check: fan-out 2") as g2:
        p = at.input("p", ())
        q = at.exp(p)
        _ = (q * p + q / p) * at.tanh(p)
    graphs.append(g2)
    with at.Graph(name="check: no fan-out") as g3:
        u = at.input("u", (2,))
        _ = at.sum(at.relu(u))
    graphs.append(g3)
    for graph in graphs:
        want = _fanouts(graph)
        try:
            got = fn(graph)
        except (ExerciseError, NotImplementedError):
            raise
        except Exception as e:  # noqa: BLE001 - the student's function failing is a finding
            raise ExerciseError(f"fanout_nodes(<graph {graph.name!r}>) raised {type(e).__name__}: {e}") from e
        if not isinstance(got, (list, tuple, set, np.ndarray)):
            raise ExerciseError(f"fanout_nodes(graph) should return a list of node ids, got {type(got).__name__}")
        check_equal(sorted(int(i) for i in got), want, name=f"fanout_nodes(<graph {graph.name!r}>)",
                    hint="count only forward readers (graph.consumers(), then node.phase == 'forward')")


def _reverse_mode(graph: Any, values: Mapping[int, np.ndarray], y_id: int, rules: Mapping[str, Any]) -> dict:
    """Lesson 3's reverse mode, the check's own copy (the notebook's ``backward`` is the student's to change)."""
    grads = {y_id: np.ones_like(values[y_id])}
    for node in reversed(graph.nodes[: y_id + 1]):
        if node.id not in grads or not node.inputs:
            continue
        ins = [values[i] for i in node.inputs]
        for i, contribution in zip(node.inputs, rules[node.op](grads[node.id], ins, values[node.id])):
            grads[i] = grads.get(i, 0.0) + contribution
    return grads


def more_rules_check(more_rules: Any, trials: int = 3) -> None:
    """Lesson 3, exercise 2: ``more_rules`` (RULES + sub, div, exp) drive reverse mode right on h = e^p / (p - q) - q.

    The sweep is the check's own (:func:`_reverse_mode`), at fresh p and q; every forward node's
    gradient is compared with ``at.grad``'s.
    """
    import asgteach as at

    if not isinstance(more_rules, Mapping):
        raise ExerciseError(f"MORE_RULES should be a dict {{op name: rule}}, got {type(more_rules).__name__}")
    missing = [op for op in ("add", "mul", "tanh", "sub", "div", "exp") if op not in more_rules]
    if missing:
        raise ExerciseError(f"MORE_RULES has no rule for {', '.join(missing)} (it holds all of RULES, plus sub, div "
                            "and exp)")
    rng = _fresh()
    with at.Graph(name="check: h = exp(p) / (p - q) - q") as graph:
        p, q = at.input("p", ()), at.input("q", ())
        h = at.exp(p) / (p - q) - q
        forward = [n for n in graph.nodes if n.op not in ("input", "parameter", "constant")]
        truth_t = at.grad(h, [at.Tensor(graph, n.id) for n in graph.nodes if n.phase == "forward"
                              and n.id <= h.node_id])
    ids = [n.id for n in graph.nodes if n.phase == "forward" and n.id <= h.node_id]
    for _ in range(trials):
        P, Q = float(rng.uniform(-1.0, 1.0)), float(rng.uniform(1.5, 2.5))
        feeds = {p: P, q: Q}
        run_ids = [n.id for n in forward]
        values = dict(zip(run_ids, at.run([at.Tensor(graph, i) for i in run_ids], feeds)))
        values.update({p.node_id: np.asarray(P), q.node_id: np.asarray(Q)})
        for n in graph.nodes:
            if n.op == "constant":
                values[n.id] = np.asarray(graph.constants[n.id], dtype=np.float64)
        try:
            mine = _reverse_mode(graph, values, h.node_id, more_rules)
        except (ExerciseError, NotImplementedError):
            raise
        except Exception as e:  # noqa: BLE001 - a rule failing is a finding
            raise ExerciseError(f"reverse mode with MORE_RULES on h = exp(p) / (p - q) - q at p={P:.3f}, q={Q:.3f} "
                                f"raised {type(e).__name__}: {e}") from e
        truth = at.run(truth_t, feeds)
        for nid, want in zip(ids, truth):
            node = graph.nodes[nid]
            if nid not in mine:
                raise ExerciseError(f"no gradient reached node #{nid} {node.op} '{node.name}': does every rule return "
                                    "one contribution per input?")
            check_array(mine[nid], want, name=f"the gradient of node #{nid}",
                        where=f"{node.op} '{node.name}', at p={P:.4f}, q={Q:.4f}")


# --- lessons 4 and 5: bug hunts on a graph the lesson did not print ----------------------------------

def _report(lesson: int, loss: Any, inputs: Sequence[Any], feeds: Mapping[Any, Any]) -> Any:
    from .. import gradcheck
    from . import bugs

    with bugs.mystery(lesson):
        return gradcheck(loss, list(inputs), feeds)


def div_culprit(culprit_id: Any, culprit_input: Any, loss: Any, inputs: Sequence[Any],
                feeds: Mapping[Any, Any]) -> None:
    """Lesson 4: the node of ``loss``'s graph whose rule the planted bug breaks, and its input; a miss narrows."""
    graph = loss.graph
    (truth,) = _report(4, loss, inputs, feeds).culprits
    if not isinstance(culprit_id, (int, np.integer)) or not 0 <= int(culprit_id) < len(graph.nodes):
        raise ExerciseError(f"culprit_id should be the id of a node of {graph.name!r} (0 to {len(graph.nodes) - 1}), "
                            f"got {culprit_id!r}")
    node = graph.nodes[int(culprit_id)]
    if node.id != truth.node_id:
        if node.op != truth.op:
            hint = (f"node #{node.id} is a {node.op}: run at.gradcheck on this graph inside bugs.mystery(4) and "
                    "read report.culprits")
        else:
            hint = (f"node #{node.id} is a {node.op} too, but its rule checks out here: what does the planted bug "
                    "need that this node's inputs do not have? (compare their shapes with its output's)")
        raise ExerciseError(f"culprit_id {node.id} is not the node whose rule is wrong. {hint}")
    if culprit_input != truth.input_index:
        raise ExerciseError(f"node #{node.id} is the culprit, but input {culprit_input!r} is not the one whose "
                            "gradient is off: which of its inputs was broadcast?")


def sub_diagnosis(wrong_gradients: Any, culprit_ids: Any, loss: Any, inputs: Sequence[Any],
                  feeds: Mapping[Any, Any]) -> None:
    """Lesson 5: which inputs get a wrong gradient under the planted bug, and which nodes' rules gradcheck blames."""
    report = _report(5, loss, inputs, feeds)
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


# --- lesson 8: accuracy recomputed from the trained parameters -----------------------------------------

def trained_accuracy(trainer: Any, x_test: np.ndarray, y_test: np.ndarray) -> float:
    """The test accuracy of lesson 8's digits MLP (64-64-10, relu) from the trainer's OWN parameters.

    Computed here in numpy, so no number the student typed enters it.
    """
    params = getattr(trainer, "params", None)
    names = ("mlp.0.weight", "mlp.0.bias", "mlp.1.weight", "mlp.1.bias")
    if not isinstance(params, Mapping) or any(n not in params for n in names):
        have = sorted(params) if isinstance(params, Mapping) else type(params).__name__
        raise ExerciseError(f"my_trainer should train digits_model() (parameters {list(names)}), its parameters are "
                            f"{have}")
    w0, b0, w1, b1 = (np.asarray(params[n], dtype=np.float64) for n in names)
    hidden = np.maximum(np.asarray(x_test, dtype=np.float64) @ w0 + b0, 0.0)
    predicted = np.argmax(hidden @ w1 + b1, axis=-1)
    return float(np.mean(predicted == np.asarray(y_test)))


# --- lesson 10: Hessians and Jacobians of graphs the check builds --------------------------------------

def hessian_from_hvp(fn: Callable[..., Any], trials: int = 2) -> None:
    """``fn(hv, x, v, x0)`` -> the Hessian at x0 of the function whose HVP graph ``hv`` is (a function of the check's).

    f(x) = sum(tanh(x)) + (w . x)^2 / 2, so H = diag(-2 tanh (1 - tanh^2)) + w w^T: not the lesson's f.
    """
    import asgteach as at

    rng = _fresh()
    n = 4
    w = rng.standard_normal(n)
    with at.Graph(name="check: another f"):
        x = at.input("x", (n,))
        v = at.input("v", (n,))
        f = at.sum(at.tanh(x)) + 0.5 * at.sum(x * at.constant(w)) ** 2
        hv = at.hvp(f, x, v)
    for k in range(trials):
        x0 = rng.standard_normal(n)
        th = np.tanh(x0)
        want = np.diag(-2 * th * (1 - th ** 2)) + np.outer(w, w)
        check_function(fn, [((hv, x, v, x0), want)], name="hessian_from_hvp", rtol=1e-8, atol=1e-10)


def jacobian_by_jvp(fn: Callable[..., Any], trials: int = 2) -> None:
    """``fn(jt, a, t, a0)`` -> the Jacobian at a0 of the function whose JVP graph ``jt`` is, here F(a) = tanh(M a).

    F maps R^4 to R^3, so the Jacobian is 3 x 4 and not diagonal: an answer fitted to the lesson's
    elementwise F (a diagonal) cannot pass.
    """
    import asgteach as at

    rng = _fresh()
    M = rng.standard_normal((3, 4))
    with at.Graph(name="check: another F"):
        a = at.input("a", (4,))
        t = at.input("t", (4,))
        jt = at.jvp(at.tanh(at.constant(M) @ a), a, t)
    for k in range(trials):
        a0 = rng.standard_normal(4)
        want = (1 - np.tanh(M @ a0) ** 2)[:, None] * M
        check_function(fn, [((jt, a, t, a0), want)], name="jacobian_by_jvp", rtol=1e-8, atol=1e-10)



def _refuse_library(fn: Any, name: str, *originals: Any) -> None:
    """Refuse a function whose notebook globals hold the library's own answer (``from asgteach import jvp``)."""
    found = _borrowed(fn, *originals)
    if found:
        raise ExerciseError(f"{name} calls the library's own {found} (imported by name), which the exercise asks "
                            "you to do without: write it yourself")


def _softmax_rows(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_jacobian_check(fn: Callable[[np.ndarray], Any]) -> None:
    """``fn(y)`` -> softmax's Jacobian dy/dz at the point whose output is ``y``: (n, n), or (b, n, n) for rows.

    Run at fresh probability vectors (sizes 2 to 7, one row and a batch of rows) while the
    library's autodiff and its softmax are switched off, so the numbers must come from the
    formula; to round-off, which a finite difference does not reach (the message says so).
    """
    enforce(fn, rule_for("10-higher-order-and-forward-mode", 4), "softmax_jacobian")
    import asgteach as at

    from .. import autograd

    _refuse_library(fn, "softmax_jacobian", at.jvp, at.grad, at.hvp, at.softmax)
    rng = _fresh()
    cases = [_softmax_rows(rng.standard_normal(n) * 2) for n in (2, 3, 5)]
    cases += [_softmax_rows(rng.standard_normal((b, n)) * 2) for b, n in ((4, 3), (1, 7))]
    refuse = [(at, "jvp"), (at, "grad"), (at, "hvp"), (autograd, "jvp"), (autograd, "grad")]
    for y in cases:
        want = y[..., :, None] * np.eye(y.shape[-1]) - y[..., :, None] * y[..., None, :]   # diag(y) - y y^T
        call = f"softmax_jacobian(<fresh y of shape {y.shape}>)"
        with without("softmax", "log_softmax", attrs=refuse,
                      why="section 6's formula gives J from y alone, with numpy"):
            try:
                got = fn(y.copy())
            except (ExerciseError, NotImplementedError):
                raise
            except Exception as e:  # noqa: BLE001 - the student's function failing is a finding
                batch = (f"\n  Hint: y here is a batch of rows, shape {y.shape}: return one n x n Jacobian per "
                         "row, shape (b, n, n) (numpy broadcasting over the leading axis, or a loop over the rows)"
                         if y.ndim == 2 else "")
                raise ExerciseError(f"{call} raised {type(e).__name__}: {e}{batch}") from e
        arr = np.asarray(got, dtype=np.float64) if np.shape(got) == want.shape else None
        if arr is not None and np.allclose(arr, want, rtol=1e-11, atol=1e-14):
            continue
        if arr is not None and np.allclose(arr, want, rtol=1e-4, atol=1e-7):
            # close but not exact: check_array's guesses (a factor, a transpose: J is symmetric) would mislead
            k = np.unravel_index(int(np.argmax(np.abs(arr - want))), want.shape)
            where = "[" + ", ".join(str(int(i)) for i in k) + "]"
            raise ExerciseError(f"{call} agrees with the Jacobian to a few digits only (worst element {where}: "
                                f"expected {float(want[k]):.12g}, got {float(arr[k]):.12g}): that is what finite "
                                "differences give. Use the formula of section 6, J[i, j] = y[i] (delta_ij - y[j]): it "
                                "is exact to round-off.")
        if y.ndim == 2 and np.shape(got) == (y.shape[-1], y.shape[-1]):
            raise ExerciseError(f"{call} returned one {np.shape(got)} matrix. Hint: y here is a batch of rows "
                                f"(b, n): return one n x n Jacobian per row, shape {want.shape}")
        try:
            check_array(got, want, name="the Jacobian", where=call, rtol=1e-11, atol=1e-14)
        except ExerciseError as e:
            extra = ""
            if arr is not None and np.allclose(arr, -want, rtol=1e-9, atol=1e-13):
                extra = "\n  Hint: the diagonal is y_i - y_i^2 (positive), the rest -y_i y_j."
            elif np.shape(got) != want.shape:
                extra = "\n  Hint: J is n x n for y of n entries (and one such matrix per row of a batch)."
            raise ExerciseError(f"{e}{extra}") from None


def jvp_by_transposition_check(fn: Callable[..., Any], trials: int = 3) -> None:
    """``fn(y, x, t)`` -> a Tensor holding J t, built by reverse mode alone (the transposition trick).

    The check builds F: R^4 -> R^3 of its own (not the lesson's), calls ``fn`` inside that
    graph's ``with`` block while ``at.jvp`` is switched off, allows at most two reverse sweeps
    (the VJP and the sweep through it: a Jacobian built row by row takes m), and runs the
    result at fresh x and t, feeding random values to any other input it reads (the
    cotangent u: J t must not depend on it).
    """
    enforce(fn, rule_for("10-higher-order-and-forward-mode", 5), "jvp_by_transposition")
    import asgteach as at

    from .. import autograd
    from ..tensor import Tensor

    _refuse_library(fn, "jvp_by_transposition", at.jvp)
    rng = _fresh()
    M = rng.standard_normal((3, 4))
    N = rng.standard_normal((3, 4))
    with at.Graph(name="check: F(x) = tanh(M x) * (N x)") as graph:
        x = at.input("x", (4,))
        y = at.tanh(at.constant(M) @ x) * (at.constant(N) @ x)
        t = at.input("t", (4,))
        sweeps = len(graph.passes)
        with without(attrs=[(at, "jvp"), (autograd, "jvp")],
                     why="build J t from reverse-mode sweeps (at.grad), as in section 7"):
            try:
                jt = fn(y, x, t)
            except (ExerciseError, NotImplementedError):
                raise
            except Exception as e:  # noqa: BLE001 - the student's function failing is a finding
                raise ExerciseError(f"jvp_by_transposition(y, x, t) on the check's F: R^4 -> R^3 raised "
                                    f"{type(e).__name__}: {e}") from e
    call = "jvp_by_transposition(y, x, t) (the check's F(x) = tanh(M x) * (N x), R^4 -> R^3)"
    if not isinstance(jt, Tensor) or jt.graph is not graph:
        raise ExerciseError(f"{call} should return a Tensor of y's graph (J t as a node), got "
                            f"{type(jt).__name__}: keep it a Tensor, the check runs it at points of its own")
    if jt.shape != y.shape:
        extra = (" - that is x's shape: J^T u (the VJP itself), or a gradient with respect to x. J t has one entry "
                 "per output: differentiate <VJP, t> with respect to the cotangent u" if jt.shape == x.shape else "")
        raise ExerciseError(f"{call} returned a Tensor of shape {jt.shape}; J t should have y's shape {y.shape}{extra}")
    used = len(graph.passes) - sweeps
    if used > 2:
        raise ExerciseError(f"{call} ran {used} reverse sweeps (at.grad calls): the trick needs two, one for the "
                            "VJP (with the cotangent u as an input) and one through the VJP graph with respect to "
                            "u. Building J row by row costs one sweep per output.")
    leaves = at.compile([jt]).leaves
    for k in range(trials):
        x0, t0 = rng.standard_normal(4), rng.standard_normal(4)
        feeds = {leaf.id: rng.standard_normal(leaf.shape) * 3 for leaf in leaves}   # u: any value at all
        feeds.update({x.node_id: x0, t.node_id: t0})
        a, b = M @ x0, N @ x0
        want = ((1 - np.tanh(a) ** 2) * b)[:, None] * M @ t0 + (np.tanh(a)[:, None] * N) @ t0
        try:
            got = at.run(jt, feeds)
        except Exception as e:  # noqa: BLE001 - a tensor that cannot run is a finding
            raise ExerciseError(f"{call}: running your Tensor failed ({type(e).__name__}: {e})") from e
        try:
            check_array(got, want, name="J t", where=f"{call}, fresh x and t, trial {k + 1}", rtol=1e-9, atol=1e-12)
        except ExerciseError as e:
            raise ExerciseError(f"{e}\n  Hint: J t = d/du <VJP(u), t>, where VJP(u) = at.grad(y, x, seed=u) and u "
                                "is an input of y's shape; it must not depend on the value fed to u.") from None

# --- lesson 11: the arithmetic of a kernel, against the backend's own -----------------------------------

def _refuse_borrowed(fn: Any, name: str, *originals: Any) -> None:
    found = _borrowed(fn, *originals)
    if found:
        raise ExerciseError(f"{name} hands the work to the backend's own function (as {found!r}): write it yourself")


def broadcast_strides_check(fn: Callable[..., Any]) -> None:
    """``fn(shape, out_shape)``: the element strides of ``shape`` read as ``out_shape`` (0 along broadcast axes)."""
    from ..backends import wgpu_kernels as wk

    original = wk.broadcast_strides
    _refuse_borrowed(fn, "my_broadcast_strides", original)
    cases = [((3, 5), (3, 5)), ((1, 5), (3, 5)), ((5,), (3, 5)), ((3, 1), (3, 5)), ((), (2, 3)),
             ((4, 1, 6), (2, 4, 3, 6)), ((1, 1), (1, 1)), ((2, 1, 1), (2, 3, 4)), ((7,), (2, 1, 7))]
    expected = [original(s, o) for s, o in cases]
    why = "compute the strides yourself"
    # the attribute switched off, and the function itself watched: a default argument or a closure holds it too
    with without(attrs=[(wk, "broadcast_strides")], why=why), refusing_calls("my_broadcast_strides", original, why=why):
        for (shape, out_shape), want in zip(cases, expected):
            check_equal(list(fn(shape, out_shape)), want, name=f"my_broadcast_strides({shape}, {out_shape})")


def offset_check(fn: Callable[..., Any]) -> None:
    """``fn(i, out_shape, strides)``: the input element that output element ``i`` reads."""
    for shape, out_shape in [((1, 5), (3, 5)), ((3, 1), (3, 5)), ((4, 1, 6), (2, 4, 3, 6)), ((2, 3), (2, 3)),
                             ((1, 3, 1), (2, 3, 4))]:
        src = np.arange(int(np.prod(shape))).reshape(shape)
        expected = np.broadcast_to(src, out_shape).ravel()     # what the kernel must read, element by element
        st = [int(s) // src.itemsize for s in np.broadcast_to(src, out_shape).strides]   # 0 where broadcast
        check_function(lambda i, o=out_shape, s=st: fn(i, o, s), [((i,), expected[i]) for i in range(expected.size)],
                       name=f"my_offset_of(i, {out_shape}, {st})")


def groups_check(fn: Callable[..., Any], idle_threads: Any) -> None:
    """``fn(numel)``: the workgroup grid for ``numel`` threads in groups of 256; ``idle_threads`` for 10**6."""
    from ..backends import wgpu_kernels as wk

    original = wk.groups_for
    _refuse_borrowed(fn, "my_groups", original)
    sizes = (1, 15, 256, 257, 10 ** 6, 65535 * 256, 65535 * 256 + 1, 40_000_000, 123_456_789)
    expected = [np.array(original(-(-n // 256))) for n in sizes]
    why = "compute the grid yourself"
    with without(attrs=[(wk, "groups_for")], why=why), refusing_calls("my_groups", original, why=why):
        check_function(fn, [((n,), e) for n, e in zip(sizes, expected)], name="my_groups")
    gx, gy, _ = wk.groups_for(-(-10 ** 6 // 256))
    check_equal(idle_threads, gx * gy * 256 - 10 ** 6, name="idle_threads",
                hint="threads launched (groups x 256) minus the 10**6 elements")


# --- lesson 12: max pooling routes the gradient --------------------------------------------------------

def _max_pool_grad(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """d/dx of sum(max_pool2d(x, 2) * g) for a 2-D image: autograd's own answer, the library's first-maximum rule."""
    import asgteach as at

    with at.Graph(name="check: max pool"):
        xi = at.input("x", (1, 1) + x.shape)
        gi = at.input("g", (1, 1) + g.shape)
        (d,) = at.grad(at.sum(at.max_pool2d(xi, 2) * gi), [xi])
    return at.run(d, {xi: x.reshape((1, 1) + x.shape), gi: g.reshape((1, 1) + g.shape)})[0, 0]


def max_pool_routing(dX: Any, x: np.ndarray, g: np.ndarray) -> None:
    """Lesson 12: d/dx of sum(max_pool2d(x, 2) * g), worked out by hand; the check asks autograd itself."""
    x, g = np.asarray(x, dtype=np.float64), np.asarray(g, dtype=np.float64)
    check_array(dX, _max_pool_grad(x, g), name="dX5")


def _pool_images(rng: np.random.Generator) -> list[np.ndarray]:
    """Images the lesson never showed, each a trap for one way of getting the routing wrong."""
    def size() -> tuple[int, int]:
        h, w = rng.integers(1, 5, size=2)
        return int(2 * h), int(2 * w)

    crossed = rng.integers(0, 3, size=(4, 8)).astype(np.float64)
    crossed[0:2, 0:2] = [[0.0, 5.0], [5.0, 0.0]]   # by rows (0, 1) wins, by columns (1, 0) would
    crossed[2:4, 4:6] = 7.0                        # a window of four equal values: only its first pixel
    negative = -rng.integers(1, 4, size=(2, 6)).astype(np.float64)
    negative[:, 2:4] = [[-2.0, -1.0], [-1.0, -3.0]]   # a maximum that starts at 0 never finds (0, 1)
    return [
        rng.integers(0, 3, size=size()).astype(np.float64),           # small integers: ties everywhere
        crossed,
        negative,
        rng.standard_normal(size()),                                  # no ties at all
    ]


def max_pool_grad_check(fn: Callable[[np.ndarray, np.ndarray], Any]) -> None:
    """Lesson 12: ``fn(x, g)``, a 2x2 max pool's gradient (stride 2) by hand, on images of the check's own.

    Compared with the library's own gradient (computed first; the pool's ops are switched off while
    ``fn`` runs) on sizes the lesson never used, with ties at random, a window whose first maximum
    by rows is not its first by columns, four equal values, and an image of negative numbers. The
    exercise's rule (no asgteach) is read from ``fn``'s source: a function returning the lesson's
    ``dX5`` typed in fails on the other images, one handing the work to autograd on its source.
    """
    if not callable(fn):
        raise ExerciseError(f"max_pool_grad should be a function max_pool_grad(x, g), got {type(fn).__name__}")
    enforce(fn, rule_for("12-convolution-and-pooling", 3), "max_pool_grad")
    rng = _fresh()
    cases = []
    for x in _pool_images(rng):
        g = rng.standard_normal((x.shape[0] // 2, x.shape[1] // 2))
        cases.append(((x, g), _max_pool_grad(x, g)))
    with without("max_pool2d", "max_pool2d_grad", "max_pool2d_gather", why="route the gradient by hand, in numpy"):
        check_function(fn, cases, name="max_pool_grad", rtol=1e-12, atol=1e-12,
                       hint="each window's gradient goes to ONE pixel: its first maximum, reading the window row "
                            "by row (np.argmax of the flattened window finds it); on a tie the others get 0, and "
                            "the maximum starts from the window's own values (the image may be negative)")


# --- lesson 13: memory planning, checked on plans of the check's own -----------------------------------

def show_fusion(plan: Any) -> None:
    """Print the fusion chains of ``plan`` and what they would save (lesson 13's section 6)."""
    from . import answer_keys as keys   # the references, loaded only when a check runs
    from ..ops.registry import spec

    g = plan.graph
    chains = keys.fusion_chains(plan)
    for chain in chains:
        print(" -> ".join(f"#{i} {g.nodes[i].op}" for i in chain), f"  (shape {g.nodes[chain[-1]].shape})")
    saved = sum(g.nodes[i].size for i in keys.fusible_values(plan)) * 4
    elementwise = [s for s in plan.steps
                   if spec(s.node.op).category in keys.ELEMENTWISE and s.node.id not in plan.folded]
    print(f"{len(elementwise)} elementwise kernels -> {len(elementwise) - sum(len(c) - 1 for c in chains)} after "
          f"fusion; {saved} bytes never written (and never read back) per run")


def _check_plans() -> list[Any]:
    """Three plans the lesson never showed: another MLP with its gradients, a chain with a fan-out, a tiny one."""
    import asgteach as at

    plans = []
    with at.Graph(name="check: mlp"):
        x, t = at.input("x", (8, 5)), at.input("t", (8, 3))
        w1, w2 = at.parameter("w1", (5, 7)), at.parameter("w2", (7, 3))
        h = at.sigmoid(x @ w1) * 2.0 - 1.0
        loss = at.mean(at.abs(h @ w2 - t))
        plans.append(at.compile([loss, *at.grad(loss, [w1, w2])]))
    with at.Graph(name="check: fan-out"):
        a, b = at.input("a", (6,)), at.input("b", (6,))
        c = at.exp(a) + b
        d = at.tanh(c) * c
        plans.append(at.compile([at.sum(d * d), at.relu(b - a)]))
    with at.Graph(name="check: tiny"):
        u = at.input("u", (3, 4))
        plans.append(at.compile([at.sum(at.sqrt(u * u + 1.0), axis=0)]))
    return plans


def memory_check(fn: Callable[..., Any]) -> None:
    """``fn(plan, itemsize) -> (peak bytes alive, bytes if nothing were freed)``, on other plans and item sizes."""
    from . import answer_keys as keys   # the references, loaded only when a check runs
    cases = [(p, itemsize, (keys.peak_bytes(p, itemsize), keys.no_reuse_bytes(p, itemsize)))
             for p in _check_plans() for itemsize in (8, 2)]
    with refusing_calls("memory_bytes"):            # the answer runs after the references, which it may not call
        for p, itemsize, want in cases:
            check_function(fn, [((p, itemsize), want)], name=f"memory_bytes(<plan of {p.graph.name!r}>, {itemsize})")


def last_use_check(fn: Callable[..., Any]) -> None:
    """``fn(plan) -> {node id: index of the last step reading it}``, on plans the lesson never printed."""
    from . import answer_keys as keys   # the references, loaded only when a check runs
    for p in _check_plans():
        expected = keys.last_use(p)
        with refusing_calls("my_last_use"):
            mine = fn(p)
        if not isinstance(mine, Mapping):
            raise ExerciseError(f"my_last_use(plan) should return a dict {{node id: step index}}, got "
                                f"{type(mine).__name__}")
        check_equal(sorted(mine), sorted(expected), name=f"the nodes in my_last_use(<plan of {p.graph.name!r}>)")
        for node_id, k in expected.items():
            check_equal(mine[node_id], k, name=f"my_last_use(<plan of {p.graph.name!r}>)[{node_id}] "
                                               f"(node #{node_id} {p.graph.nodes[node_id].op})")


def _fusible_readings(p: Any) -> list[list[int]]:
    """The fusible values of plan ``p`` by both readings of "read by exactly one step" (the first: the reference's).

    The reference counts reads: ``d * d`` reads ``d`` twice, so ``d`` is written. Counted by steps, ``d * d`` is
    one elementwise step of ``d``'s shape, and ``d`` need not be written: the GPU's pass ``chains``, which counts
    the nodes reading a value, fuses it. The exercise's words allow both, so the check accepts both.
    """
    from . import answer_keys as keys   # the references, loaded only when a check runs
    from ..ops.registry import spec

    by_reads, users = keys.fusible_values(p), keys.consumers(p)
    by_steps = []
    for step in p.steps:
        node = step.node
        readers = list({n.id: n for n in users.get(node.id, [])}.values())   # each reading step once
        if (spec(node.op).category in keys.ELEMENTWISE and node.id not in p.outputs and node.id not in p.folded
                and len(readers) == 1 and spec(readers[0].op).category in keys.ELEMENTWISE
                and readers[0].shape == node.shape):
            by_steps.append(node.id)
    return [by_reads] if by_steps == by_reads else [by_reads, by_steps]


def fusible_check(fn: Callable[..., Any]) -> None:
    """``fn(plan) -> [node ids a fusing compiler would never write]`` in plan order, on plans of the check's own.

    A value that one step reads twice (``d * d``) may count as read once or twice (:func:`_fusible_readings`).
    """
    for p in _check_plans():
        readings = _fusible_readings(p)
        with refusing_calls("my_fusible"):
            got = fn(p)
        if not isinstance(got, (list, tuple)):
            raise ExerciseError(f"my_fusible(plan) should return a list of node ids, got {type(got).__name__}")
        mine = [int(i) for i in got]
        if mine in readings[1:]:
            continue
        check_equal(mine, readings[0], name=f"my_fusible(<plan of {p.graph.name!r}>)",
                    hint="in plan order: elementwise, not an output, not folded, read by exactly one elementwise "
                         "step of the same shape" + (" (a value that one step reads twice, as d * d does, may count "
                                                     "as read once or twice)" if len(readings) > 1 else ""))
