"""Gradient checking: is the backward graph right? Ask the forward graph.

The derivative is a limit, ``f'(x) = lim (f(x + h) - f(x - h)) / 2h``. With a small but
finite ``h`` (``eps``) the *central difference* approximates it with an error of order
h^2 (truncation) plus roughly machine-epsilon / h (round-off). In float64 with
``eps = 1e-6`` both are tiny, so the numerical gradient is a trustworthy oracle for the
analytical one that autograd built — which is exactly how bugs in backward rules are
found (RustyASG's author found his ``div`` bug this way).

``gradcheck`` compares the two. When they disagree it does not stop at "something is
wrong": it re-checks every node's backward rule *on its own*, with that node's actual
input values, and names the node(s) whose rule is wrong.

A finite difference can also be wrong *honestly*: at a kink (relu at 0, abs at 0, a tie in
max) the function has no derivative, the central difference averages the slopes on the two
sides, and any backward rule must pick one of them. When a check fails, ``gradcheck`` looks
at how every node's output changes along the step it took and, where the slope jumps inside
that step, says so ("x[0] is at a non-differentiable point of relu") instead of blaming
relu's backward rule. The test needs no list of ops: it watches the op's own kernel.

Defaults follow PyTorch's ``torch.autograd.gradcheck``: eps 1e-6, atol 1e-5, rtol 1e-3,
float64, the full Jacobian (``fast=True``: a few random directions instead).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from .autograd import grad
from .backends import compile as _compile
from .backends.common import resolve_feeds
from .graph import Graph
from .ops.leaves import input as _input
from .ops.registry import apply, spec
from .progress import Progress
from .tensor import Tensor
from .usertext import NO_MATH, plain_text, user_text

__all__ = ["gradcheck", "GradcheckReport", "InputCheck", "NodeCheck", "KinkNote"]


@dataclass
class InputCheck:
    """The comparison for one input x: how far analytical d y/d x is from numerical."""

    name: str
    shape: tuple[int, ...]
    ok: bool
    max_abs_err: float
    max_rel_err: float
    worst_index: tuple[int, ...] | None      # element of x (full mode) with the largest violation
    worst_output: tuple[int, ...] | None     # element of y it was measured on
    numerical: float
    analytical: float
    numerical_jacobian: np.ndarray | None = field(default=None, repr=False)
    analytical_jacobian: np.ndarray | None = field(default=None, repr=False)


@dataclass
class NodeCheck:
    """A node whose own backward rule disagrees with finite differences of its own kernel."""

    node_id: int
    op: str
    name: str
    source: str
    input_index: int
    max_abs_err: float

    def __str__(self) -> str:
        return (f"node #{self.node_id} {self.op} '{self.name}' (created at {self.source}): its backward rule "
                f"for input {self.input_index} is off by up to {self.max_abs_err:.3g}")


@dataclass
class KinkNote:
    """A node whose op is not differentiable somewhere inside the finite-difference step.

    ``where`` names what was moved (``"x[0]"``, a few such elements, or ``"x"`` for the random
    direction of fast mode). ``left`` and ``right`` are the one-sided slopes of the node's
    output (its element whose slope changes most) along that move, per unit of the moved
    value; ``jump`` is how far the output leaps across the step when the op is not even
    continuous there (``greater``, ``sign``), else 0.
    """

    node_id: int
    op: str
    name: str
    source: str
    where: str
    left: float
    right: float
    jump: float = 0.0
    count: int = 1  # how many elements ``where`` names

    def __str__(self) -> str:
        verb = "are" if self.count > 1 else "is"
        head = (f"{self.where} {verb} at a non-differentiable point of {self.op} (node #{self.node_id} "
                f"'{self.name}', created at {self.source}): ")
        if self.jump:
            what = (f"within ±eps the output of {self.op} jumps by {self.jump:.4g}, so the central difference "
                    f"measures the jump, not a slope")
        else:
            what = (f"within ±eps the slope of {self.op}'s output jumps from {self.left:.4g} to {self.right:.4g}; "
                    f"the central difference averages the two sides while the backward rule picks one")
        return head + what + ". This is not a wrong backward rule: check at a point away from it"


@dataclass
class GradcheckReport:
    """What ``gradcheck`` found. ``ok`` is the verdict; ``culprits`` names wrong rules."""

    ok: bool
    inputs: list[InputCheck]
    culprits: list[NodeCheck]
    mode: str
    eps: float
    atol: float
    rtol: float
    _probe: Any = field(default=None, repr=False)
    #: nodes whose op has a kink inside the finite-difference step (see :class:`KinkNote`)
    kinks: list[KinkNote] = field(default_factory=list)

    @property
    def worst(self) -> InputCheck:
        """The input with the largest error relative to the tolerance."""
        return max(self.inputs, key=lambda c: c.max_abs_err / (self.atol + self.rtol * abs(c.numerical)))

    def summary(self) -> str:
        lines = [f"gradcheck {'PASSED' if self.ok else 'FAILED'} ({self.mode} mode, eps={self.eps:g}, "
                 f"atol={self.atol:g}, rtol={self.rtol:g}, float64)"]
        for c in self.inputs:
            at = f" worst at {c.name}{list(c.worst_index)}" if c.worst_index is not None else ""
            lines.append(f"  {'ok ' if c.ok else 'BAD'} d/d{c.name} {c.shape}: max |analytical - numerical| = "
                         f"{c.max_abs_err:.3g} (rel {c.max_rel_err:.3g});{at} numerical {c.numerical:.6g} "
                         f"vs analytical {c.analytical:.6g}")
        if not self.ok:
            if self.kinks:
                lines.append("  the finite difference straddles a kink:")
                lines.extend(f"    {k}" for k in self.kinks)
            if self.culprits:
                lines.append("  the backward rule that is wrong:")
                lines.extend(f"    {c}" for c in self.culprits)
            elif not self.kinks:
                lines.append("  every node's own rule checks out locally: what is wrong is how the rules' results are "
                             "put together, or a kink (relu/abs/max at exactly 0 or a tie)")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        colour = "#1a7f37" if self.ok else "#cf222e"
        rows = "".join(
            f"<tr><td>{user_text(c.name)}</td><td>{c.shape}</td><td style='color:{'#1a7f37' if c.ok else '#cf222e'}'>"
            f"{'ok' if c.ok else 'FAIL'}</td><td>{c.max_abs_err:.3g}</td><td>{c.max_rel_err:.3g}</td>"
            f"<td>{html.escape(str(list(c.worst_index)) if c.worst_index is not None else '-')}</td>"
            f"<td>{c.numerical:.6g}</td><td>{c.analytical:.6g}</td></tr>"
            for c in self.inputs
        )
        culprits = "".join(f"<li>{plain_text(str(c))}</li>" for c in self.culprits)
        kinks = "".join(f"<li>{plain_text(str(k))}</li>" for k in self.kinks)
        return (
            f"<div class='asgteach-gradcheck {NO_MATH}'><b style='color:{colour}'>gradcheck "
            f"{'passed' if self.ok else 'FAILED'}</b> <small>({self.mode}, eps={self.eps:g}, atol={self.atol:g}, "
            f"rtol={self.rtol:g}, float64)</small><table><tr><th>input</th><th>shape</th><th>verdict</th>"
            f"<th>max abs err</th><th>max rel err</th><th>worst element</th><th>numerical</th>"
            f"<th>analytical</th></tr>{rows}</table>"
            + (f"<p>At a kink (not a wrong rule):</p><ul>{kinks}</ul>" if kinks else "")
            + (f"<p>Wrong backward rule:</p><ul>{culprits}</ul>" if culprits else "") + "</div>"
        )

    def error_vs_eps(self, eps_values: Sequence[float] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """|numerical - analytical| of one directional derivative for a range of eps.

        Large eps: truncation error (~eps^2) dominates; tiny eps: round-off (~1e-16/eps).
        The sweet spot in between is why gradcheck uses eps around 1e-6 in float64.
        """
        eps_values = np.logspace(-1, -13, 25) if eps_values is None else np.asarray(eps_values, dtype=float)
        errors = np.array([self._probe.directional_error(float(e)) for e in eps_values])
        return eps_values, errors

    def plot(self) -> Any:
        """A matplotlib figure: numerical vs analytical per input, and error vs eps."""
        from .plots import gradcheck_figure

        return gradcheck_figure(self)


class _Checker:
    """The compiled forward and backward plans of a private copy of the user's graph."""

    def __init__(self, y: Tensor, xs: list[Tensor], feeds: Mapping[Any, Any]) -> None:
        graph, mapping = y.graph.extract([y.node_id, *(x.node_id for x in xs)], name="gradcheck copy")
        self.graph, self.mapping = graph, mapping
        with graph:
            self.y = Tensor(graph, mapping[y.node_id])
            self.xs = [Tensor(graph, mapping[x.node_id]) for x in xs]
            self.seed = _input("gradcheck seed", y.shape, graph=graph)
            self.grads = grad(self.y, self.xs, seed=self.seed)
        self.forward = _compile([self.y])
        self.backward = _compile(self.grads)
        self.feeds: dict[int, np.ndarray] = {}
        for nid, value in resolve_feeds(y.graph, feeds).items():
            if nid in mapping:
                arr = np.asarray(value)
                self.feeds[mapping[nid]] = arr.astype(np.float64) if arr.dtype.kind == "f" else arr
        for x, xt in zip(xs, self.xs):
            if xt.node_id not in self.feeds:
                if x.op not in ("input", "parameter"):
                    raise ValueError(f"gradcheck differentiates with respect to fed values; {x.node.describe()} "
                                     f"is computed, not fed")
                raise ValueError(f"gradcheck needs a value for {x.op} '{x.name}' in feeds")
        self._all_plan: Any = None  # every node's value at once: built on first use (failed checks only)
        rng = np.random.default_rng(12345)
        self._direction = [rng.standard_normal(x.shape) for x in self.xs]
        self._out_dir = rng.standard_normal(self.y.shape)

    def f(self, feeds: dict[int, np.ndarray]) -> np.ndarray:
        return np.asarray(self.forward.run(feeds, dtype=np.float64)[0], dtype=np.float64)

    def vjp(self, u: np.ndarray) -> list[np.ndarray]:
        feeds = {**self.feeds, self.seed.node_id: u}
        return [np.asarray(v, dtype=np.float64) for v in self.backward.run(feeds, dtype=np.float64)]

    def shifted(self, x_index: int, delta: np.ndarray) -> dict[int, np.ndarray]:
        nid = self.xs[x_index].node_id
        return {**self.feeds, nid: self.feeds[nid] + delta}

    def directional_error(self, eps: float) -> float:
        """|(u . (f(x + eps v) - f(x - eps v)) / 2 eps) - u . J v| over all inputs at once."""
        plus = dict(self.feeds)
        minus = dict(self.feeds)
        for x, v in zip(self.xs, self._direction):
            plus[x.node_id] = plus[x.node_id] + eps * v
            minus[x.node_id] = minus[x.node_id] - eps * v
        numerical = float(np.sum(self._out_dir * (self.f(plus) - self.f(minus)))) / (2 * eps)
        analytical = sum(float(np.sum(g * v)) for g, v in zip(self.vjp(self._out_dir), self._direction))
        return abs(numerical - analytical)


