"""The answer keys: the reference solutions the checks compare with. This file gives the answers away.

It is not part of the asgteach package: a student's install has no copy, and a graded submission's sandbox
has none in its file system. A check loads it inside its own body, when it runs
(:func:`asgteach.grading.keys.load`): in a checkout from here, in a graded course from the copy that
``asgteach course DIR`` writes to ``DIR/keys/``, which only the judge reads. Try the exercise first:
``asgteach solution LESSON N`` (in a checkout) shows one exercise's solution when you are stuck.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

#: the RNN's parameter names (lesson 18), as checks_rnn names them
PARAM_NAMES = ("W_xh", "W_hh", "b_h", "W_hy", "b_y")

__all__ = ["round_to_format", "safe_scales", "bf16_bits", "ReferenceScaler", "clip_by_global_norm", "rnn_window",
           "truncated_bptt",
           "gradient_horizon", "PARAM_NAMES", "elu", "elu_grad", "bce_with_logits", "sigmoid",
           "predicted_factor", "ELEMENTWISE", "live_bytes", "kept_for_backward", "consumers",
           "fusible_values", "fusion_chains", "blocked_matmul", "tree_sum"]


# --- lesson 16 ------------------------------------------------------------------------------------------

def round_to_format(x: np.ndarray, e: int, m: int) -> np.ndarray:
    """x (float64) rounded to the nearest number of the binary format with e exponent and m mantissa bits (bias
    2^(e-1) - 1, subnormals, ties to even, beyond the largest finite to +-inf, NaN kept), as float64."""
    x = np.asarray(x, dtype=np.float64)
    bias = 2 ** (e - 1) - 1
    largest = (2 - 2.0 ** -m) * 2.0 ** bias
    out = x.copy()
    finite = np.isfinite(x)
    a = np.abs(x[finite])
    _, ex = np.frexp(a)
    quantum = np.ldexp(1.0, np.maximum(ex - 1, 1 - bias) - m)    # the gap at a (constant below the normals)
    r = np.rint(a / quantum) * quantum                             # nearest, ties to even
    out[finite] = np.copysign(np.where(r > largest, np.inf, r), x[finite])
    return out


def safe_scales(grads: list, max_underflow: float = 0.01, ks: range = range(-80, 81)) -> tuple[int, int] | None:
    """(k_lo, k_hi): the powers of two 2^k that loss scaling may use for these gradients (float32 arrays) in float16:
    k_hi the largest k at which no scaled value rounds to inf, k_lo the smallest at which at most ``max_underflow`` of
    the nonzero values round to 0. None when k_lo > k_hi (no scale is safe)."""
    g = np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in grads])
    nonzero = g != 0
    ok_top, ok_bottom = [], []
    with np.errstate(over="ignore"):
        for k in ks:
            h = (g * 2.0 ** k).astype(np.float16)
            if not np.isinf(h).any():
                ok_top.append(k)
            lost = np.count_nonzero((h == 0) & nonzero)
            if lost <= max_underflow * max(1, np.count_nonzero(nonzero)):
                ok_bottom.append(k)
    k_hi, k_lo = max(ok_top), min(ok_bottom)
    return (k_lo, k_hi) if k_lo <= k_hi else None


def bf16_bits(u: np.ndarray) -> np.ndarray:
    """The reference: float32 bit patterns -> bfloat16 patterns (low 16 bits 0), nearest, ties to even."""
    wide = u.astype(np.uint64)
    rounded = ((wide + 0x7FFF + ((wide >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    nan = ((u >> 23) & 0xFF == 0xFF) & (u & 0x7FFFFF != 0)
    return np.where(nan, (u & np.uint32(0x80000000)) | np.uint32(0x7FC00000), rounded)


class ReferenceScaler:
    """PyTorch's GradScaler policy: on inf/NaN halve and skip; after N finite steps in a row double."""

    def __init__(self, init_scale: float, growth_interval: int) -> None:
        self.scale, self.growth_interval, self.good_steps = float(init_scale), growth_interval, 0

    def update(self, grads: list[np.ndarray]) -> bool:
        if not all(np.isfinite(g).all() for g in grads):
            self.scale /= 2
            self.good_steps = 0
            return False
        self.good_steps += 1
        if self.good_steps == self.growth_interval:
            self.scale *= 2
            self.good_steps = 0
        return True


# --- lesson 17: what the student's ops must compute ----------------------------------------------------

def elu(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0.0)))


