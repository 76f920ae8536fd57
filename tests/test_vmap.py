"""at.vmap (issue 35, item 2): a batch axis as a graph-to-graph transformation.

The oracle is always asgteach itself, one example at a time: the same graph run once per example
(numpy, float64), the results stacked. Every op case of tests/opcases.py is batched with its
inputs batched along axis 0, along axis 1, and partly shared (in_axes None), its output placed at
out_axes 0 and -1; per-example gradients (vmap of a function that calls at.grad) are checked for
every differentiable case the same way. Then the issue's compositions: per-example gradients of a
small network, a whole Jacobian from one vmap of a VJP over the rows of the identity, vmap of vmap;
the node count that does not depend on the batch size; the error for an op without a batching rule;
and the GPU against numpy.
"""

from __future__ import annotations

import zlib
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import asgteach as at
from asgteach.ops import REGISTRY, GPU, OpSpec, batch_elementwise, registered
from asgteach.ops.registry import apply

from opcases import CASES
from test_random_graphs import random_graphs

B = 3
RNG = np.random.default_rng(35)
BATCHED_CASES = [c for c in CASES if REGISTRY[c.op].batch is not None]
DIFF_CASES = [c for c in BATCHED_CASES if REGISTRY[c.op].not_differentiable is None]


# --- a case's graph as a function of its leaves, and a batch of values for each leaf -----------------------
def _as_function(built: Any) -> tuple[Callable[..., at.Tensor], list[at.Tensor]]:
    """The case's graph re-built from arguments, one per fed leaf (the function vmap gets)."""
    return _replay(built.graph, built.y, list(built.feeds))


def _replay(g: at.Graph, y: at.Tensor, leaves: list[at.Tensor]) -> tuple[Callable[..., at.Tensor], list[at.Tensor]]:
    def fn(*args: at.Tensor) -> at.Tensor:
        env = {t.node_id: a for t, a in zip(leaves, args)}
        for i in g.ancestors([y.node_id]):
            if i in env:
                continue
            node = g.nodes[i]
            if node.op == "constant":
                env[i] = at.constant(g.constants[i])
            else:
                env[i] = apply(node.op, *(env[j] for j in node.inputs), **node.attrs)
        return env[y.node_id]

    return fn, leaves


def _examples(value: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """B versions of a leaf's value: floats scaled by 1 +- 5% (no new ties or kinks, same signs), ids permuted."""
    if value.dtype.kind == "f":
        return np.stack([value * rng.uniform(0.95, 1.05, value.shape) for _ in range(B)])
    return np.stack([rng.permutation(value.reshape(-1)).reshape(value.shape) for _ in range(B)])


def _layouts(leaves: list[at.Tensor]) -> dict[str, list[Any]]:
    """in_axes to try: everything batched on axis 0; on axis 1 where an example has one; the first leaf
    shared and the others batched; only the first leaf batched."""
    out: dict[str, list[Any]] = {
        "in0": [0] * len(leaves),
        "in1": [1 if t.ndim >= 1 else 0 for t in leaves],
    }
    if len(leaves) > 1:
        out["first shared"] = [None] + [0] * (len(leaves) - 1)
        out["only first batched"] = [0] + [None] * (len(leaves) - 1)
    return out


def _feeds_of(leaves: list[at.Tensor], examples: list[np.ndarray], axes: list[Any], i: int,
              built: Any) -> dict[at.Tensor, np.ndarray]:
    """The case's own feeds for example i: a batched leaf's i-th version, a shared leaf's original value."""
    return {t: (ex[i] if ax is not None else built.feeds[t]) for t, ex, ax in zip(leaves, examples, axes)}


def _batched_call(built: Any, fn: Callable, axes: list[Any], out_axes: int, examples: list[np.ndarray]):
    """vmap(fn) on batched leaves in a fresh graph; returns (outputs, feeds, graph)."""
    _, leaves = _as_function(built)
    with at.Graph("batched") as g:
        args, feeds = [], {}
        for k, (t, ex, ax) in enumerate(zip(leaves, examples, axes)):
            value = built.feeds[t] if ax is None else np.moveaxis(ex, 0, ax)   # the batch axis where in_axes says
            a = at.input(f"a{k}", value.shape, dtype=t.dtype)
            feeds[a] = value
            args.append(a)
        out = at.vmap(fn, in_axes=axes, out_axes=out_axes)(*args)
    return out, feeds, g


@pytest.mark.parametrize("out_axes", [0, -1])
@pytest.mark.parametrize("c", BATCHED_CASES, ids=lambda c: c.id)
def test_every_op_batched_equals_one_example_at_a_time(c, out_axes: int) -> None:
    built = c.build()
    fn, leaves = _as_function(built)
    rng = np.random.default_rng(zlib.crc32(c.id.encode()))
    examples = [_examples(built.feeds[t], rng) for t in leaves]
    for label, axes in _layouts(leaves).items():
        out, feeds, _ = _batched_call(built, fn, axes, out_axes, examples)
        got = at.run(out, feeds)
        want = np.stack([at.run(built.y, _feeds_of(leaves, examples, axes, i, built)) for i in range(B)],
                        axis=out_axes)
        assert got.dtype == want.dtype, f"{c.id} {label}"
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, err_msg=f"{c.id} {label} out_axes={out_axes}")


