"""Lesson 3's checks (the chain rule and reverse mode), with their answers kept inside them.

* Exercise 1, ``chain_rule_grads(p, q)``: :func:`chain_rule_by_hand` calls it at fresh points and wants
  the derivatives of g = (p + q) tanh(p) exact to round-off. Finite differences agree to 6-10 digits
  only, so the tolerance tells the chain rule from a difference quotient, and the message says which
  one the answer looks like. ``RULES[1]`` (numpy only: no asgteach, no symbolic or complex-step
  derivative) is read from the function's source.
* Exercise 2, ``MORE_RULES``: :func:`more_rules_check` runs reverse mode with the student's rules on
  h = e^p / (p - q) - q, a sweep of the check's own (the notebook's ``backward`` is the student's to
  change), and compares every forward node's gradient with ``at.grad``'s.
* Exercise 3, the bug hunt: :func:`fanout_check` calls ``fanout_nodes(graph)`` on graphs the lesson
  never printed, and :func:`lost_contribution` calls ``c_lost(A, B)`` at points the lesson never used,
  so a diagnosis typed in from section 5's output cannot pass; the diagnosis itself can.

This file gives the answers away: try the lesson first.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from ..grading.checks import check_array, check_equal, check_function
from ..grading.exercises import ExerciseError
from ..grading.rules import STAND_INS, Rule, enforce
from .common import fresh

__all__ = ["LESSON", "RULES", "chain_rule_by_hand", "more_rules_check", "fanout_check", "lost_contribution"]

LESSON = "03-chain-rule-and-reverse-mode"

#: exercise -> what its answer may not use (the notebook's text states each one)
RULES: dict[int, Rule] = {
    1: Rule(why="numpy only: apply the chain rule node by node (no asgteach, no symbolic or complex-step "
                "derivative)",
            imports=STAND_INS | {"asgteach", "cmath"}, names=frozenset({"at", "asgteach"}), complex_numbers=True),
    2: Rule(why="each rule is its op's derivative, written out (no asgteach, no complex step, no symbolic "
                "derivative)",
            imports=STAND_INS | {"asgteach", "cmath"}, names=frozenset({"at", "asgteach"}), complex_numbers=True),
}

#: op -> (its value at (a, b), its rule's exact contributions for (g, a, b)): what exercise 2's new rules must
#: give, to round-off (the exercise's statement: the three ops it asks for)
_EXACT = {
    "sub": (lambda a, b: a - b, lambda g, a, b: (g, -g)),
    "div": (lambda a, b: a / b, lambda g, a, b: (g / b, -g * a / (b * b))),
    "exp": (lambda a, b: np.exp(a), lambda g, a, b: (g * np.exp(a),)),
}
#: (g, a, b) where exercise 2's rules are called directly
_POINTS = ((1.3, 0.37, -1.9), (-0.6, 12.5, 0.04), (2.0, -7.25, 3.5), (0.9, 30.0, -0.3))


def chain_rule_by_hand(fn: Callable[[float, float], tuple[float, float]], trials: int = 5) -> None:
    """``fn(p, q) -> (dg/dp, dg/dq)`` for g = (p + q) tanh(p), exact to round-off at fresh points.

    Finite differences agree to 6-10 digits only; the chain rule agrees to ~15, so the tight
    tolerance tells the two apart (and the message says which it looks like). The exercise's rule
    (numpy only: no asgteach, no symbolic or complex-step derivative) is read from ``fn``'s source.
    """
    enforce(fn, RULES[1], "chain_rule_grads")
    rng = fresh()
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
    rng = fresh()
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

    enforce_rules(more_rules)
    if not isinstance(more_rules, Mapping):
        raise ExerciseError(f"MORE_RULES should be a dict {{op name: rule}}, got {type(more_rules).__name__}")
    missing = [op for op in ("add", "mul", "tanh", "sub", "div", "exp") if op not in more_rules]
    if missing:
        raise ExerciseError(f"MORE_RULES has no rule for {', '.join(missing)} (it holds all of RULES, plus sub, div "
                            "and exp)")
    rng = fresh()
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
    _exact_rules(more_rules)


def enforce_rules(more_rules: Any) -> None:
    """Exercise 2's rule, read from the source of each new rule that has one (a lambda, a def)."""
    if isinstance(more_rules, Mapping):
        for op in _EXACT:
            if op in more_rules and callable(more_rules[op]):
                try:
                    enforce(more_rules[op], RULES[2], f"MORE_RULES[{op!r}]")
                except (TypeError, OSError):
                    pass          # no source to read here (the judge reads the answer cell instead)


def _exact_rules(more_rules: Mapping) -> None:
    """Each new rule gives its op's derivative to round-off: a finite difference agrees to ~8 digits only."""
    for op, (value, exact) in _EXACT.items():
        for g, a, b in _POINTS:
            out = value(a, b)
            ins = [np.asarray(a), np.asarray(b)][: len(exact(g, a, b))]
            call = f"MORE_RULES[{op!r}](g={g}, ins={[float(v) for v in ins]}, out={out:.6g})"
            try:
                got = more_rules[op](np.asarray(g), ins, np.asarray(out))
            except NotImplementedError:
                raise
            except Exception as e:  # noqa: BLE001 - a rule failing is a finding
                raise ExerciseError(f"{call} raised {type(e).__name__}: {e}") from e
            want = exact(g, a, b)
            try:
                got = [np.asarray(v, dtype=np.float64) for v in got]
            except (TypeError, ValueError):
                raise ExerciseError(f"{call} should give a tuple of {len(want)} numbers, got {got!r:.80}") from None
            if len(got) != len(want):
                raise ExerciseError(f"{call} gives {len(got)} contributions; {op} has {len(want)} input(s)")
            for k, (x, w) in enumerate(zip(got, want)):
                if x.size != 1 or not np.allclose(x, w, rtol=1e-12, atol=0.0):
                    raise ExerciseError(
                        f"{call}: contribution {k} is {np.ravel(x)[:1]}, the derivative gives {float(w):.17g}. A rule "
                        "is the derivative written out, exact to round-off; a number measured by a finite "
                        "difference agrees to about 8 digits only")
