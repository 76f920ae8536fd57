// attention_common.wgsl — what the fused attention kernels share (pasted into attention_fwd.wgsl and
// attention_bwd.wgsl by the pass wgpu_passes/attention.py; not a kernel of its own).
//
// The kernels see one head at a time: Q, K, V, O, dO, dQ, dK, dV are (T, DH) matrices of head
// (b, h). Where each one lives is four strides in the uniform block (b, h, t, d), in elements, so
// a head can be read straight out of the (B, T, H * DH) projection it was split from, and a result
// written straight into the layout of the transposes that merge the heads again. No (T, T) score
// matrix exists anywhere: a workgroup keeps a tile of keys (or queries) in workgroup memory and
// each thread recomputes the scores of its row against that tile.
//
// Uniform words: 0 T  1 H  2 B*H  3 row blocks per head  4 scale  5 the causal mask's value
//   8..11 Q strides (b, h, t, d)  12..15 K  16..19 V  20..23 O  24..27 dO  28..31 dQ  32..35 dK
//   36..39 dV  40..42 key-bias strides (b, h, key)
// Filled in by the pass: DH (the head size), D4 = ceil(DH / 4) (a row is D4 vec4s, zero-padded),
// TILE (keys or queries per tile), CAUSAL, BIAS, CAUSAL_FIRST (the order of the two adds, as the
// graph adds them: the same roundings), SKIP (causal without a bias: tiles wholly above the
// diagonal add exactly 0 and are not visited).

const ROWS: u32 = {{ROWS}}u;   // threads per workgroup: one row (query or key) each
const DH: u32 = {{DH}}u;
const D4: u32 = {{D4}}u;
const TILE: u32 = {{TILE}}u;
const CAUSAL: bool = {{CAUSAL}};
const BIAS: bool = {{BIAS}};
const CAUSAL_FIRST: bool = {{CAUSAL_FIRST}};
const SKIP: bool = {{SKIP}};

// the element offset of head bh of the operand whose strides start at word w
fn head(w: u32, bh: u32) -> u32 {
    let b = bh / pu(1u);
    let h = bh - b * pu(1u);
    return b * pu(w) + h * pu(w + 1u);
}

// the score of query i and key j once the graph's adds are applied, in the graph's order
// (s is already q.k * scale; bias is the key bias of key j, 0 without one)
fn masked(s: f32, i: u32, j: u32, bias: f32) -> f32 {
    var x = s;
    if (CAUSAL && CAUSAL_FIRST) { x = x + select(0.0, pf(5u), j > i); }
    if (BIAS) { x = x + bias; }
    if (CAUSAL && !CAUSAL_FIRST) { x = x + select(0.0, pf(5u), j > i); }
    return x;
}

fn neg_inf() -> f32 { return -bitcast<f32>(0x7f800000u); }   // a running max before any score

fn hsum4(v: vec4<f32>) -> f32 { return (v.x + v.y) + (v.z + v.w); }

// a dot product kept as four partial vec4 sums (acc[c % 4]): four chains of FMAs that do not wait for
// each other, instead of one chain of D4; this adds them up
fn sum16(a: array<vec4<f32>, 4>) -> f32 { return hsum4((a[0] + a[1]) + (a[2] + a[3])); }

// numpy's softmax of a row holding NaN or +inf is NaN: such a score poisons its row
fn poisons(s: f32) -> bool { return is_nan(s) || (not_finite(s) && s > 0.0); }