def _compare(name: str, shape: tuple, num: np.ndarray, ana: np.ndarray, atol: float, rtol: float,
             full: bool, out_shape: tuple) -> InputCheck:
    diff = np.abs(ana - num)
    violation = diff - (atol + rtol * np.abs(num))
    ok = bool(np.all(violation <= 0)) and bool(np.all(np.isfinite(ana)))
    k = int(np.argmax(np.where(np.isfinite(violation), violation, np.inf))) if diff.size else 0
    worst_index = worst_output = None
    if full and diff.size:
        j, i = np.unravel_index(k, diff.shape)
        worst_output = tuple(int(v) for v in np.unravel_index(j, out_shape)) if out_shape else ()
        worst_index = tuple(int(v) for v in np.unravel_index(i, shape)) if shape else ()
    rel = diff / np.maximum(np.abs(num), 1e-12)
    return InputCheck(
        name=name, shape=shape, ok=ok, max_abs_err=float(diff.max()) if diff.size else 0.0,
        max_rel_err=float(rel.max()) if rel.size else 0.0, worst_index=worst_index, worst_output=worst_output,
        numerical=float(num.flat[k]) if diff.size else 0.0, analytical=float(ana.flat[k]) if diff.size else 0.0,
        numerical_jacobian=num if full else None, analytical_jacobian=ana if full else None,
    )


