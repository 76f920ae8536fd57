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

Defaults follow PyTorch's ``torch.autograd.gradcheck``: eps 1e-6, atol 1e-5, rtol 1e-3,
float64, the full Jacobian (``fast=True``: a few random directions instead).
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from .autograd import grad
from .backends import compile as _compile
from .backends.numpy_backend import resolve_feeds
from .graph import Graph
from .ops.leaves import input as _input
from .ops.registry import apply, spec
from .tensor import Tensor

__all__ = ["gradcheck", "GradcheckReport", "InputCheck", "NodeCheck"]


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
            if self.culprits:
                lines.append("  the backward rule that is wrong:")
                lines.extend(f"    {c}" for c in self.culprits)
            else:
                lines.append("  every node's own rule checks out locally; look at how gradients are combined "
                             "(accumulation at fan-out) or at kinks (relu/abs/max at exactly 0 or a tie)")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        colour = "#1a7f37" if self.ok else "#cf222e"
        rows = "".join(
            f"<tr><td>{html.escape(c.name)}</td><td>{c.shape}</td><td style='color:{'#1a7f37' if c.ok else '#cf222e'}'>"
            f"{'ok' if c.ok else 'FAIL'}</td><td>{c.max_abs_err:.3g}</td><td>{c.max_rel_err:.3g}</td>"
            f"<td>{html.escape(str(list(c.worst_index)) if c.worst_index is not None else '-')}</td>"
            f"<td>{c.numerical:.6g}</td><td>{c.analytical:.6g}</td></tr>"
            for c in self.inputs
        )
        culprits = "".join(f"<li>{html.escape(str(c))}</li>" for c in self.culprits)
        return (
            f"<div class='asgteach-gradcheck'><b style='color:{colour}'>gradcheck "
            f"{'passed' if self.ok else 'FAILED'}</b> <small>({self.mode}, eps={self.eps:g}, atol={self.atol:g}, "
            f"rtol={self.rtol:g}, float64)</small><table><tr><th>input</th><th>shape</th><th>verdict</th>"
            f"<th>max abs err</th><th>max rel err</th><th>worst element</th><th>numerical</th>"
            f"<th>analytical</th></tr>{rows}</table>"
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
        from .widgets.plots import gradcheck_figure

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
        progress: a tqdm bar over the graph evaluations. ``None`` (default): on for long
            checks only, those with more than ``PROGRESS_MIN_EVALUATIONS`` runs of the graph,
            and even then drawn only once the check has taken a second (so quick checks
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
    culprits = [] if ok or not locate else _locate(checker, eps, atol, rtol)
    return GradcheckReport(ok, results, culprits, "fast" if fast else "full", eps, atol, rtol, _probe=checker)


#: ``gradcheck(progress=None)`` shows a bar only for checks with more graph runs than this.
PROGRESS_MIN_EVALUATIONS = 200


def _progress_bar(total: int, progress: bool | None) -> Any:
    """A tqdm bar (notebook widget or terminal) over ``total`` graph runs, or a disabled one."""
    from tqdm.auto import tqdm

    delay = 0.0
    if progress is None:
        progress = total > PROGRESS_MIN_EVALUATIONS and os.environ.get("ASGTEACH_NO_PROGRESS") != "1"
        delay = 1.0  # automatic bars wait a second: a quick check draws nothing (no clutter in notebooks)
    return tqdm(total=total, desc="gradcheck", unit="run", disable=not progress, leave=False, delay=delay)


def _locate(checker: _Checker, eps: float, atol: float, rtol: float) -> list[NodeCheck]:
    """Check every op node's own backward rule at its actual inputs; return those that fail."""
    graph = checker.graph
    nodes = [graph.nodes[i] for i in graph.ancestors([checker.y.node_id]) if not spec(graph.nodes[i].op).leaf]
    values = _compile([Tensor(graph, n.id) for n in nodes]).run(checker.feeds, dtype=np.float64, on_nan="ignore")
    value_of = {n.id: v for n, v in zip(nodes, values)}
    for leaf_id, v in checker.feeds.items():
        value_of[leaf_id] = v
    for nid, v in graph.constants.items():
        value_of[nid] = v.astype(np.float64) if v.dtype.kind == "f" else v
    culprits: list[NodeCheck] = []
    rng = np.random.default_rng(7)
    for node in nodes:
        op = spec(node.op)
        if op.not_differentiable or op.zero_gradient:
            continue
        args = [value_of[i] for i in node.inputs]
        for k, arg in enumerate(args):
            if not op.differentiable_input(k) or arg.dtype.kind != "f":
                continue
            err = _local_error(node.op, node.attrs, args, k, eps, rng)
            scale = atol + rtol * err[1]
            if not np.isfinite(err[0]) or err[0] > scale:
                original = graph.nodes[node.id].meta.get("copied_from", node.id)
                culprits.append(NodeCheck(original, node.op, node.name, node.source, k, float(err[0])))
    return culprits


def _local_error(op_name: str, attrs: dict, args: list[np.ndarray], k: int, eps: float,
                 rng: np.random.Generator) -> tuple[float, float]:
    """(|analytical - numerical|, |numerical|) of u^T J_k v for one op alone, at ``args``."""
    g = Graph("local check")
    with g:
        ins = [_input(f"in{i}", a.shape, dtype="int" if a.dtype.kind in "iu" else "float") for i, a in enumerate(args)]
        out = apply(op_name, *ins, **attrs)
        seed = _input("seed", out.shape)
        (dk,) = grad(out, [ins[k]], seed=seed)
    f = _compile([out])
    b = _compile([dk])
    worst = (0.0, 0.0)
    for _ in range(2):
        u = rng.standard_normal(out.shape)
        v = rng.standard_normal(args[k].shape)
        base = {t.node_id: a for t, a in zip(ins, args)}
        plus = {**base, ins[k].node_id: args[k] + eps * v}
        minus = {**base, ins[k].node_id: args[k] - eps * v}
        num = float(np.sum(u * (f.run(plus, dtype=np.float64, on_nan="ignore")[0]
                                - f.run(minus, dtype=np.float64, on_nan="ignore")[0]))) / (2 * eps)
        ana = float(np.sum(b.run({**base, seed.node_id: u}, dtype=np.float64, on_nan="ignore")[0] * v))
        err = abs(ana - num)
        if not err <= worst[0]:
            worst = (err, abs(num))
    return worst
