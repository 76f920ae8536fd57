// softmax_grad.wgsl — softmax's backward along the last axis, in ONE pass over each row.
//
// What it computes. For y = softmax(x) along the last axis and g = dL/dy, the gradient is
//     dx = y * (g - s),   s = sum(g * y) over the row        (the Jacobian diag(y) - y y^T, applied to g)
// times c when the graph multiplies dx by a scalar constant next (attention's 1/sqrt(d)):
//     out = (y * (g - s)) * c        (c = 1 otherwise: word 3).
// The gradient graph builds this from four nodes (g * y, its row sum, g - s, y * that); run
// as they come, that is a reduction kernel that reads y and g, then an elementwise kernel
// that reads y, g and s again. Here a row's y and g are read ONCE: the kernel keeps them in
// registers while the row's threads add up s, then writes out. That matters for attention,
// whose (B, H, T, T) weights and their gradient are the largest tensors of a training step.
//
// Layout: rows of L contiguous elements (y, g and out have the same shape, row-major), row r
// at r * L. Two entry points, as in softmax.wgsl:
// *_wg: LP threads per row (a power of 2, 32..256: word 2, 0 meaning 256), so a workgroup takes
//   256 / LP rows side by side. A row of at most 8 * LP elements stays in registers (two vec4 of
//   y and two of g per thread, holding elements LP apart, so neighbouring threads read
//   neighbouring addresses); a longer row (over 2048) is read twice: once for s, once for out.
// *_t: a thread per row (short rows, many of them): the row is read twice, from cache.
// Uniform words: 0 n_rows  1 L  2 LP  3 c (f32 bits)
//
// softmax_grad_causal_wg / softmax_grad_causal_t: the same kernels when y is the weights of a
// causal attention (pass causal_tiles: plan.fusion.causal; y is (..., T, T), L = T). Row o is
// query i = o % T; y is exactly 0 at its keys j > i (softmax_causal_* writes 0 there), so there
// each term g * y of s is a zero and each output y * (g - s) * c is a zero. These entries read y
// and g only at j <= i (R = i + 1 elements, loaded as ld4_* loads past the row's end: 0, in the
// same lanes and the same addition tree) and write 0.0 at j > i. Adding a zero to a sum changes
// no value, so s and every output at j <= i are the full kernel's (a zero's sign aside: where the
// full kernel's terms are all -0, from g < 0, s can be -0 here +0; outputs above the diagonal are
// +0 where it wrote 0 * (g - s) * c with either sign). They save the reads of y's and g's upper
// half; a NaN or inf in g above the diagonal (0 * NaN in the full kernel) no longer reaches s.

@group(0) @binding(1) var<storage, read> yv: array<f32>;
@group(0) @binding(2) var<storage, read> gv: array<f32>;
@group(0) @binding(3) var<storage, read_write> dxv: array<f32>;

const WG: u32 = 256u;
var<workgroup> part: array<f32, 256>;

// the sum of v over the lp threads of this thread's row (lp a power of 2); every thread calls it
fn row_sum(li: u32, v: f32, lp: u32) -> f32 {
    part[li] = v;
    workgroupBarrier();
    let lane = li & (lp - 1u);
    for (var s = lp / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) { part[li] = part[li] + part[li + s]; }
        workgroupBarrier();
    }
    let r = part[li - lane];
    workgroupBarrier();   // (the next call writes part[] again)
    return r;
}

// four elements of a row, lp apart from element r on; past the row's end 0 (adds 0 to s)
fn ld4_y(base: u32, r: u32, lp: u32, L: u32) -> vec4<f32> {
    var v = vec4<f32>(0.0);
    if (r < L) { v.x = yv[base + r]; }
    if (r + lp < L) { v.y = yv[base + r + lp]; }
    if (r + 2u * lp < L) { v.z = yv[base + r + 2u * lp]; }
    if (r + 3u * lp < L) { v.w = yv[base + r + 3u * lp]; }
    return v;
}

fn ld4_g(base: u32, r: u32, lp: u32, L: u32) -> vec4<f32> {
    var v = vec4<f32>(0.0);
    if (r < L) { v.x = gv[base + r]; }
    if (r + lp < L) { v.y = gv[base + r + lp]; }
    if (r + 2u * lp < L) { v.z = gv[base + r + 2u * lp]; }
    if (r + 3u * lp < L) { v.w = gv[base + r + 3u * lp]; }
    return v;
}

