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

from wgpu_helpers import require_adapter, run_both

require_adapter()


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


def test_column_sums_propagate_nan_like_numpy() -> None:
    X = _u((500, 6), 3)
    X[123, 4] = np.nan
    with at.Graph():
        x = at.input("x", X.shape)
        s = at.sum(x, axis=0)
    (got,) = at.run([s], {x: X.astype(np.float32)}, backend="wgpu", on_nan="ignore")
    assert np.isnan(got[4]) and np.isfinite(np.delete(got, 4)).all()