@pytest.mark.parametrize("c", DIFF_CASES, ids=lambda c: c.id)
def test_per_example_gradients_of_every_op(c) -> None:
    """vmap of a function that calls at.grad: the backward graph's ops are batched like any others."""
    built = c.build()
    fn, leaves = _as_function(built)
    rng = np.random.default_rng(zlib.crc32(c.id.encode()) + 1)
    r = rng.standard_normal(built.y.shape)
    wrt = [k for k, t in enumerate(leaves) if any(t is x for x in built.xs)]
    if not wrt:
        pytest.skip(f"{c.id}: nothing to differentiate")

    def grads(*args: at.Tensor) -> list[at.Tensor]:
        return at.grad(at.sum(fn(*args) * at.constant(r)), [args[k] for k in wrt])

    with built.graph:
        want_graph = at.grad(at.sum(built.y * at.constant(r)), [leaves[k] for k in wrt])
    examples = [_examples(built.feeds[t], rng) for t in leaves]
    for label, axes in _layouts(leaves).items():
        if any(axes[k] is None for k in wrt):
            continue   # a gradient with respect to a shared argument is asked through a closure below
        out, feeds, _ = _batched_call(built, grads, axes, 0, examples)
        got = at.run(list(out), feeds)
        for j, _k in enumerate(wrt):
            want = np.stack([at.run(want_graph[j], _feeds_of(leaves, examples, axes, i, built)) for i in range(B)])
            np.testing.assert_allclose(got[j], want, rtol=1e-9, atol=1e-11, err_msg=f"{c.id} {label} d/dx{_k}")


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(random_graphs(), st.data())
def test_random_graphs_batched_equal_one_example_at_a_time(b: Any, data: Any) -> None:
    """tests/test_random_graphs.py's random graphs of registry ops, each input batched or shared at random."""
    fn, leaves = _replay(b.graph, b.out, b.xs)
    axes = [data.draw(st.sampled_from([0, -1, None] if t.ndim else [0, None])) for t in leaves]
    if all(a is None for a in axes):
        axes[0] = 0
    out_axes = data.draw(st.sampled_from([0, -1]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    examples = [rng.uniform(-1.0, 1.0, (B,) + t.shape) for t in leaves]
    with at.Graph("batched"):
        args, feeds = [], {}
        for k, (t, ex, ax) in enumerate(zip(leaves, examples, axes)):
            value = b.feeds[t] if ax is None else np.moveaxis(ex, 0, ax)
            a = at.input(f"a{k}", value.shape)
            feeds[a] = value
            args.append(a)
        out = at.vmap(fn, in_axes=axes, out_axes=out_axes)(*args)
    got = at.run(out, feeds)
    want = np.stack([at.run(b.out, {t: (ex[i] if ax is not None else b.feeds[t]) for t, ex, ax in
                                    zip(leaves, examples, axes)}) for i in range(B)], axis=out_axes)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, err_msg=f"{b.log} in_axes={axes}")


# --- the compositions -------------------------------------------------------------------------------
def _net(x: at.Tensor, w1: at.Tensor, b1: at.Tensor, w2: at.Tensor) -> at.Tensor:
    return at.tanh(x @ w1 + b1) @ w2


def test_per_example_gradients_of_a_network_equal_a_loop_of_grads() -> None:
    """vmap(lambda x, y: grad(loss(w, x, y), [w])): the weights are closed over, the examples batched."""
    n, d, h = 5, 3, 4
    X, Y = RNG.standard_normal((n, d)), RNG.standard_normal((n, 2))
    W1, B1, W2 = RNG.standard_normal((d, h)), RNG.standard_normal(h), RNG.standard_normal((h, 2))
    with at.Graph():
        x, y = at.input("x", (n, d)), at.input("y", (n, 2))
        w1, b1, w2 = at.parameter("w1", (d, h)), at.parameter("b1", (h,)), at.parameter("w2", (h, 2))

        def loss(xi: at.Tensor, yi: at.Tensor) -> at.Tensor:
            return at.mean((_net(xi, w1, b1, w2) - yi) ** 2)

        per = at.vmap(lambda xi, yi: at.grad(loss(xi, yi), [w1, b1, w2]))(x, y)
        total = at.grad(at.sum(at.vmap(loss)(x, y)), [w1, b1, w2])
    params = {w1: W1, b1: B1, w2: W2}
    got = at.run([*per, *total], {x: X, y: Y, **params})
    assert [g.shape for g in got[:3]] == [(n, d, h), (n, h), (n, h, 2)]
    for i in range(n):
        with at.Graph():
            xi, yi = at.input("x", (d,)), at.input("y", (2,))
            p = [at.parameter("w1", (d, h)), at.parameter("b1", (h,)), at.parameter("w2", (h, 2))]
            gi = at.grad(at.mean((_net(xi, *p) - yi) ** 2), p)
        want = at.run(gi, {xi: X[i], yi: Y[i], **dict(zip(p, (W1, B1, W2)))})
        for g, w in zip(got[:3], want):
            np.testing.assert_allclose(g[i], w, rtol=1e-12, atol=1e-14)
    for g_sum, g_total in zip(got[:3], got[3:]):   # the sum of per-example gradients is the batch's gradient
        np.testing.assert_allclose(g_sum.sum(axis=0), g_total, rtol=1e-12, atol=1e-13)


def test_a_layer_called_inside_vmap_gives_per_example_gradients() -> None:
    """An nn layer of the graph, called on the per-example stand-ins of a vmap trace: its parameters are closed over."""
    n = 6
    X, Y = RNG.standard_normal((n, 3)), RNG.standard_normal((n, 1))
    with at.Graph():
        x, y = at.input("x", (n, 3)), at.input("y", (n, 1))
        net = at.nn.MLP([3, 5, 1], activation="tanh", name="mlp")
        params = net.parameters()

        def loss(xi: at.Tensor, yi: at.Tensor) -> at.Tensor:
            return at.sum((net(xi) - yi) ** 2)

        per = at.vmap(lambda xi, yi: at.grad(loss(xi, yi), params))(x, y)
        total = at.grad(at.sum((net(x) - y) ** 2), params)
    values = {p: RNG.standard_normal(p.shape) for p in params}
    got = at.run([*per, *total], {x: X, y: Y, **values})
    k = len(params)
    for g_per, g_total, p in zip(got[:k], got[k:], params):
        assert g_per.shape == (n, *p.shape)
        np.testing.assert_allclose(g_per.sum(axis=0), g_total, rtol=1e-12, atol=1e-13)


def test_a_whole_jacobian_in_one_run_from_vmap_of_a_vjp() -> None:
    """Row i of J is the VJP with seed e_i: vmap over the rows of the identity gives all of J at once."""
    X = RNG.standard_normal(4)
    with at.Graph():
        x = at.input("x", (4,))
        w = at.constant(RNG.standard_normal((4, 3)))
        y = at.softmax(at.tanh(x) @ w) * at.sum(x * x)                       # R^4 -> R^3
        J = at.vmap(lambda seed: at.grad(y, x, seed=seed))(at.constant(np.eye(3)))
        Jt = at.vmap(lambda t: at.jvp(y, x, t), out_axes=1)(at.constant(np.eye(4)))   # columns, by forward mode
        rows = [at.grad(y, x, seed=e) for e in np.eye(3)]
    got, got_t, *want_rows = at.run([J, Jt, *rows], {x: X})
    assert got.shape == (3, 4)
    np.testing.assert_allclose(got, np.stack(want_rows), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(got_t, got, rtol=1e-12, atol=1e-13)
    eps = 1e-6
    fd = np.stack([(at.run(y, {x: X + eps * e}) - at.run(y, {x: X - eps * e})) / (2 * eps) for e in np.eye(4)], axis=1)
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-8)


def test_a_whole_hessian_from_vmap_of_hvp() -> None:
    """grad of grad inside vmap: the Hessian-vector product for every row of the identity."""
    X = RNG.standard_normal(3)
    with at.Graph():
        x = at.input("x", (3,))
        y = at.sum(at.tanh(x) ** 3) * at.sum(x)
        H = at.vmap(lambda v: at.hvp(y, x, v))(at.constant(np.eye(3)))
        g = at.grad(y, x)
    got = at.run(H, {x: X})
    eps = 1e-5
    fd = np.stack([(at.run(g, {x: X + eps * e}) - at.run(g, {x: X - eps * e})) / (2 * eps) for e in np.eye(3)])
    np.testing.assert_allclose(got, fd, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(got, got.T, rtol=1e-13, atol=1e-14)


def test_vmap_of_vmap_nests() -> None:
    X, Wv = RNG.standard_normal((2, 5, 4)), RNG.standard_normal((4, 3))
    with at.Graph():
        x, w = at.input("x", (2, 5, 4)), at.parameter("w", (4, 3))

        def row(r: at.Tensor) -> at.Tensor:          # one row (4,)
            return at.softmax(at.tanh(r @ w)) * at.sum(r)

        both = at.vmap(at.vmap(row))(x)                                   # (2, 5, 3)
        swapped = at.vmap(at.vmap(row), in_axes=1, out_axes=1)(x)         # outer over axis 1: same numbers
        inner_out = at.vmap(at.vmap(row, out_axes=1))(x)                   # (2, 3, 5)
        grads = at.vmap(at.vmap(lambda r: at.grad(at.sum(row(r) ** 2), w)))(x)   # (2, 5, 4, 3)
    got = at.run([both, swapped, inner_out, grads], {x: X, w: Wv})
    e = np.exp(np.tanh(X @ Wv))
    want = e / e.sum(-1, keepdims=True) * X.sum(-1, keepdims=True)
    np.testing.assert_allclose(got[0], want, rtol=1e-13)
    np.testing.assert_allclose(got[1], want, rtol=1e-13)
    np.testing.assert_allclose(got[2], np.swapaxes(want, 1, 2), rtol=1e-13)
    for i in range(2):
        for j in range(5):
            with at.Graph():
                r, wi = at.input("r", (4,)), at.parameter("w", (4, 3))
                out = at.softmax(at.tanh(r @ wi)) * at.sum(r)
                gij = at.grad(at.sum(out ** 2), wi)
            np.testing.assert_allclose(got[3][i, j], at.run(gij, {r: X[i, j], wi: Wv}), rtol=1e-12, atol=1e-14)


def _count_nodes(batch: int) -> int:
    with at.Graph() as g:
        x, y = at.input("x", (batch, 3, 8, 8)), at.input("y", (batch,), dtype="int")
        w = at.parameter("w", (4, 3, 3, 3))
        v = at.parameter("v", (16, 5))
        table = at.parameter("table", (7, 5))

        def loss(xi: at.Tensor, yi: at.Tensor) -> at.Tensor:
            h = at.max_pool2d(at.relu(at.conv2d(xi[None], w, padding=1)), 2)       # (1, 4, 4, 4)
            h = at.layer_norm(at.avg_pool2d(h, 2).reshape(-1))                      # (16,)
            logits = h @ v + at.embedding(yi, table)
            return -at.log_softmax(logits)[0]

        before = len(g)
        at.vmap(lambda xi, yi: at.grad(loss(xi, yi), [w, v, table]))(x, y)
    return len(g) - before


def test_the_nodes_vmap_adds_do_not_grow_with_the_batch() -> None:
    assert _count_nodes(4) == _count_nodes(64) > 0


# --- ops of yours: no rule, the shared rule, a mark, a wrong rule --------------------------------------------
def _elu(**changes: Any) -> OpSpec:
    fields = dict(
        name="elu", category="activation", arity=1, infer=lambda s, **_: s,
        numpy=lambda x, alpha=1.0: np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))),
        vjp=lambda c, g: (g * at.where(c.inputs[0] > 0.0, 1.0, c.out + c.attrs["alpha"]),),
        gpu=GPU(expr="select(alpha * (exp(min(x, 0.0)) - 1.0), x, x > 0.0)"), attrs={"alpha": 1.0},
    )
    return OpSpec(**{**fields, **changes})


