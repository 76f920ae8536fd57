// softmax.wgsl — softmax and log_softmax along any axis.
//
// A "row" is the 1-D line along the softmax axis: L elements S apart. The other axes
// number the rows (outer shape and strides, as in reduce.wgsl), so axis=-1, axis=0 or
// a middle axis are the same kernel. Three steps per row: the max (so exp never
// overflows: the largest term is e^0 = 1), the sum of exp(x - max), then the output.
// *_wg keeps a row of up to 8 * LP elements in registers between the steps (read once,
// one exp per element); a longer row is read again at each step.
// *_wg: LP threads per row (a power of 2, 32..256: word 40, 0 meaning 256), so a workgroup
// takes 256 / LP rows side by side (attention rows of 256: 8 rows per workgroup, 8 elements
// per thread); *_t: a thread per row (short rows).
// Uniform words: 0 n_rows  1 L  2 S  3 outer ndim  8..15 outer shape  16..23 outer strides  40 LP
//
// softmax_causal_wg / softmax_causal_t: the same kernels for the weights of a causal attention
// (the pass causal_tiles picks them: the input is (..., T, T) along its last axis, contiguous, a
// mask <= -1e6 added above the diagonal, no key padding bias). Row o is query i = o % T and reads
// only keys j <= i (R = i + 1 elements); it writes exactly 0.0 for j > i without reading them.
// Why the result is the full kernel's, bit for bit: a skipped x holds score + mask <= score - 1e6,
// far below the row's diagonal (never masked; scores are far below 1e6 in size, as causal_tiles
// assumes), and exp(x - max) of it underflows to exactly 0, so the full kernel wrote 0 there. Here a
// skipped element enters the max as -inf and the sum as exp(-inf) = 0, in the same lane and the
// same reduction tree as before: a max over a set that still holds the diagonal is the same max,
// and adding 0 to a sum of non-negative terms changes no bit; its output was 0 * (1 / s) = 0.
// So they only save the reads of the upper half (half the input at long sequences).

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

const WG: u32 = 256u;
var<workgroup> sv: array<f32, 256>;

fn row_base(o: u32) -> u32 {
    // peel the axes off from the last; the first axis takes what is left (no division)
    let nd = pu(3u);
    if (nd == 0u) { return 0u; }
    var rest = o;
    var off = 0u;
    for (var d = nd - 1u; d > 0u; d--) {
        let size = pu(8u + d);
        off += (rest % size) * pu(16u + d);
        rest = rest / size;
    }
    return off + rest * pu(16u);
}

// max (is_max) or sum of v over the lp threads of this thread's segment; every thread calls it
fn seg_combine(li: u32, v: f32, is_max: bool, lp: u32) -> f32 {
    sv[li] = v;
    workgroupBarrier();
    let lane = li & (lp - 1u);
    for (var s = lp / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) { sv[li] = select(sv[li] + sv[li + s], max(sv[li], sv[li + s]), is_max); }
        workgroupBarrier();
    }
    let r = sv[li - lane];
    workgroupBarrier();
    return r;
}

// A row of at most 8 * LP elements stays in registers (two vec4 per thread, each holding elements
// LP apart): read once, one exp per element. A longer row is read three times (max, sum, output).
fn ld4(base: u32, r: u32, lp: u32, S: u32, L: u32) -> vec4<f32> {
    var v = vec4<f32>(-bitcast<f32>(0x7f800000u));   // past the row's end: exp(-inf - m) adds 0
    if (r < L) { v.x = x[base + r * S]; }
    if (r + lp < L) { v.y = x[base + (r + lp) * S]; }
    if (r + 2u * lp < L) { v.z = x[base + (r + 2u * lp) * S]; }
    if (r + 3u * lp < L) { v.w = x[base + (r + 3u * lp) * S]; }
    return v;
}

fn st4(base: u32, r: u32, lp: u32, S: u32, L: u32, v: vec4<f32>) {
    if (r < L) { y[base + r * S] = v.x; }
    if (r + lp < L) { y[base + (r + lp) * S] = v.y; }
    if (r + 2u * lp < L) { y[base + (r + 2u * lp) * S] = v.z; }
    if (r + 3u * lp < L) { y[base + (r + 3u * lp) * S] = v.w; }
}

fn hmax(v: vec4<f32>) -> f32 { return max(max(v.x, v.y), max(v.z, v.w)); }
fn hsum(v: vec4<f32>) -> f32 { return (v.x + v.y) + (v.z + v.w); }

// v with 0.0 for the elements r, r + lp, r + 2 lp, r + 3 lp at or past R (the causal entries' keys j > i)
fn upper_zero(v: vec4<f32>, r: u32, lp: u32, R: u32) -> vec4<f32> {
    return select(v, vec4<f32>(0.0), vec4<u32>(r, r + lp, r + 2u * lp, r + 3u * lp) >= vec4<u32>(R));
}

