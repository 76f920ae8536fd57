"""The reduction layouts of the wgpu backend, each against numpy on odd shapes.

Short contiguous rows run in *segments* (several rows per workgroup, a power-of-2 number
of threads per row); sums over leading axes into few outputs (bias gradients) run as a
column pass over (output, chunk) pairs and a segmented sum of the partial rows. The row
counts and lengths here are not multiples of the segment sizes, so the last workgroup
holds segments past the last row, and rows end mid-segment.
"""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at
from asgteach.backends import wgpu_backend

from wgpu_helpers import run_both

pytestmark = pytest.mark.gpu   # every test here runs kernels (no adapter: skipped loudly; CI=true: failed)


def _u(shape, seed=0):
    return np.random.default_rng(seed).uniform(-2.0, 2.0, shape)


def _entries(outputs) -> set[str]:
    plan = wgpu_backend.compile(outputs[0].graph, [o.node_id for o in outputs])
    return {d.entry for d in plan.dispatches}


@pytest.mark.parametrize("shape", [(3, 37, 300), (1, 1, 45), (5, 7, 1), (2, 9, 1000), (1, 33, 256)])
def test_segmented_last_axis_reductions_and_softmax(shape) -> None:
    with at.Graph():
        x = at.input("x", shape)
        outs = [at.sum(x, axis=-1), at.mean(x, axis=-1), at.max(x, axis=-1),
                at.softmax(x, axis=-1), at.log_softmax(x, axis=-1), at.softmax(x, axis=1)]
    run_both(outs, {x: _u(shape, 1)}, f"rows {shape}")


@pytest.mark.parametrize("shape", [(1000, 37), (64, 1), (4099, 3), (7, 300, 13), (1, 130, 513)])
def test_sums_over_leading_axes_into_few_outputs(shape) -> None:
    with at.Graph():
        x = at.input("x", shape)
        lead = tuple(range(len(shape) - 1))
        outs = [at.sum(x, axis=lead), at.mean(x, axis=lead), at.ops.sum_to(x, shape[-1:])]
    run_both(outs, {x: _u(shape, 2)}, f"columns {shape}")
    if int(np.prod(shape[:-1])) >= 64 and shape[-1] > 1:   # (a last axis of 1: the rows are contiguous)
        assert "sum_cols" in _entries(outs), "a long sum over leading axes takes the column pass"


@pytest.mark.parametrize("shape", [(1000, 36), (4099, 4), (7, 301, 512), (67, 8)])
def test_column_sums_of_rows_a_multiple_of_4_long_read_four_columns_at_a_time(shape) -> None:
    """sum_cols4: a vec4 per load; row counts that leave a tail of a chunk and of the 4-row unroll."""
    with at.Graph():
        x, y = at.input("x", shape), at.input("y", shape)
        lead = tuple(range(len(shape) - 1))
        outs = [at.ops.sum_to(x, shape[-1:]), at.sum(x, axis=lead), at.ops.sum_to(x * y, shape[-1:])]
    run_both(outs, {x: _u(shape, 6), y: _u(shape, 7)}, f"columns by fours {shape}")
    plan = wgpu_backend.compile(outs[0].graph, [o.node_id for o in outs])
    variants = [d.key[2] for d in plan.dispatches if d.entry.startswith("sum_cols")]
    assert variants and all(v.startswith("sum_cols4") for v in variants), variants
    assert any(v.endswith(":product") for v in variants)


def test_column_sums_propagate_nan_like_numpy() -> None:
    X = _u((500, 6), 3)
    X[123, 4] = np.nan
    with at.Graph():
        x = at.input("x", X.shape)
        s = at.sum(x, axis=0)
    (got,) = at.run([s], {x: X.astype(np.float32)}, backend="wgpu", on_nan="ignore")
    assert np.isnan(got[4]) and np.isfinite(np.delete(got, 4)).all()


def test_sum_over_leading_axes_of_a_product_reads_both_factors_in_the_column_pass() -> None:
    with at.Graph():
        a, b = at.input("a", (3, 130, 37)), at.input("b", (3, 130, 37))
        s = at.ops.sum_to(a * b, (37,))
    run_both([s], {a: _u(a.shape, 4), b: _u(b.shape, 5)}, "sum_to(a * b)")
    plan = wgpu_backend.compile(s.graph, [s.node_id])
    assert any(d.entry == "sum_cols" and d.key[2].endswith(":product") for d in plan.dispatches)   # (37 columns)


@pytest.mark.parametrize("shape", [(2, 3, 2100), (1, 2, 4096), (3, 2049)])
def test_softmax_of_rows_too_long_for_registers(shape) -> None:
    # rows of at most 8 x LP elements stay in registers; longer ones take the three-pass loop
    with at.Graph():
        x = at.input("x", shape)
        outs = [at.softmax(x, axis=-1), at.log_softmax(x, axis=-1)]
    run_both(outs, {x: _u(shape, 6) * 3}, f"long rows {shape}")


def test_softmax_in_registers_along_a_strided_axis_with_masked_entries() -> None:
    X = _u((5, 300, 3), 7) * 3
    X[1, :7, 0] = -np.inf         # masked entries: probability exactly 0
    with at.Graph():
        x = at.input("x", X.shape)
        outs = [at.softmax(x, axis=1), at.log_softmax(x, axis=1)]
    run_both(outs[:1], {x: X}, "strided softmax with -inf")
    _, logp = at.run(outs, {x: X.astype(np.float32)}, backend="wgpu")
    masked = [3 * 300 + 3 * k for k in range(7)]   # the flat positions of the -inf entries
    assert np.isneginf(logp[1, :7, 0]).all() and np.isfinite(np.delete(logp.reshape(-1), masked)).all()