def test_an_op_without_a_rule_says_which_and_how_to_add_one() -> None:
    with registered(_elu()):
        with at.Graph() as g:
            x = at.input("x", (4, 3))
            n = len(g)
            with pytest.raises(at.NotBatchableError) as e:
                at.vmap(lambda r: at.sum(apply("elu", at.tanh(r), alpha=0.5)))(x)
            assert len(g) == n, "nothing is appended to the graph before the error"
            # not batched, it needs no rule: applied to a shared value it runs as it is
            c = at.constant(np.array([-1.0, 2.0, 0.5]))
            y = at.vmap(lambda r: r * apply("elu", c))(x)
        X = RNG.standard_normal((4, 3))
        np.testing.assert_allclose(at.run(y, {x: X}), X * np.array([np.expm1(-1.0), 2.0, 0.5]))
    text = str(e.value)
    assert "'elu'" in text and "batch=" in text and "docs/adding-an-op.md" in text and "batch_elementwise" in text
    assert "test_vmap.py" in text                    # where the node was made (the user's line)


def test_an_elementwise_op_of_yours_shares_the_elementwise_rule() -> None:
    X = RNG.standard_normal((4, 3))
    with registered(_elu(batch=batch_elementwise)):
        with at.Graph():
            x = at.input("x", (4, 3))
            y = at.vmap(lambda r: apply("elu", r, alpha=0.5) * at.constant(np.arange(4.0)), in_axes=1)(x)
            dy = at.vmap(lambda r: at.grad(at.sum(apply("elu", r, alpha=0.5)), r))(x)
        got, dgot = at.run([y, dy], {x: X})
    elu = np.where(X > 0, X, 0.5 * np.expm1(np.minimum(X, 0)))
    np.testing.assert_allclose(got, (elu * np.arange(4.0)[:, None]).T)   # columns of x, one per example
    np.testing.assert_allclose(dgot, np.where(X > 0, 1.0, elu + 0.5))