def elu_grad(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x > 0, 1.0, alpha * np.exp(np.minimum(x, 0.0)))


def bce_with_logits(z: np.ndarray, t: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, z) - z * t


def sigmoid(z: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


# --- lesson 11: a tiled matmul's global reads, a workgroup's tree sum ---------------------------------------

def blocked_matmul(A: np.ndarray, B: np.ndarray, bm: int, bn: int, bk: int) -> tuple[np.ndarray, int]:
    """C = A @ B as the tiled kernel computes it (float32), and the elements it reads from global memory.

    One workgroup per bm x bn block of C; it walks K in steps of bk, copying an A tile and a B tile (only the
    elements inside the matrices: the kernel pads the rest with zeros without reading) and adding, one k at a
    time, a[:, k] * b[k, :] into accumulators kept across the K tiles."""
    A, B = np.asarray(A, np.float32), np.asarray(B, np.float32)
    M, K = A.shape
    N = B.shape[1]
    C = np.zeros((M, N), np.float32)
    reads = 0
    for i0 in range(0, M, bm):
        for j0 in range(0, N, bn):
            acc = np.zeros((min(bm, M - i0), min(bn, N - j0)), np.float32)
            for k0 in range(0, K, bk):
                a_tile, b_tile = A[i0:i0 + bm, k0:k0 + bk], B[k0:k0 + bk, j0:j0 + bn]
                reads += a_tile.size + b_tile.size
                for k in range(a_tile.shape[1]):
                    acc += a_tile[:, k:k + 1] * b_tile[k:k + 1, :]
            C[i0:i0 + bm, j0:j0 + bn] = acc
    return C, reads


def tree_sum(x: np.ndarray, width: int) -> np.float32:
    """The float32 sum of x as one workgroup of ``width`` threads of reduce.wgsl adds it (seg_sum): thread t
    adds x[t], x[t + width], ... in order from 0; then, for s = width/2, ..., 1, v[t] += v[t + s] for t < s."""
    x = np.asarray(x, np.float32).ravel()
    v = np.zeros(width, np.float32)
    for start in range(0, x.size, width):
        part = x[start:start + width]
        v[:part.size] += part
    s = width // 2
    while s >= 1:
        v[:s] += v[s:2 * s]
        s //= 2
    return np.float32(v[0])


# --- lesson 13: memory planning and fusion, on plans ----------------------------------------------------

#: op categories whose kernels are elementwise: output element i depends only on input elements i
ELEMENTWISE = ("arithmetic", "activation", "comparison")


def live_bytes(plan: Any, itemsize: int = 4) -> list[int]:
    """Bytes alive after each step of plan.steps (the plan's own liveness replay)."""
    return [row["live_bytes"] for row in plan.liveness(itemsize)]


def kept_for_backward(plan: Any) -> list[int]:
    """Values made by forward steps that some backward step reads, in plan order."""
    read_by_backward = {i for step in plan.steps if step.node.phase == "backward" for i in step.node.inputs}
    return [step.node.id for step in plan.steps if step.node.phase == "forward" and step.node.id in read_by_backward]


def consumers(plan: Any) -> dict[int, list[Any]]:
    users: dict[int, list[Any]] = {}
    for step in plan.steps:
        for i in step.node.inputs:
            users.setdefault(i, []).append(step.node)
    return users


def fusible_values(plan: Any) -> list[int]:
    """Elementwise step values, not outputs, not folded, read by exactly one elementwise step of the same shape."""
    from asgteach.ops.registry import spec

    users = consumers(plan)
    outputs, folded = set(plan.outputs), set(plan.folded)
    fusible = []
    for step in plan.steps:
        node = step.node
        if spec(node.op).category not in ELEMENTWISE or node.id in outputs or node.id in folded:
            continue
        readers = users.get(node.id, [])
        if len(readers) == 1 and spec(readers[0].op).category in ELEMENTWISE and readers[0].shape == node.shape:
            fusible.append(node.id)
    return fusible


def fusion_chains(plan: Any) -> list[list[int]]:
    """Join every fusible value to the one step that reads it; each group of more than one step is one kernel."""
    users = consumers(plan)
    group: dict[int, int] = {}

    def root(i: int) -> int:
        while group.get(i, i) != i:
            i = group[i]
        return i

    for nid in fusible_values(plan):
        group[root(nid)] = root(users[nid][0].id)
    members: dict[int, list[int]] = {}
    for step in plan.steps:
        nid = step.node.id
        if nid in group or any(group.get(j) is not None and root(j) == root(nid) for j in group):
            members.setdefault(root(nid), []).append(nid)
    return [ids for ids in members.values() if len(ids) > 1]


# --- lesson 14 ------------------------------------------------------------------------------------------

def predicted_factor(width: int, std: float, slope: float) -> float:
    """Half the units pass the gradient with factor 1, half with ``slope``; W^T multiplies the squared norm by
    width * std^2."""
    return std * math.sqrt(width * (1.0 + slope * slope) / 2.0)


def clip_by_global_norm(grads: Sequence[np.ndarray], max_norm: float) -> tuple[list[np.ndarray], float]:
    norm = math.sqrt(sum(float(np.sum(np.square(g))) for g in grads))
    scale = max_norm / norm if norm > max_norm else 1.0
    return [np.asarray(g, dtype=np.float64) * scale for g in grads], norm


# --- lesson 18 ------------------------------------------------------------------------------------------

def rnn_window(P: Mapping[str, np.ndarray], tokens: np.ndarray, targets: np.ndarray,
            h0: np.ndarray) -> tuple[float, np.ndarray, dict[str, np.ndarray]]:
    """One window, its own graph: (summed loss, last hidden state, gradients). No gradient leaves through h0."""
    B, T = tokens.shape
    rows = np.arange(B)
    hs, probs, loss = [h0], [], 0.0
    for t in range(T):
        hs.append(np.tanh(P["W_xh"][tokens[:, t]] + hs[-1] @ P["W_hh"] + P["b_h"]))
        z = hs[-1] @ P["W_hy"] + P["b_y"]
        z = z - z.max(axis=1, keepdims=True)
        p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
        loss -= float(np.mean(np.log(p[rows, targets[:, t]])))
        probs.append(p)
    grads = {n: np.zeros_like(np.asarray(P[n], dtype=np.float64)) for n in PARAM_NAMES}
    dh_next = np.zeros_like(h0)
    for t in reversed(range(T)):
        dz = probs[t].copy()
        dz[rows, targets[:, t]] -= 1.0
        dz /= B
        grads["W_hy"] += hs[t + 1].T @ dz
        grads["b_y"] += dz.sum(axis=0)
        da = (dz @ P["W_hy"].T + dh_next) * (1.0 - hs[t + 1] ** 2)
        np.add.at(grads["W_xh"], tokens[:, t], da)
        grads["W_hh"] += hs[t].T @ da
        grads["b_h"] += da.sum(axis=0)
        dh_next = da @ P["W_hh"].T
    return loss, hs[-1], grads


def truncated_bptt(P: Mapping[str, np.ndarray], tokens: np.ndarray, targets: np.ndarray, k: int,
               mistake: str = "") -> tuple[float, dict[str, np.ndarray]]:
    """Truncated BPTT over windows of k steps from h = 0, or one of the usual ``mistake``s."""
    B, T = tokens.shape
    h = np.zeros((B, P["W_hh"].shape[0]))
    if mistake == "full":                       # gradient flows across the windows: full BPTT
        k = T
    total, grads = 0.0, {n: np.zeros_like(np.asarray(P[n], dtype=np.float64)) for n in PARAM_NAMES}
    for start in range(0, T, k):
        stop = min(start + k, T)
        if mistake == "drop_partial" and stop - start < k:
            break
        if mistake == "reset":
            h = np.zeros_like(h)
        loss, h, g = rnn_window(P, tokens[:, start:stop], targets[:, start:stop], h)
        if mistake == "last_only":
            total, grads = loss, g
        else:
            total += loss
            grads = {n: grads[n] + g[n] for n in PARAM_NAMES}
    return total, grads


def gradient_horizon(W_hh: np.ndarray, hs: Sequence[np.ndarray], g_last: np.ndarray, threshold: float,
             mistake: str = "") -> tuple[np.ndarray, int | None]:
    T = len(hs)
    norms = np.zeros(T)
    g = np.asarray(g_last, dtype=np.float64)
    norms[T - 1] = np.linalg.norm(g)
    W = W_hh if mistake == "no_transpose" else W_hh.T
    for t in range(T - 1, 0, -1):
        local = 1.0 if mistake == "no_tanh" else 1.0 - hs[t - 1 if mistake == "previous_h" else t] ** 2
        g = (g * local) @ W
        norms[t - 1] = np.linalg.norm(g)
    below = [j for j in range(1, T) if norms[T - 1 - j] < threshold * norms[T - 1]]
    return norms, (below[0] if below else None)
