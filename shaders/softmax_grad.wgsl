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

@compute @workgroup_size(256)
fn softmax_grad_wg(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) li: u32) {
    let lp = select(pu(2u), WG, pu(2u) == 0u);
    let o0 = group_index(wid, nwg) * (WG / lp);
    if (o0 >= pu(0u)) { return; }   // uniform per workgroup: safe before barriers
    let o = o0 + li / lp;
    let lane = li & (lp - 1u);
    let live = o < pu(0u);          // a row past the last one still joins the barriers, with L = 0
    let L = select(0u, pu(1u), live);
    let base = o * pu(1u);
    let c = pf(3u);
    if (pu(1u) <= 8u * lp) {        // uniform: the row fits in registers
        let y0 = ld4_y(base, lane, lp, L);
        let y1 = ld4_y(base, lane + 4u * lp, lp, L);
        let g0 = ld4_g(base, lane, lp, L);
        let g1 = ld4_g(base, lane + 4u * lp, lp, L);
        let s = row_sum(li, hsum(g0 * y0) + hsum(g1 * y1), lp);
        st4(base, lane, lp, L, (y0 * (g0 - s)) * c);
        st4(base, lane + 4u * lp, lp, L, (y1 * (g1 - s)) * c);
        return;
    }
    var acc = 0.0;
    for (var r = lane; r < L; r += lp) { acc += gv[base + r] * yv[base + r]; }
    let s = row_sum(li, acc, lp);
    for (var r = lane; r < L; r += lp) {
        dxv[base + r] = (yv[base + r] * (gv[base + r] - s)) * c;
    }
}

@compute @workgroup_size(256)
fn softmax_grad_t(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) li: u32) {
    let o = group_index(wid, nwg) * WG + li;
    if (o >= pu(0u)) { return; }
    let L = pu(1u);
    let base = o * L;
    let c = pf(3u);
    var s = 0.0;
    for (var r = 0u; r < L; r++) { s += gv[base + r] * yv[base + r]; }
    for (var r = 0u; r < L; r++) { dxv[base + r] = (yv[base + r] * (gv[base + r] - s)) * c; }
}