def test_a_not_batchable_mark_and_a_wrong_rule_are_reported() -> None:
    with registered(_elu(not_batchable="it reads the whole batch at once")):
        with at.Graph():
            x = at.input("x", (4, 3))
            with pytest.raises(at.NotBatchableError, match="'elu' cannot be batched: it reads the whole batch"):
                at.vmap(lambda r: apply("elu", r))(x)
    with registered(_elu(batch=lambda c, args, dims: (args[0], None))):
        with at.Graph():
            x = at.input("x", (4, 3))
            with pytest.raises(ValueError, match="batching rule of 'elu'.*shape"):
                at.vmap(lambda r: apply("elu", r))(x)
    with pytest.raises(ValueError, match="a batching rule and a not_batchable mark"):
        with registered(_elu(batch=batch_elementwise, not_batchable="why")):
            pass


# --- what vmap refuses, and says --------------------------------------------------------------------------------
def test_errors_name_the_argument_and_the_fix() -> None:
    with at.Graph():
        x, y = at.input("x", (4, 3)), at.input("y", (5, 3))
        with pytest.raises(ValueError, match="different numbers of examples: argument 0: 4.*argument 1: 5"):
            at.vmap(lambda a, b: a + b)(x, y)
        with pytest.raises(ValueError, match="no argument has a batch axis"):
            at.vmap(lambda a: a, in_axes=None)(x)
        with pytest.raises(ValueError, match="in_axes has 1 entries for 2 arguments"):
            at.vmap(lambda a, b: a, in_axes=(0,))(x, x)
        with pytest.raises(ValueError, match="in_axes\\[0\\] = 2"):
            at.vmap(lambda a: a, in_axes=2)(x)
        with pytest.raises(TypeError, match="must return a Tensor"):
            at.vmap(lambda a: 3.0)(x)
        with pytest.raises(ValueError, match="made parameter 'p'.*before vmap"):
            at.vmap(lambda a: a * at.parameter("p", (3,)))(x)
        with pytest.raises(ValueError, match="made input 'q'.*argument"):
            at.vmap(lambda a: a * at.input("q", (3,)))(x)
        with pytest.raises(at.ShapeError):                 # fn sees ONE example: (3,) @ (4, 2) does not fit
            at.vmap(lambda a: a @ at.constant(np.ones((4, 2))))(x)


