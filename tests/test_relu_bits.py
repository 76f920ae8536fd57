"""relu on numpy gives ``np.maximum(x, 0)`` bit for bit, whatever path its kernel takes.

The kernel compares a C-ordered float array of up to 65,536 elements against an array of
zeros (numpy's two-array loop is SIMD, its array-and-scalar loop is not); anything else
against the scalar 0. Both must give the same bits: NaN kept with its sign and payload,
-0.0 turned into +0.0, infinities and subnormals as they are, in every SIMD lane and in the
tail of a row, and the same dtype and memory order.
"""

from __future__ import annotations

import numpy as np
import pytest

import asgteach as at

SPECIAL = [-0.0, 0.0, np.nan, -np.nan, np.inf, -np.inf, 1e-45, -1e-45, 5e-324, -5e-324, 1.5, -1.5]


def _values(shape: tuple[int, ...], dtype: type, seed: int) -> np.ndarray:
    """Random normals with the special values scattered over every position of a SIMD vector and the tail."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    picks = rng.choice(len(SPECIAL), flat.size // 3 + 1)
    where = rng.choice(flat.size, picks.size, replace=False)
    with np.errstate(over="ignore", under="ignore"):
        flat[where] = np.array(SPECIAL)[picks].astype(dtype)
    flat[-len(SPECIAL):] = np.array(SPECIAL).astype(dtype)[-min(len(SPECIAL), flat.size):]
    nan_payload = np.array([0x7FC00123 if dtype == np.float32 else 0x7FF8000000000123],
                           np.uint32 if dtype == np.float32 else np.uint64).view(dtype)
    flat[0] = nan_payload[0]   # a NaN with a payload: kept as it is
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(7,), (64, 128), (64, 64), (3, 5, 17), (300, 300)],
                         ids=["vector-7", "64x128", "64x64", "3x5x17", "90000-above-the-zeros-limit"])
def test_relu_is_maximum_with_zero_bit_for_bit(shape: tuple[int, ...], dtype: type) -> None:
    with at.Graph(name="relu_bits"):
        x = at.input("x", shape)
        y = at.relu(x)
    X = _values(shape, dtype, seed=len(shape) * 7 + shape[-1])
    got = at.run(y, {x: X}, on_nan="ignore")
    want = np.maximum(X, 0)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()
    assert not np.signbit(got[got == 0]).any(), "relu(-0.0) is +0.0"
    again = at.run(y, {x: X}, on_nan="ignore")   # the shared zeros are still zeros after a run
    assert again.tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_of_a_transposed_view_keeps_numpys_bits_and_order(dtype: type) -> None:
    """A view in another order takes the scalar path: same bits, same memory order as numpy's."""
    with at.Graph(name="relu_view"):
        x = at.input("x", (48, 32))
        y = at.relu(at.transpose(x, (1, 0)))
    X = _values((48, 32), dtype, seed=3)
    got = at.run(y, {x: X}, on_nan="ignore")
    want = np.maximum(X.T, 0)
    assert got.tobytes(order="A") == want.tobytes(order="A") and got.flags.f_contiguous == want.flags.f_contiguous
    bits = np.uint32 if dtype == np.float32 else np.uint64
    np.testing.assert_array_equal(np.ascontiguousarray(got).view(bits), np.ascontiguousarray(want).view(bits))


def test_relu_gradient_is_unchanged_at_the_special_values() -> None:
    with at.Graph(name="relu_grad"):
        x = at.input("x", (4, 3))
        (dx,) = at.grad(at.sum(at.relu(x)), [x])
    X = np.array([[-0.0, 0.0, 1.0], [-1.0, np.inf, -np.inf], [2.0, -2.0, 0.5], [1e-300, -1e-300, 3.0]])
    np.testing.assert_array_equal(at.run(dx, {x: X}), (X > 0).astype(float))