def gradcheck(
    y: Tensor,
    xs: Tensor | Sequence[Tensor],
    feeds: Mapping[Any, Any],
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    fast: bool = False,
    n_directions: int = 3,
    locate: bool = True,
    progress: bool | None = None,
) -> GradcheckReport:
    """Compare autograd's gradients of ``y`` w.r.t. ``xs`` with central differences (float64).

    Args:
        y: the output (any shape; a non-scalar y is checked through its full Jacobian).
        xs: the fed inputs/parameters to check.
        feeds: values for every input and parameter ``y`` needs (converted to float64).
        fast: check ``n_directions`` random directions u^T J v instead of every entry.
        locate: on failure, check each node's backward rule on its own and name the
            wrong one(s) in ``report.culprits``.
        progress: progress over the graph evaluations: a tqdm bar in a notebook or a terminal,
            a plain line every 10 % in a log (``asgteach.progress``). ``None`` (default): on for
            long checks only, those with more than ``PROGRESS_MIN_EVALUATIONS`` runs of the
            graph, and even then shown only once the check has taken a second (so quick checks
            print nothing); ``ASGTEACH_NO_PROGRESS=1`` turns it off.

    The user's graph is not modified: the check works on a private copy.
    """
    xs_list = [xs] if isinstance(xs, Tensor) else list(xs)
    checker = _Checker(y, xs_list, feeds)
    out_shape = checker.y.shape
    m = int(np.prod(out_shape, dtype=np.int64))
    results: list[InputCheck] = []
    # full mode: one backward run per output element, two forward runs per input element
    evaluations = (m + 2 * sum(x.size for x in checker.xs)) if not fast else 3 * n_directions * len(checker.xs)
    bar = _progress_bar(evaluations, progress)
    if not fast:
        analytical = [np.zeros((m, x.size)) for x in checker.xs]
        for j in range(m):
            u = np.zeros(m)
            u[j] = 1.0
            for k, g in enumerate(checker.vjp(u.reshape(out_shape))):
                analytical[k][j] = g.ravel()
            bar.update(1)
        for k, x in enumerate(checker.xs):
            numerical = np.zeros((m, x.size))
            for i in range(x.size):
                delta = np.zeros(x.size)
                delta[i] = eps
                delta = delta.reshape(x.shape)
                f_plus = checker.f(checker.shifted(k, delta))
                f_minus = checker.f(checker.shifted(k, -delta))
                numerical[:, i] = ((f_plus - f_minus) / (2 * eps)).ravel()
                bar.update(2)
            results.append(_compare(xs_list[k].name, x.shape, numerical, analytical[k], atol, rtol, True, out_shape))
    else:
        rng = np.random.default_rng(0)
        for k, x in enumerate(checker.xs):
            nums, anas = [], []
            for _ in range(n_directions):
                v = rng.standard_normal(x.shape)
                u = rng.standard_normal(out_shape)
                f_plus = checker.f(checker.shifted(k, eps * v))
                f_minus = checker.f(checker.shifted(k, -eps * v))
                nums.append(float(np.sum(u * (f_plus - f_minus))) / (2 * eps))
                anas.append(float(np.sum(checker.vjp(u)[k] * v)))
                bar.update(3)
            results.append(_compare(xs_list[k].name, x.shape, np.array(nums), np.array(anas), atol, rtol, False, ()))
    bar.close()
    ok = all(r.ok for r in results)
    culprits: list[NodeCheck] = []
    kinks: list[KinkNote] = []
    if not ok and locate:
        culprits = _locate(checker, eps, atol, rtol)
        kinks = _straddled_kinks(checker, results, eps, atol)
    return GradcheckReport(ok, results, culprits, "fast" if fast else "full", eps, atol, rtol, _probe=checker,
                           kinks=kinks)


