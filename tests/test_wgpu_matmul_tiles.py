"""Every matmul tile the backend may choose, checked against numpy on the adapter at hand.

The plan picks the preferred tile (``DEFAULT_TILE``, or ``ASGTEACH_WGPU_MATMUL_TILE``), or a
fallback when the sizes are not multiples of it or when it would give too few workgroups. Each
tile is forced here on sizes that are multiples of it (the vec4 kernel) and on sizes that are
not (the bounds-checked kernel), with A and B read straight or transposed in place, and a
batch with a broadcast operand."""

from __future__ import annotations

import math

import numpy as np
import pytest

import asgteach as at
from asgteach.backends import wgpu_backend, wgpu_kernels
from asgteach.backends.wgpu_matmul import DEFAULT_TILE, FALLBACK_TILES, Tile


TILES = [DEFAULT_TILE, *FALLBACK_TILES]


def _swap(t):
    """The last two axes exchanged: a transpose the matmul reads in place (an asgteach Tensor)."""
    return at.ops.transpose(t, tuple(range(t.ndim - 2)) + (t.ndim - 1, t.ndim - 2))


def _product(a_shape, b_shape, ta: bool, tb: bool, seed: int):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    with at.Graph():
        x, y = at.input("a", a_shape), at.input("b", b_shape)
        c = (_swap(x) if ta else x) @ (_swap(y) if tb else y)
        plan = wgpu_backend.compile(c.graph, [c.node_id])
    (got,) = plan.run({x: a, y: b})
    want = (np.swapaxes(a, -1, -2) if ta else a).astype(np.float64) @ (np.swapaxes(b, -1, -2) if tb else b)
    kernels = [d.key[2] for d in plan.dispatches if d.entry == "matmul"]
    return got, want, kernels


@pytest.mark.gpu
@pytest.mark.parametrize("tile", TILES, ids=str)
@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)],
                         ids=["NN", "NT", "TN", "TT"])
def test_every_tile_matches_numpy(monkeypatch, tile: Tile, ta: bool, tb: bool) -> None:
    monkeypatch.setenv("ASGTEACH_WGPU_MATMUL_TILE", str(tile))
    # many tiles (so the small-grid rule keeps this tile), sizes multiples of it: the vec4 kernel
    m, n, k = 2 * tile.bm, 2 * tile.bn, 3 * tile.bk
    nb = math.ceil(wgpu_kernels.MIN_GROUPS / 4)
    a_shape = (nb, k, m) if ta else (nb, m, k)
    b_shape = (n, k) if tb else (k, n)                # one B broadcast over the batch (a weight)
    got, want, kernels = _product(a_shape, b_shape, ta, tb, seed=1)
    assert kernels == [f"{tile}:fast:{'T' if ta else 'N'}{'T' if tb else 'N'}"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    # odd sizes: the bounds-checked kernel of the same tile
    m, n, k = tile.bm + 3, tile.bn - 1, tile.bk + 5
    got, want, kernels = _product((k, m) if ta else (m, k), (n, k) if tb else (k, n), ta, tb, seed=2)
    assert kernels == [f"{tile}:edge:{'T' if ta else 'N'}{'T' if tb else 'N'}"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.gpu
def test_a_grid_of_few_workgroups_takes_a_smaller_tile() -> None:
    """(256, 256) @ (256, 256) is 4 tiles of 128 x 128: the tile that fits and gives the most
    workgroups is taken instead (none reaches MIN_GROUPS here)."""
    got, want, kernels = _product((256, 256), (256, 256), False, False, seed=3)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    chosen = Tile.parse(kernels[0].split(":")[0])
    fits = [t for t in TILES if 256 % t.bm == 0 and 256 % t.bn == 0 and 256 % t.bk == 0]
    most = max((256 // t.bm) * (256 // t.bn) for t in fits)
    assert (256 // chosen.bm) * (256 // chosen.bn) == most
    assert chosen != DEFAULT_TILE


@pytest.mark.gpu
def test_a_large_grid_keeps_the_preferred_tile() -> None:
    n_batch = wgpu_kernels.MIN_GROUPS                 # 128 batches of one 128 x 128 tile each
    got, want, kernels = _product((n_batch, DEFAULT_TILE.bm, 32), (32, DEFAULT_TILE.bn), False, False, seed=4)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    assert kernels == [f"{DEFAULT_TILE}:fast:NN"]


def test_tile_text_round_trips_and_bad_tiles_are_refused() -> None:
    for tile in TILES:
        assert Tile.parse(str(tile)) == tile
    with pytest.raises(ValueError, match="not usable"):
        Tile.parse("128x128x16x8x6")
    with pytest.raises(ValueError, match="not usable"):
        Tile.parse("256x256x16x8x8")          # 1024 threads


@pytest.mark.gpu
@pytest.mark.parametrize("batched", [False, True], ids=["2-D", "batched"])
def test_a_training_steps_gradient_products_read_their_operands_in_place(batched: bool) -> None:
    """dX = dY W^T runs as ONE NT kernel and dW = X^T dY as ONE TN kernel, each reading the stored W and X
    where they are (no transpose kernel); bench/matmul_gpu.py --layouts nt,tn times these kernels."""
    rng = np.random.default_rng(5)
    shape = (2, 128, 64) if batched else (256, 64)
    with at.Graph() as g:
        x = at.input("x", shape)
        y = at.nn.Linear(64, 128, name="lin")(x)
        loss = at.mean(y * y)
        w = at.Tensor(g, next(p.id for p in g.nodes if p.op == "parameter" and p.shape == (64, 128)))
        gw, gx = at.grad(loss, [w, x])
        plan = wgpu_backend.compile(g, [gw.node_id, gx.node_id])
    xv, wv = rng.standard_normal(shape), rng.standard_normal((64, 128)) * 0.1
    bv = np.zeros(128)
    b = at.Tensor(g, next(p.id for p in g.nodes if p.op == "parameter" and p.shape == (128,)))
    got_w, got_x = plan.run({x: xv.astype(np.float32), w: wv.astype(np.float32), b: bv.astype(np.float32)})
    gy = 2 * (xv @ wv) / (xv @ wv).size                     # d mean(y * y) / dy, y = x @ W + 0
    want_x, want_w = gy @ wv.T, xv.reshape(-1, 64).T @ gy.reshape(-1, 128)
    np.testing.assert_allclose(got_x, want_x, rtol=1e-4, atol=1e-4 * np.abs(want_x).max())
    np.testing.assert_allclose(got_w, want_w, rtol=1e-4, atol=1e-4 * np.abs(want_w).max())
    layouts = [d.key[2].split(":")[2] for d in plan.dispatches if d.entry == "matmul"]
    assert sorted(layouts) == ["NN", "NT", "TN"], layouts    # forward, dX, dW
    assert not [d for d in plan.dispatches if d.node.op == "transpose"]
