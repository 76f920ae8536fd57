"""Builds the matmul kernel from the template in ``shaders/matmul.wgsl``.

The template fixes the algorithm (tiles in shared memory, a register block per thread,
the next tile prefetched into registers); this module picks the tile sizes and writes
out the parts that must be unrolled — the multiply-add block and the stores — so the
accumulators are plain variables the GPU compiler keeps in registers.

Tile sizes are a choice per GPU. ``ASGTEACH_WGPU_MATMUL_TILE=BMxBNxBKxTMxTN`` overrides
the default (bench/matmul_gpu.py measures several on a real GPU).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from .wgpu_device import family_source

__all__ = ["Tile", "DEFAULT_TILE", "FALLBACK_TILES", "CAUSAL_TILE", "tile_from_env", "matmul_source", "ZERO_RULES",
           "swap_zero", "rows_outermost"]


@dataclass(frozen=True)
class Tile:
    """BM x BN outputs per workgroup, K steps of BK, TM x TN outputs per thread."""

    bm: int = 128
    bn: int = 128
    bk: int = 16
    tm: int = 8
    tn: int = 8

    @property
    def threads(self) -> tuple[int, int]:
        return self.bn // self.tn, self.bm // self.tm

    def check(self) -> None:
        tx, ty = self.threads
        t = tx * ty
        ok = (self.tm % 4 == 0 and self.tn % 4 == 0 and self.bk % 4 == 0 and self.bm % self.tm == 0
              and self.bn % self.tn == 0 and t <= 256)
        if not ok:
            raise ValueError(f"matmul tile {self} is not usable (TM, TN, BK multiples of 4; <= 256 threads)")

    def __str__(self) -> str:
        return f"{self.bm}x{self.bn}x{self.bk}x{self.tm}x{self.tn}"

    @classmethod
    def parse(cls, text: str) -> "Tile":
        """A tile written ``BMxBNxBKxTMxTN``, e.g. ``128x128x16x8x8``."""
        tile = cls(*(int(v) for v in text.strip().lower().split("x")))
        tile.check()
        return tile


DEFAULT_TILE = Tile(128, 128, 16, 8, 8)   # best of the sweep on an H100 (bench/matmul_gpu.py)
#: tried in order when the sizes are not multiples of the preferred tile, before the edge kernel
FALLBACK_TILES = (Tile(128, 64, 16, 8, 4), Tile(64, 128, 16, 4, 8), Tile(64, 64, 16, 4, 4), Tile(64, 64, 8, 4, 4))


#: Where a product's operand is known to be zero (or C's value unused) on one side of the diagonal of each
#: (T, T) matrix, and what a workgroup then leaves out of its K loop (tiles t_lo <= t < t_hi of BK steps).
#: Set by the pass ``causal_tiles`` (attention's causal weights); the names read "A is zero above its diagonal".
ZERO_RULES: dict[str, tuple[str, str]] = {
    # A[m, k] = 0 for k > m: columns past the tile's last row add nothing
    "A_above": ("A[m, k] = 0 for k > m", "t_hi = min(t_hi, (row0 + BM + BK - 1u) / BK);"),
    # A[m, k] = 0 for k < m: columns before the tile's first row add nothing
    "A_below": ("A[m, k] = 0 for k < m", "t_lo = max(t_lo, row0 / BK);"),
    # B[k, n] = 0 for n > k: rows before the tile's first column add nothing
    "B_above": ("B[k, n] = 0 for n > k", "t_lo = max(t_lo, col0 / BK);"),
    # B[k, n] = 0 for n < k: rows past the tile's last column add nothing
    "B_below": ("B[k, n] = 0 for n < k", "t_hi = min(t_hi, (col0 + BN + BK - 1u) / BK);"),
    # C[m, n] for n > m is never used: a tile wholly above the diagonal runs no K step
    "C_above": ("C[m, n] unused for n > m", "if (col0 >= row0 + BM) { t_hi = t_lo; }"),
    # C[m, n] for n < m is never used: a tile wholly below the diagonal runs no K step
    "C_below": ("C[m, n] unused for n < m", "if (row0 >= col0 + BN) { t_hi = t_lo; }"),
}
_SWAPPED = {"A_above": "B_below", "A_below": "B_above", "B_above": "A_below", "B_below": "A_above",
            "C_above": "C_below", "C_below": "C_above"}


def swap_zero(rules: tuple[str, ...]) -> tuple[str, ...]:
    """The rules of C = A @ B restated for C^T = B^T @ A^T (a product computed transposed: rows and columns trade
    places, A's zeros become B's)."""
    return tuple(_SWAPPED[r] for r in rules)


#: the tile a product with zero rules prefers: finer than DEFAULT_TILE, so fewer of the zeros are inside a
#: tile that crosses the diagonal, and more workgroups to even out their uneven work (an H100, the LM step of
#: bench/lm_step_gpu.py: the four kinds of causal products 0.77 ms per step at seq 256 against 0.98 with the
#: default tile, and faster at seq 1024 too; bench/README.md, issue 27)
CAUSAL_TILE = Tile(64, 64, 16, 4, 4)


def rows_outermost(zero: tuple[str, ...]) -> bool:
    """Whether a product's grid is (columns, batch, row blocks) instead of (columns, row blocks, batch): when a
    rule on A or B makes its workgroups' K loops uneven (see shaders/matmul.wgsl, "Causal tiles")."""
    return any(r[0] in "AB" for r in zero)