#: ``gradcheck(progress=None)`` shows a bar only for checks with more graph runs than this.
PROGRESS_MIN_EVALUATIONS = 200


def _progress_bar(total: int, progress: bool | None) -> Progress:
    """Progress over ``total`` graph runs: a bar (notebook, terminal), lines (a log) or nothing."""
    if progress is None:  # automatic: long checks only, unless ASGTEACH_NO_PROGRESS=1, and after a second
        return Progress(total, "gradcheck", "run", show=None if total > PROGRESS_MIN_EVALUATIONS else False,
                        leave=False, delay=1.0)  # (a quick check shows nothing: no clutter in notebooks)
    return Progress(total, "gradcheck", "run", show=progress, leave=False)  # asked for: shown, or not


def _locate(checker: _Checker, eps: float, atol: float, rtol: float) -> list[NodeCheck]:
    """Check every op node's own backward rule at its actual inputs; return those that fail."""
    graph = checker.graph
    nodes = _op_nodes(checker)
    value_of = _node_values(checker, checker.feeds)
    culprits: list[NodeCheck] = []
    rng = np.random.default_rng(7)
    # only the rules the checked gradient went through: an input that depends on no x (the
    # constant 2 of x**2) got no gradient, so its rule (d/db a^b, NaN for a < 0) is not in question
    from_x = {x.node_id for x in checker.xs}
    for node in sorted(nodes, key=lambda n: n.id):
        if any(i in from_x for i in node.inputs):
            from_x.add(node.id)
    for node in nodes:
        op = spec(node.op)
        if op.not_differentiable or op.zero_gradient:
            continue
        args = [value_of[i] for i in node.inputs]
        for k, arg in enumerate(args):
            if not op.differentiable_input(k) or arg.dtype.kind != "f" or node.inputs[k] not in from_x:
                continue
            err = _local_error(node.op, node.attrs, args, k, eps, rng, atol, rtol)
            scale = atol + rtol * err[1]
            if not np.isfinite(err[0]) or err[0] > scale:
                original = graph.nodes[node.id].meta.get("copied_from", node.id)
                culprits.append(NodeCheck(original, node.op, node.name, node.source, k, float(err[0])))
    return culprits