def test_shared_arguments_structures_and_out_axes() -> None:
    """in_axes None passes an argument as it is (a Tensor or anything else); outputs keep fn's structure;
    an output that does not depend on the batch is repeated."""
    X, Wv = RNG.standard_normal((4, 3)), RNG.standard_normal((3, 2))
    with at.Graph():
        x, w = at.input("x", (4, 3)), at.input("w", (3, 2))
        (a, (b, c)) = at.vmap(lambda r, m, scale: (r @ m * scale, [at.sum(r), at.sum(m)]),
                              in_axes=(0, None, None), out_axes=(1, 0, 0))(x, w, 2.0)
    got = at.run([a, b, c], {x: X, w: Wv})
    np.testing.assert_allclose(got[0], (X @ Wv * 2.0).T)
    np.testing.assert_allclose(got[1], X.sum(1))
    np.testing.assert_allclose(got[2], np.full(4, Wv.sum()))


def test_the_graph_holds_only_the_batched_nodes() -> None:
    """fn is traced in a scratch graph: the user's graph gets the batched program, not a per-example copy."""
    with at.Graph() as g:
        x, w = at.input("x", (6, 3)), at.parameter("w", (3, 2))
        n = len(g)
        y = at.vmap(lambda r: at.tanh(r @ w))(x)
    assert [nd.op for nd in g.nodes[n:]] == ["matmul", "tanh"]     # B vector-matrix products: one matmul
    assert y.shape == (6, 2) and [nd.op for nd in g.nodes[:n]] == ["input", "parameter"]


