"""Builds the matmul kernel from the template in ``shaders/matmul.wgsl``.

The template fixes the algorithm (tiles in shared memory, a register block per thread,
the next tile prefetched into registers); this module picks the tile sizes and writes
out the parts that must be unrolled — the multiply-add block and the stores — so the
accumulators are plain variables the GPU compiler keeps in registers.

Tile sizes are a choice per GPU. ``ASGTEACH_WGPU_MATMUL_TILE=BMxBNxBKxTMxTN`` overrides
the default (bench/matmul_gpu.py measures several on a real GPU); options may follow the
sizes, each after a ``-``: ``s1`` / ``s2`` (one or two copies of the shared tiles) and
``gN`` (workgroups walk C's tiles N tile rows at a time). A tile written without options
has the default ones.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from .wgpu_device import family_source

__all__ = ["Tile", "DEFAULT_TILE", "FALLBACK_TILES", "SHARED_BYTES", "candidates", "tile_from_env",
           "matmul_source"]

#: workgroup memory a tile may use: what lavapipe offers (an H100 offers 48 KiB; WebGPU promises 16)
SHARED_BYTES = 32768


@dataclass(frozen=True)
class Tile:
    """BM x BN outputs per workgroup, K steps of BK, TM x TN outputs per thread.

    ``stages``: copies of the shared A and B tiles. With 2, the threads store tile t + 1
    into one copy while others may still read tile t from the other, so one barrier per
    K step suffices instead of two. ``group``: workgroups take C's tiles this many tile
    rows at a time (1: row by row), so the ones running together share more of A and B
    in the L2 cache.
    """

    bm: int = 128
    bn: int = 128
    bk: int = 16
    tm: int = 8
    tn: int = 8
    stages: int = 1
    group: int = 1
    keep: str = ""
    pairs: bool = False

    @property
    def threads(self) -> tuple[int, int]:
        return self.bn // self.tn, self.bm // self.tm

    @property
    def shared_bytes(self) -> int:
        """Workgroup memory of the shared tiles: each copy holds BK x BM of A and BK x BN of B (and a
        vec4 of padding per 4 rows of a kept operand)."""
        pad = (self.bm // 4 if "a" in self.keep else 0) + (self.bn // 4 if "b" in self.keep else 0)
        pad += 2 * self.bk if self.pairs else 0
        return self.stages * (self.bk * (self.bm + self.bn) * 4 + pad * 16)

    def check(self) -> None:
        tx, ty = self.threads
        t = tx * ty
        ok = (self.tm % 4 == 0 and self.tn % 4 == 0 and self.bk % 4 == 0 and self.bm % self.tm == 0
              and self.bn % self.tn == 0 and t <= 256 and self.stages in (1, 2) and self.group >= 1
              and self.shared_bytes <= SHARED_BYTES)
        if not ok:
            raise ValueError(f"matmul tile {self} is not usable (TM, TN, BK multiples of 4; <= 256 threads; "
                             f"1 or 2 stages; shared tiles of at most {SHARED_BYTES} bytes)")

    def __str__(self) -> str:
        text = f"{self.bm}x{self.bn}x{self.bk}x{self.tm}x{self.tn}"
        if self.stages != Tile.stages:
            text += f"-s{self.stages}"
        if self.group != Tile.group:
            text += f"-g{self.group}"
        if self.keep != Tile.keep:
            text += f"-d{self.keep}"
        if self.pairs:
            text += "-p"
        return text

    @classmethod
    def parse(cls, text: str) -> "Tile":
        """A tile written ``BMxBNxBKxTMxTN[-sS][-gG]``, e.g. ``128x128x16x8x8`` or ``128x128x8x8x8-s2-g8``."""
        sizes, *options = text.strip().lower().split("-")
        opts = {}
        for o in options:
            if o[:1] in ("s", "g") and o[1:].isdigit():
                opts["stages" if o[0] == "s" else "group"] = int(o[1:])
            elif o in ("d", "da", "db", "dab"):
                opts["keep"] = o[1:] or "ab"
            elif o == "p":
                opts["pairs"] = True
            else:
                raise ValueError(f"matmul tile {text!r}: option {o!r} is not usable (sS: stages, gG: group)")
        tile = cls(*(int(v) for v in sizes.split("x")), **opts)
        tile.check()
        return tile

    def with_sizes(self, other: "Tile") -> "Tile":
        """``other``'s sizes with this tile's options."""
        return Tile(other.bm, other.bn, other.bk, other.tm, other.tn, self.stages, self.group, self.keep,
                    self.pairs)


DEFAULT_TILE = Tile(128, 128, 16, 8, 8)   # best of the sweep on an H100 (bench/matmul_gpu.py)
#: tried in order when the sizes are not multiples of the preferred tile, before the edge kernel
FALLBACK_TILES = (Tile(128, 64, 16, 8, 4), Tile(64, 128, 16, 4, 8), Tile(64, 64, 16, 4, 4), Tile(64, 64, 8, 4, 4))


def candidates(tile: Tile) -> tuple[Tile, ...]:
    """The tiles a product may use, in order of preference: ``tile``, then the fallback sizes with its options."""
    return (tile, *(tile.with_sizes(f) for f in FALLBACK_TILES))


def tile_from_env() -> Tile:
    text = os.environ.get("ASGTEACH_WGPU_MATMUL_TILE", "").strip()
    if not text:
        return DEFAULT_TILE
    return Tile.parse(text)


@functools.lru_cache(maxsize=64)
def matmul_source(tile: Tile, fast: bool, ta: bool = False, tb: bool = False, bias: bool = False,
                  resid: bool = False, mat: bool = False, scale: bool = False) -> str:
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
    # kept: an operand whose rows run along k in memory (A stored (M, K), B stored (N, K)) stays so in
    # shared memory, [row / 4][(row % 4) * BK/4 + k / 4]: stored as whole vec4s, never split
    a_kept = fast and not ta and "a" in tile.keep
    b_kept = fast and tb and "b" in tile.keep

    # pairs: the tile of an operand transposed on its way in (A stored (M, K), B stored (N, K)) is read by
    # pairs of threads, each pair one 32-byte sector of a row (2 vec4s along k), 16 rows per warp; the
    # shared rows are padded by one vec4, so the pair's two rows (k and k + 4) fall 16 banks apart
    pairs = tile.pairs and bk4 % 2 == 0
    a_rows, b_rows = tile.bm, tile.bn

    def split(name: str, rows: int) -> str:
        if pairs:
            return f"let {name} = (idx / 2u) % {rows}u; let q = (idx / {2 * rows}u) * 2u + idx % 2u;"
        return f"let {name} = idx / {bk4}u; let q = idx % {bk4}u;"

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
                lines = [each(i, na, f"{split('r', a_rows)} "
                                     f"ra[{i}] = A[(a_off + (row0 + r) * LDA + {k0}) / 4u + q];") for i in range(la)]
            if tb:
                lines += [each(i, nb, f"{split('c', b_rows)} "
                                      f"rb[{i}] = B[(b_off + (col0 + c) * LDB + {k0}) / 4u + q];") for i in range(lb)]
            else:
                lines += [each(i, nb, f"let k = idx / {bn4}u; let q = idx % {bn4}u; "
                                      f"rb[{i}] = B[(b_off + ({k0} + k) * LDB + col0) / 4u + q];") for i in range(lb)]
            return "\n        ".join(lines)

        def store_sh(a_s: str, b_s: str) -> str:
            # into shared tiles a_s and b_s ([k][m / 4], [k][n / 4]): a vec4 along k goes in as 4 floats
            out = []
            for i in range(la):
                if ta:
                    out.append(each(i, na, f"{a_s}[idx / {bm4}u][idx % {bm4}u] = ra[{i}];"))
                elif a_kept:
                    out.append(each(i, na, f"{split('r', a_rows)} {a_s}[r / 4u][(r % 4u) * {bk4}u + q] = ra[{i}];"))
                else:
                    comps = " ".join(f"{a_s}[q * 4u + {j}u][r / 4u][r % 4u] = ra[{i}].{xyzw[j]};"
                                     for j in range(4))
                    out.append(each(i, na, f"{split('r', a_rows)} {comps}"))
            for i in range(lb):
                if b_kept:
                    out.append(each(i, nb, f"{split('c', b_rows)} {b_s}[c / 4u][(c % 4u) * {bk4}u + q] = rb[{i}];"))
                elif tb:
                    comps = " ".join(f"{b_s}[q * 4u + {j}u][c / 4u][c % 4u] = rb[{i}].{xyzw[j]};"
                                     for j in range(4))
                    out.append(each(i, nb, f"{split('c', b_rows)} {comps}"))
                else:
                    out.append(each(i, nb, f"{b_s}[idx / {bn4}u][idx % {bn4}u] = rb[{i}];"))
            return "\n        ".join(out)
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

        def store_sh(a_s: str, b_s: str) -> str:
            out = [each(i, na, f"{a_map[0]} {a_s}[k][r / 4u][r % 4u] = ra[{i}];") for i in range(la)]
            out += [each(i, nb, f"{b_map[0]} {b_s}[k][n / 4u][n % 4u] = rb[{i}];") for i in range(lb)]
            return "\n        ".join(out)
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
    def compute(a_s: str, b_s: str) -> str:
        # the BK steps of a tile, unrolled: each reads TM/4 + TN/4 vec4s and does TM*TN/4 vec4 FMAs
        out = [f"        // the {tile.bk} K steps of the tile in {a_s} and {b_s}: "
               f"{gm + gn} vec4 reads and {tile.tm * gn} vec4 FMAs each"]
        if not (a_kept or b_kept):
            for kk in range(tile.bk):
                out.append("        {")
                out += [f"            let a{g} = {a_s}[{kk}][{g * ty}u + ty];" for g in range(gm)]
                out += [f"            let b{h} = {b_s}[{kk}][{h * tx}u + tx];" for h in range(gn)]
                for r in range(tile.tm):
                    for h in range(gn):
                        out.append(f"            acc_{r}_{h} = fma(vec4<f32>(a{r // 4}.{xyzw[r % 4]}), b{h}, "
                                   f"acc_{r}_{h});")
                out.append("        }")
            return "\n".join(out)
        # a kept operand is read 4 K steps at a time: one vec4 per row holds k .. k + 3
        for q in range(bk4):
            out.append(f"        {{   // K steps {4 * q} .. {4 * q + 3}")
            if a_kept:
                out += [f"            let a{g}_{j} = {a_s}[{g * ty}u + ty][{j * bk4 + q}];   // row {j} of group {g}"
                        for g in range(gm) for j in range(4)]
            if b_kept:
                out += [f"            let b{h}_{j} = {b_s}[{h * tx}u + tx][{j * bk4 + q}];"
                        for h in range(gn) for j in range(4)]
            for c in range(4):
                kk = 4 * q + c
                out.append("            {")
                if not a_kept:
                    out += [f"                let a{g} = {a_s}[{kk}][{g * ty}u + ty];" for g in range(gm)]
                for h in range(gn):
                    if b_kept:
                        parts = ", ".join(f"b{h}_{j}.{xyzw[c]}" for j in range(4))
                        out.append(f"                let b{h} = vec4<f32>({parts});")
                    else:
                        out.append(f"                let b{h} = {b_s}[{kk}][{h * tx}u + tx];")
                for r in range(tile.tm):
                    a = f"a{r // 4}_{r % 4}.{xyzw[c]}" if a_kept else f"a{r // 4}.{xyzw[r % 4]}"
                    for h in range(gn):
                        out.append(f"                acc_{r}_{h} = fma(vec4<f32>({a}), b{h}, acc_{r}_{h});")
                out.append("            }")
            out.append("        }")
        return "\n".join(out)

    def next_tile(t_next: str) -> str:
        return f"    let k0 = ({t_next}) * BK;\n            " + load("k0").replace("\n", "\n    ")

    nl = "\n"
    pad = "   (+ 1 vec4: rows 4 * BK/4 + 1 vec4s apart fall in different banks)"
    kept = "var<workgroup> {}: array<array<vec4<f32>, {}>, {}>;   // [{} / 4][({} % 4) * BK/4 + k / 4]" + pad
    plain = "var<workgroup> {}: array<array<vec4<f32>, {}>, BK>;   // [k][{} / 4]"
    shared = (kept.format("{a}", 4 * bk4 + 1, bm4, "m", "m") if a_kept else plain.format("{a}", bm4 + pairs, "m"))
    shared += "\n" + (kept.format("{b}", 4 * bk4 + 1, bn4, "n", "n") if b_kept
                      else plain.format("{b}", bn4 + pairs, "n"))
    if tile.stages == 1:
        shared_decl = shared.format(a="As", b="Bs")
        loop = f"""    for (var t = 0u; t < ntiles; t++) {{
        {store_sh("As", "Bs")}
        workgroupBarrier();   // the tile is all in shared memory
        if (t + 1u < ntiles) {{   // the next tile: in flight while we multiply
        {next_tile("t + 1u")}
        }}
{compute("As", "Bs")}
        workgroupBarrier();   // nobody reads the tile any more: the next store may overwrite it
    }}"""
    else:
        shared_decl = shared.format(a="As0", b="Bs0") + "\n" + shared.format(a="As1", b="Bs1")
        loop = f"""    {store_sh("As0", "Bs0")}
    workgroupBarrier();
    // tile t is in copy 0, tile t + 1 in copy 1: two tiles per trip, one barrier each
    for (var t = 0u; t < ntiles; t += 2u) {{
        if (t + 1u < ntiles) {{   // tile t + 1: in flight while we multiply tile t
        {next_tile("t + 1u")}
        }}
{compute("As0", "Bs0")}
        if (t + 1u < ntiles) {{   // copy 1 is free: every thread passed the barrier after multiplying it
            {store_sh("As1", "Bs1").replace(nl, nl + "    ")}
        }}
        workgroupBarrier();   // tile t + 1 is all in copy 1, and nobody reads copy 0 any more
        if (t + 1u == ntiles) {{ break; }}
        if (t + 2u < ntiles) {{
        {next_tile("t + 2u")}
        }}
{compute("As1", "Bs1")}
        if (t + 2u < ntiles) {{
            {store_sh("As0", "Bs0").replace(nl, nl + "    ")}
        }}
        workgroupBarrier();
    }}"""
    if tile.group > 1:
        tile_pos = """    // this workgroup's tile of C, GROUP tile rows at a time (see the header)
    let tiles_n = (N + BN - 1u) / BN;
    let tiles_m = (M + BM - 1u) / BM;
    let id = wid.y * tiles_n + wid.x;
    let first = (id / (GROUP * tiles_n)) * GROUP;       // the group's first tile row
    let rows = min(tiles_m - first, GROUP);             // the last group may be shorter
    let in_group = id % (GROUP * tiles_n);
    let row0 = (first + in_group % rows) * BM;
    let col0 = (in_group / rows) * BN;"""
    else:
        tile_pos = "    let row0 = wid.y * BM;\n    let col0 = wid.x * BN;"
    decl = "\n".join(f"    var acc_{r}_{h} = vec4<f32>(0.0);" for r in range(tile.tm) for h in range(gn))
    return family_source(
        "matmul", BM=tile.bm, BN=tile.bn, BK=tile.bk, TX=tx, TY=ty, LA=la, LB=lb, ELEM=elem,
        ACC_DECL=decl, GROUP=tile.group, SHARED_DECL=shared_decl, TILE_POS=tile_pos,
        BIAS_DECL="\n".join(([f"@group(0) @binding(4) var<storage, read> Bias: array<{elem}>;"] if bias else [])
                             + ([f"@group(0) @binding(5) var<storage, read> Resid: array<{elem}>;"] if resid else [])
                             + ([f"@group(0) @binding(7) var<storage, read> Mat: array<{elem}>;"] if mat else [])),
        LOAD_GLOBAL="{ let k0 = 0u;\n        " + load("k0") + "\n    }",
        MAIN_LOOP=loop, STORE_C="\n".join(store_c),
    )