def _local_error(op_name: str, attrs: dict, args: list[np.ndarray], k: int, eps: float,
                 rng: np.random.Generator, atol: float = 1e-5, rtol: float = 1e-3) -> tuple[float, float]:
    """(|analytical - numerical|, |numerical|) of u^T J_k v for one op alone, at ``args``."""
    g = Graph("local check")
    with g:
        ins = [_input(f"in{i}", a.shape, dtype="int" if a.dtype.kind in "iu" else "float") for i, a in enumerate(args)]
        out = apply(op_name, *ins, **attrs)
        seed = _input("seed", out.shape)
        (dk,) = grad(out, [ins[k]], seed=seed)
    f = _compile([out])
    b = _compile([dk])
    base = {t.node_id: a for t, a in zip(ins, args)}

    def along(v: np.ndarray, t: float) -> np.ndarray:
        return np.asarray(f.run({**base, ins[k].node_id: args[k] + t * v}, dtype=np.float64, on_nan="ignore")[0])

    worst = (0.0, 0.0)
    for _ in range(2):
        u = rng.standard_normal(out.shape)
        v = rng.standard_normal(args[k].shape)
        num_out = (along(v, eps) - along(v, -eps)) / (2 * eps)
        ana_in = b.run({**base, seed.node_id: u}, dtype=np.float64, on_nan="ignore")[0]
        num, ana = float(np.sum(u * num_out)), float(np.sum(ana_in * v))
        err = abs(ana - num)
        if not err <= atol + rtol * abs(num):
            # Before blaming the rule: is the op's output kinked inside the step? Those output
            # elements have no derivative to compare with; judge the rule on the others only.
            kinked = _kinks_along([along(v, eps * t) for t in _GRID], eps)[0]
            if kinked.any():
                u = np.where(kinked.reshape(np.shape(u)), 0.0, u)
                ana_in = b.run({**base, seed.node_id: u}, dtype=np.float64, on_nan="ignore")[0]
                num, ana = float(np.sum(u * num_out)), float(np.sum(ana_in * v))
                err = abs(ana - num)
        if not err <= worst[0]:
            worst = (err, abs(num))
    return worst