def _row_block(zero: tuple[str, ...]) -> tuple[str, str]:
    """(row0, the batch index) in the kernel: the plain grid's (wid.y * BM, wid.z), or with the row blocks
    outermost (:func:`rows_outermost`) in the order of most work first."""
    if not rows_outermost(zero):
        return "wid.y * BM", "wid.z"
    if "A_above" in zero:   # the last row block has the most K tiles: it starts first
        return "((M + BM - 1u) / BM - 1u - wid.z) * BM", "wid.y"
    return "wid.z * BM", "wid.y"


def _k_range(zero: tuple[str, ...]) -> str:
    if not zero:
        return "    // (this product runs every K tile)"
    lines = ["    var t_lo = 0u;", "    var t_hi = ntiles;"]
    for r in zero:
        what, code = ZERO_RULES[r]
        lines.append(f"    {code}   // {what}")
    return "\n".join(lines)


def tile_from_env() -> Tile:
    text = os.environ.get("ASGTEACH_WGPU_MATMUL_TILE", "").strip()
    if not text:
        return DEFAULT_TILE
    return Tile.parse(text)


@functools.lru_cache(maxsize=64)
def matmul_source(tile: Tile, fast: bool, ta: bool = False, tb: bool = False, bias: bool = False,
                  resid: bool = False, mat: bool = False, scale: bool = False, zero: tuple[str, ...] = ()) -> str:
    """WGSL for one tile configuration; ``fast``: the vec4 variant for tile-multiple sizes.

    ``ta`` / ``tb``: the operand's buffer holds its TRANSPOSE (A stored as (K, M), B as
    (N, K), row-major), so ``x.T @ g`` and ``g @ w.T`` read the untransposed values in
    place and no transposed copy is ever made. Only the tile loads change: the shared
    memory layout, and so the multiply-add block, is the same for all four variants.

    Rows of the stored A / B are LDA / LDB elements apart (uniform words 4, 5), and C's rows
    LDC apart (word 6), not necessarily the row length: an attention head (B, H, T, dh) is
    read straight out of the (B, T, H * dh) projection it was split from, and the merged
    heads are written straight into (B, T, H * dh).

    ``bias``: C = A @ B + bias, with a (N,) bias buffer at binding 4 added to every row as C is stored.
    ``resid``: also + R, a buffer of C's own shape and layout at binding 5 (a residual connection).
    ``mat``: also + a (M, N) matrix at binding 7, the same for every batch (an attention mask).
    ``scale``: C = (A @ B) * s first, s the float in uniform word 40 (attention's 1/sqrt(d)).
    ``zero``: names of :data:`ZERO_RULES`: K tiles that add only zeros are left out (pass ``causal_tiles``).
    """
    tile.check()
    tx, ty = tile.threads
    t = tx * ty
    bm4, bn4 = tile.bm // 4, tile.bn // 4
    gm, gn = tile.tm // 4, tile.tn // 4
    xyzw = "xyzw"
    bk4 = tile.bk // 4
    # elements (vec4s in the fast variant) in one A tile and one B tile, and how many each thread moves
    na, nb = (tile.bm * tile.bk // 4, tile.bk * tile.bn // 4) if fast else (tile.bm * tile.bk, tile.bk * tile.bn)
    la, lb = -(-na // t), -(-nb // t)
    elem = "vec4<f32>" if fast else "f32"

    def each(i: int, count: int, body: str) -> str:
        # when a tile holds fewer elements than loads x threads, the last threads sit out
        cond = f"if (idx < {count}u) " if (i + 1) * t > count else ""
        return f"{{ let idx = tid + {i}u * T; {cond}{{ {body} }} }}"

    if fast:
        # A tile: vec4s along k (A stored (M, K)) or along m (ta: stored (K, M));
        # B tile: vec4s along n (B stored (K, N)) or along k (tb: stored (N, K)).
        def load(k0: str) -> str:
            if ta:
                lines = [each(i, na, f"let k = idx / {bm4}u; let q = idx % {bm4}u; "
                                     f"ra[{i}] = A[(a_off + ({k0} + k) * LDA + row0) / 4u + q];") for i in range(la)]
            else:
                lines = [each(i, na, f"let r = idx / {bk4}u; let q = idx % {bk4}u; "
                                     f"ra[{i}] = A[(a_off + (row0 + r) * LDA + {k0}) / 4u + q];") for i in range(la)]
            if tb:
                lines += [each(i, nb, f"let c = idx / {bk4}u; let q = idx % {bk4}u; "
                                      f"rb[{i}] = B[(b_off + (col0 + c) * LDB + {k0}) / 4u + q];") for i in range(lb)]
            else:
                lines += [each(i, nb, f"let k = idx / {bn4}u; let q = idx % {bn4}u; "
                                      f"rb[{i}] = B[(b_off + ({k0} + k) * LDB + col0) / 4u + q];") for i in range(lb)]
            return "\n        ".join(lines)

        store_sh = []
        for i in range(la):
            if ta:
                store_sh.append(each(i, na, f"As[idx / {bm4}u][idx % {bm4}u] = ra[{i}];"))
            else:
                comps = " ".join(f"As[q * 4u + {j}u][r / 4u][r % 4u] = ra[{i}].{xyzw[j]};"
                                 for j in range(4))
                store_sh.append(each(i, na, f"let r = idx / {bk4}u; let q = idx % {bk4}u; {comps}"))
        for i in range(lb):
            if tb:
                comps = " ".join(f"Bs[q * 4u + {j}u][c / 4u][c % 4u] = rb[{i}].{xyzw[j]};"
                                 for j in range(4))
                store_sh.append(each(i, nb, f"let c = idx / {bk4}u; let q = idx % {bk4}u; {comps}"))
            else:
                store_sh.append(each(i, nb, f"Bs[idx / {bn4}u][idx % {bn4}u] = rb[{i}];"))
        store_c = [f"    let bias{h} = Bias[col0 / 4u + {h * tx}u + tx];" for h in range(gn)] if bias else []
        plus = [f" + bias{h}" if bias else "" for h in range(gn)]
        for r in range(tile.tm):
            row = f"row0 + {(r // 4) * ty * 4 + r % 4}u + ty * 4u"
            for h in range(gn):
                at = f"(c_off + ({row}) * LDC + col0) / 4u + {h * tx}u + tx"
                value = f"acc_{r}_{h}" + (" * pf(40u)" if scale else "") + plus[h]
                value += (f" + Resid[{at}]" if resid else "") + (f" + Mat[(({row}) * N + col0) / 4u + {h * tx}u + tx]"
                                                                 if mat else "")
                store_c.append(f"    C[{at}] = {value};")
    else:
        # scalar loads; neighbouring threads walk the operand's contiguous axis (coalesced)
        a_map = ("let r = idx % BM; let k = idx / BM;", "A[a_off + (k0 + k) * LDA + row0 + r]") if ta else \
            ("let r = idx / BK; let k = idx % BK;", "A[a_off + (row0 + r) * LDA + k0 + k]")
        b_map = ("let n = idx / BK; let k = idx % BK;", "B[b_off + (col0 + n) * LDB + k0 + k]") if tb else \
            ("let k = idx / BN; let n = idx % BN;", "B[b_off + (k0 + k) * LDB + col0 + n]")

        def load(k0: str) -> str:
            lines = [each(i, na, f"{a_map[0]} var v = 0.0; if (row0 + r < M && {k0} + k < K) "
                                 f"{{ v = {a_map[1].replace('k0', k0)}; }} ra[{i}] = v;") for i in range(la)]
            lines += [each(i, nb, f"{b_map[0]} var v = 0.0; if ({k0} + k < K && col0 + n < N) "
                                  f"{{ v = {b_map[1].replace('k0', k0)}; }} rb[{i}] = v;") for i in range(lb)]
            return "\n        ".join(lines)

        store_sh = [each(i, na, f"{a_map[0]} As[k][r / 4u][r % 4u] = ra[{i}];")
                    for i in range(la)]
        store_sh += [each(i, nb, f"{b_map[0]} Bs[k][n / 4u][n % 4u] = rb[{i}];")
                     for i in range(lb)]
        store_c = []
        for r in range(tile.tm):
            store_c.append(f"    {{ let row = row0 + {(r // 4) * ty * 4 + r % 4}u + ty * 4u; if (row < M) {{")
            for h in range(gn):
                for j in range(4):
                    plus = (" * pf(40u)" if scale else "") + (" + Bias[col]" if bias else "")
                    plus += " + Resid[c_off + row * LDC + col]" if resid else ""
                    plus += " + Mat[row * N + col]" if mat else ""
                    store_c.append(f"        {{ let col = col0 + ({h * tx}u + tx) * 4u + {j}u; "
                                   f"if (col < N) {{ C[c_off + row * LDC + col] = acc_{r}_{h}.{xyzw[j]}{plus}; }} }}")
            store_c.append("    } }")
    compute = []
    for kk in range(tile.bk):
        compute.append("        {")
        compute += [f"            let a{g} = As[{kk}][{g * ty}u + ty];" for g in range(gm)]
        compute += [f"            let b{h} = Bs[{kk}][{h * tx}u + tx];" for h in range(gn)]
        for r in range(tile.tm):
            for h in range(gn):
                compute.append(f"            acc_{r}_{h} = fma(vec4<f32>(a{r // 4}.{xyzw[r % 4]}), b{h}, acc_{r}_{h});")
        compute.append("        }")
    decl = "\n".join(f"    var acc_{r}_{h} = vec4<f32>(0.0);" for r in range(tile.tm) for h in range(gn))
    return family_source(
        "matmul", BM=tile.bm, BN=tile.bn, BK=tile.bk, TX=tx, TY=ty, LA=la, LB=lb, ELEM=elem,
        BM4=bm4, BN4=bn4, ACC_DECL=decl,
        BIAS_DECL="\n".join(([f"@group(0) @binding(4) var<storage, read> Bias: array<{elem}>;"] if bias else [])
                             + ([f"@group(0) @binding(5) var<storage, read> Resid: array<{elem}>;"] if resid else [])
                             + ([f"@group(0) @binding(7) var<storage, read> Mat: array<{elem}>;"] if mat else [])),
        ROW0=_row_block(zero)[0], BATCH=_row_block(zero)[1], K_RANGE=_k_range(zero),
        T_LO="t_lo" if zero else "0u", T_HI="t_hi" if zero else "ntiles",
        LOAD_GLOBAL=("if (t_lo < t_hi) {\n        let k0 = t_lo * BK;\n        " if zero
                     else "{ let k0 = 0u;\n        ") + load("k0") + "\n    }",
        LOAD_NEXT=load("k0"), STORE_SHARED="\n        ".join(store_sh),
        COMPUTE="\n".join(compute), STORE_C="\n".join(store_c),
    )