// the elements a row reads: L; a causal row o (query i = o % L of an (L, L) matrix) reads i + 1
fn read_len(o: u32, L: u32, causal: bool) -> u32 {
    if (!causal || L == 0u) { return L; }
    return min(L, o % L + 1u);
}

fn softmax_wg_impl(wid: vec3<u32>, nwg: vec3<u32>, li: u32, want_log: bool, causal: bool) {
    let lp = select(pu(40u), WG, pu(40u) == 0u);
    let o0 = group_index(wid, nwg) * (WG / lp);
    if (o0 >= pu(0u)) { return; }   // uniform per workgroup: safe before barriers
    let o = o0 + li / lp;
    let lane = li & (lp - 1u);
    let live = o < pu(0u);          // a segment past the last row still joins the barriers
    let base = select(0u, row_base(o), live);
    let L = select(0u, pu(1u), live);
    let R = read_len(o, L, causal);  // (L unless causal)
    let S = pu(2u);
    var m = -bitcast<f32>(0x7f800000u);
    if (pu(1u) <= 8u * lp) {         // uniform: the same for every thread
        let v0 = ld4(base, lane, lp, S, R);   // (-inf from R on: past the row's end, or above the diagonal)
        let v1 = ld4(base, lane + 4u * lp, lp, S, R);
        m = seg_combine(li, max(hmax(v0), hmax(v1)), true, lp);
        let z0 = v0 - m;
        let z1 = v1 - m;
        let e0 = exp(z0);
        let e1 = exp(z1);
        let s = seg_combine(li, hsum(e0) + hsum(e1), false, lp);
        if (want_log) {
            let ls = log(s);
            st4(base, lane, lp, S, L, z0 - ls);
            st4(base, lane + 4u * lp, lp, S, L, z1 - ls);
        } else if (causal) {
            let inv = 1.0 / s;
            st4(base, lane, lp, S, L, upper_zero(e0 * inv, lane, lp, R));
            st4(base, lane + 4u * lp, lp, S, L, upper_zero(e1 * inv, lane + 4u * lp, lp, R));
        } else {
            let inv = 1.0 / s;
            st4(base, lane, lp, S, L, e0 * inv);
            st4(base, lane + 4u * lp, lp, S, L, e1 * inv);
        }
        return;
    }
    for (var r = lane; r < R; r += lp) { m = max(m, x[base + r * S]); }
    m = seg_combine(li, m, true, lp);
    var s = 0.0;
    for (var r = lane; r < R; r += lp) { s += exp(x[base + r * S] - m); }
    s = seg_combine(li, s, false, lp);
    let inv = 1.0 / s;
    let ls = log(s);
    for (var r = lane; r < L; r += lp) {
        if (causal && r >= R) { y[base + r * S] = 0.0; continue; }
        let z = x[base + r * S] - m;
        y[base + r * S] = select(exp(z) * inv, z - ls, want_log);
    }
}

fn softmax_t_impl(wid: vec3<u32>, nwg: vec3<u32>, li: u32, want_log: bool, causal: bool) {
    let o = group_index(wid, nwg) * WG + li;
    if (o >= pu(0u)) { return; }
    let base = row_base(o);
    let L = pu(1u);
    let R = read_len(o, L, causal);
    let S = pu(2u);
    var m = -bitcast<f32>(0x7f800000u);
    for (var r = 0u; r < R; r++) { m = max(m, x[base + r * S]); }
    var s = 0.0;
    for (var r = 0u; r < R; r++) { s += exp(x[base + r * S] - m); }
    let inv = 1.0 / s;
    let ls = log(s);
    for (var r = R; r < L; r++) { y[base + r * S] = 0.0; }   // (causal: above the diagonal; else none)
    for (var r = 0u; r < R; r++) {
        let z = x[base + r * S] - m;
        y[base + r * S] = select(exp(z) * inv, z - ls, want_log);
    }
}

@compute @workgroup_size(256)
fn softmax_wg(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) li: u32) { softmax_wg_impl(wid, nwg, li, false, false); }
@compute @workgroup_size(256)
fn log_softmax_wg(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) li: u32) { softmax_wg_impl(wid, nwg, li, true, false); }
@compute @workgroup_size(256)
fn softmax_t(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) li: u32) { softmax_t_impl(wid, nwg, li, false, false); }
@compute @workgroup_size(256)
fn log_softmax_t(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) li: u32) { softmax_t_impl(wid, nwg, li, true, false); }
@compute @workgroup_size(256)
fn softmax_causal_wg(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_index) li: u32) { softmax_wg_impl(wid, nwg, li, false, true); }
@compute @workgroup_size(256)
fn softmax_causal_t(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) li: u32) { softmax_t_impl(wid, nwg, li, false, true); }