# --- kinks: where a finite difference cannot be trusted ---------------------------------------
#: points of the step [-eps, +eps] (in units of eps) at which a kink search evaluates the kernel
_GRID = np.linspace(-1.0, 1.0, 9)


def _kinks_along(outs: list[np.ndarray], eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Which output elements bend (or leap) along a step, given the outputs at the ``_GRID`` points.

    Between neighbouring points the slope is measured (8 slopes). A smooth function's slope
    changes a little and evenly from one piece to the next (by its curvature times the piece);
    at a kink it changes *suddenly*, in one piece, by the size of the corner. So an element is
    kinked when its largest slope change is far above its typical one and above round-off.
    A kink keeps every slope between the two one-sided ones; a *jump* (a discontinuity) shows
    as one piece far steeper than both ends.

    Returns (kinked, left slope, right slope, jump), each of the output's shape; slopes are per
    unit of the moved value (the step is ``eps``), ``jump`` is the leap of a discontinuity or 0.
    """
    f = np.stack([np.asarray(o, dtype=np.float64).reshape(-1) for o in outs])  # (points, outputs)
    h = (_GRID[1] - _GRID[0]) * eps
    with np.errstate(invalid="ignore", over="ignore"):
        slopes = np.diff(f, axis=0) / h                       # (pieces, outputs)
        change = np.abs(np.diff(slopes, axis=0))              # (pieces - 1, outputs)
        biggest = change.max(axis=0)
        typical = np.median(change, axis=0)
        ends = np.maximum(np.abs(slopes[0]), np.abs(slopes[-1]))
        # what round-off alone does to a slope: a few ulps of f, divided by the piece ...
        noise = 64 * np.finfo(np.float64).eps * (1.0 + np.abs(f).max(axis=0)) / h
        # ... and a corner too small to matter (below atol-size it cannot explain a failed check)
        floor = 1e-5 * (1.0 + ends)
        kinked = np.isfinite(biggest) & (biggest > 10 * typical + noise) & (biggest > floor)
        leaps = kinked & (np.abs(slopes).max(axis=0) > 4 * ends + floor)
        jump = np.where(leaps, f[-1] - f[0], 0.0)
    shape = np.shape(outs[0])
    return kinked.reshape(shape), slopes[0].reshape(shape), slopes[-1].reshape(shape), jump.reshape(shape)


def _op_nodes(checker: _Checker) -> list:
    graph = checker.graph
    return [graph.nodes[i] for i in graph.ancestors([checker.y.node_id]) if not spec(graph.nodes[i].op).leaf]


def _node_values(checker: _Checker, feeds: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
    """Every value of the checked graph at ``feeds``: op nodes, leaves and constants, float64."""
    graph = checker.graph
    nodes = _op_nodes(checker)
    if checker._all_plan is None:
        checker._all_plan = _compile([Tensor(graph, n.id) for n in nodes])
    values = checker._all_plan.run(feeds, dtype=np.float64, on_nan="ignore")
    value_of = {n.id: v for n, v in zip(nodes, values)}
    for leaf_id, v in feeds.items():
        value_of[leaf_id] = v
    for nid, v in graph.constants.items():
        value_of[nid] = v.astype(np.float64) if v.dtype.kind == "f" else v
    return value_of


#: at most this many failing elements of each input are searched for kinks
KINK_SEARCH_ELEMENTS = 8


def _straddled_kinks(checker: _Checker, results: list[InputCheck], eps: float, atol: float) -> list[KinkNote]:
    """Nodes whose op has a kink inside the finite-difference steps of the failing elements.

    For a failing element x[i], gradcheck evaluated y at x +- eps e_i. Every node's inputs
    moved with it, from ``a-`` to ``a+``. Walk each node's own kernel along that segment
    (``_GRID``) and look for a sudden change of slope (``_kinks_along``). Nothing here knows
    relu or abs: a kink is whatever the kernel does. In fast mode the step is the random
    direction gradcheck used, so the note names the whole input.
    """
    found: dict[int, list[tuple[str, KinkNote]]] = {}
    nodes = [n for n in _op_nodes(checker) if not spec(n.op).not_differentiable and n.dtype == "float"]
    base = _node_values(checker, checker.feeds)
    for k, check in enumerate(results):
        if check.ok:
            continue
        x = checker.xs[k]
        steps: list[tuple[str, np.ndarray]] = []
        if check.numerical_jacobian is not None and check.analytical_jacobian is not None:
            bad = ~(np.abs(check.analytical_jacobian - check.numerical_jacobian) <= atol)  # NaN counts as bad
            for i in np.flatnonzero(bad.any(axis=0))[:KINK_SEARCH_ELEMENTS]:
                index = tuple(int(j) for j in np.unravel_index(int(i), x.shape)) if x.shape else ()
                delta = np.zeros(x.shape)
                delta[index] = eps
                steps.append((f"{check.name}{list(index)}" if x.shape else check.name, delta))
        else:
            steps.append((check.name, eps * checker._direction[k]))
        for where, delta in steps:
            plus = _node_values(checker, checker.shifted(k, delta))
            minus = _node_values(checker, checker.shifted(k, -delta))
            for node in nodes:
                note = _kink_at(node, base, plus, minus, eps, where)
                if note is not None:
                    found.setdefault(node.id, []).append((where, note))
    notes = []
    for hits in found.values():  # one note per node, naming every element that reached its kink
        names = [w for w, _ in hits]
        note = hits[0][1]
        if len(names) > 3:
            note.where = ", ".join(names[:3]) + f" and {len(names) - 3} more"
        elif len(names) > 1:
            note.where = ", ".join(names[:-1]) + " and " + names[-1]
        note.count = len(names)
        notes.append(note)
    return notes


def _kink_at(node: Any, base: dict, plus: dict, minus: dict, eps: float, where: str) -> KinkNote | None:
    """A KinkNote if ``node``'s kernel bends inside the segment its inputs travelled, else None.

    Inputs that take no gradient (``where``'s condition) are decisions made upstream: they
    stay put here, and the op that made the decision (``greater``) is examined itself.
    """
    op = spec(node.op)
    moved = {i for k, i in enumerate(node.inputs)
             if np.asarray(base[i]).dtype.kind == "f" and (op.zero_gradient or op.differentiable_input(k))
             and not np.array_equal(plus[i], minus[i])}
    if not moved:
        return None

    def at(t: float) -> np.ndarray:
        args = [base[i] + t * (plus[i] - minus[i]) / 2 if i in moved else base[i] for i in node.inputs]
        return op.numpy(*args, **node.attrs)

    with np.errstate(all="ignore"):
        outs = [at(float(t)) for t in _GRID]
    kinked, left, right, jump = (a.reshape(-1) for a in _kinks_along(outs, eps))
    if not kinked.any():
        return None
    j = int(np.argmax(np.where(kinked, np.abs(right - left) + np.abs(jump), -1.0)))
    original = node.meta.get("copied_from", node.id)
    return KinkNote(original, node.op, node.name, node.source, where, float(left[j]), float(right[j]), float(jump[j]))