# --- the GPU: the same numbers -------------------------------------------------------------------------------
@pytest.mark.gpu
def test_wgpu_runs_vmapped_graphs_as_numpy_does() -> None:
    from wgpu_helpers import BOTH_PLANS, run_both

    n = 5
    with at.Graph():
        x, t = at.input("x", (n, 1, 6, 6)), at.input("t", (n, 3))
        w = at.parameter("w", (2, 1, 3, 3))
        v = at.parameter("v", (12, 3))
        ln = at.parameter("ln", (12,))

        def loss(xi: at.Tensor, ti: at.Tensor) -> at.Tensor:
            h = at.relu(at.conv2d(xi[None], w, padding=0))                  # (1, 2, 4, 4)
            h = at.layer_norm(at.max_pool2d(h, 2, stride=1)[0, :, ::2, :].reshape(-1), ln)   # (12,)
            return at.sum((at.softmax(h @ v) - ti) ** 2)

        per = at.vmap(lambda xi, ti: at.grad(loss(xi, ti), [w, v, ln]))(x, t)
        jac = at.vmap(lambda s: at.grad(at.softmax(ln[:4]) * at.sum(ln), ln, seed=s))(at.constant(np.eye(4)))
        rows = at.vmap(at.vmap(lambda r: at.sum(r * r) + at.max(r)), in_axes=1, out_axes=1)(x[:, 0])
    feeds = {x: RNG.standard_normal((n, 1, 6, 6)), t: RNG.uniform(0, 1, (n, 3)),
             w: RNG.standard_normal((2, 1, 3, 3)), v: RNG.standard_normal((12, 3)), ln: RNG.standard_normal(12)}
    run_both([*per, jac, rows], feeds, "vmapped graphs", plans=BOTH_PLANS)


@pytest.mark.gpu
@pytest.mark.parametrize("c", BATCHED_CASES, ids=lambda c: c.id)
def test_every_op_batched_on_wgpu_equals_numpy(c) -> None:
    """The batched graph of every op case (each in_axes layout) gives numpy's numbers on the GPU."""
    from wgpu_helpers import run_both

    built = c.build()
    fn, leaves = _as_function(built)
    rng = np.random.default_rng(zlib.crc32(c.id.encode()))
    examples = [_examples(built.feeds[t], rng) for t in leaves]
    for label, axes in _layouts(leaves).items():
        out, feeds, _ = _batched_call(built, fn, axes, 0, examples)
        run_both([out], feeds, f"{c.id} {label}")