fn st4(base: u32, r: u32, lp: u32, L: u32, v: vec4<f32>) {
    if (r < L) { dxv[base + r] = v.x; }
    if (r + lp < L) { dxv[base + r + lp] = v.y; }
    if (r + 2u * lp < L) { dxv[base + r + 2u * lp] = v.z; }
    if (r + 3u * lp < L) { dxv[base + r + 3u * lp] = v.w; }
}

fn hsum(v: vec4<f32>) -> f32 { return (v.x + v.y) + (v.z + v.w); }

// the elements a row reads: L; a causal row o (query i = o % L of an (L, L) matrix) reads i + 1
fn read_len(o: u32, L: u32, causal: bool) -> u32 {
    if (!causal || L == 0u) { return L; }
    return min(L, o % L + 1u);
}

// v with 0.0 for the elements r, r + lp, r + 2 lp, r + 3 lp at or past R (the causal entries' keys j > i)
fn upper_zero(v: vec4<f32>, r: u32, lp: u32, R: u32) -> vec4<f32> {
    return select(v, vec4<f32>(0.0), vec4<u32>(r, r + lp, r + 2u * lp, r + 3u * lp) >= vec4<u32>(R));
}

fn softmax_grad_wg_impl(wid: vec3<u32>, nwg: vec3<u32>, li: u32, causal: bool) {
    let lp = select(pu(2u), WG, pu(2u) == 0u);
    let o0 = group_index(wid, nwg) * (WG / lp);
    if (o0 >= pu(0u)) { return; }   // uniform per workgroup: safe before barriers
    let o = o0 + li / lp;
    let lane = li & (lp - 1u);
    let live = o < pu(0u);          // a row past the last one still joins the barriers, with L = 0
    let L = select(0u, pu(1u), live);
    let R = read_len(o, L, causal);  // (L unless causal)
    let base = o * pu(1u);
    let c = pf(3u);
    if (pu(1u) <= 8u * lp) {        // uniform: the row fits in registers
        let y0 = ld4_y(base, lane, lp, R);   // (0 from R on: past the row's end, or above the diagonal)
        let y1 = ld4_y(base, lane + 4u * lp, lp, R);
        let g0 = ld4_g(base, lane, lp, R);
        let g1 = ld4_g(base, lane + 4u * lp, lp, R);
        let s = row_sum(li, hsum(g0 * y0) + hsum(g1 * y1), lp);
        if (causal) {
            st4(base, lane, lp, L, upper_zero((y0 * (g0 - s)) * c, lane, lp, R));
            st4(base, lane + 4u * lp, lp, L, upper_zero((y1 * (g1 - s)) * c, lane + 4u * lp, lp, R));
            return;
        }
        st4(base, lane, lp, L, (y0 * (g0 - s)) * c);
        st4(base, lane + 4u * lp, lp, L, (y1 * (g1 - s)) * c);
        return;
    }
    var acc = 0.0;
    for (var r = lane; r < R; r += lp) { acc += gv[base + r] * yv[base + r]; }
    let s = row_sum(li, acc, lp);
    for (var r = lane; r < L; r += lp) {
        if (causal && r >= R) { dxv[base + r] = 0.0; continue; }
        dxv[base + r] = (yv[base + r] * (gv[base + r] - s)) * c;
    }
}

fn softmax_grad_t_impl(wid: vec3<u32>, nwg: vec3<u32>, li: u32, causal: bool) {
    let o = group_index(wid, nwg) * WG + li;
    if (o >= pu(0u)) { return; }
    let L = pu(1u);
    let R = read_len(o, L, causal);
    let base = o * L;
    let c = pf(3u);
    var s = 0.0;
    for (var r = 0u; r < R; r++) { s += gv[base + r] * yv[base + r]; }
    for (var r = 0u; r < R; r++) { dxv[base + r] = (yv[base + r] * (gv[base + r] - s)) * c; }
    for (var r = R; r < L; r++) { dxv[base + r] = 0.0; }   // (causal: above the diagonal; else none)
}

@compute @workgroup_size(256)
fn softmax_grad_wg(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) li: u32) { softmax_grad_wg_impl(wid, nwg, li, false); }
@compute @workgroup_size(256)
fn softmax_grad_t(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) li: u32) { softmax_grad_t_impl(wid, nwg, li, false); }
@compute @workgroup_size(256)
fn softmax_grad_causal_wg(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                          @builtin(local_invocation_index) li: u32) { softmax_grad_wg_impl(wid, nwg, li, true); }
@compute @workgroup_size(256)
fn softmax_grad_causal_t(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                         @builtin(local_invocation_index) li: u32) { softmax_grad_t_impl(wid, nwg, li, true); }
