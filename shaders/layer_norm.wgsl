// layer_norm.wgsl — y = (x - mean) / sqrt(var + eps) * w + b over the last axis, and its
// x-gradient layer_norm_dx.
//
// One workgroup per row of D contiguous elements: a shared-memory sum gives the mean,
// a second pass gives the variance of the centred values (two passes: no cancellation),
// a third writes the output. Uniform words: 0 n_rows  1 D  2 eps
//
// layer_norm_dx (g the gradient of y): dx = r (a - mean(a) - x_hat mean(a x_hat)), a = g * w,
// r = 1/sigma, x_hat = (x - mean) r. The same two passes give the mean and r, a third the two
// means of the rule, a fourth writes dx (layer_norm_dx_xhat also writes x_hat, for dw). A row
// is read four times, but it is a few KB: after the first pass it comes from the cache.

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read> g: array<f32>;
@group(0) @binding(6) var<storage, read_write> dx: array<f32>;
@group(0) @binding(7) var<storage, read_write> xhat_out: array<f32>;
@group(0) @binding(8) var<storage, read> plus: array<f32>;   // the *_plus entries: dx + plus is written

const WG: u32 = 128u;
var<workgroup> sv: array<f32, 128>;

fn wg_sum(li: u32, v: f32) -> f32 {
    sv[li] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (li < s) { sv[li] += sv[li + s]; }
        workgroupBarrier();
    }
    let r = sv[0];
    workgroupBarrier();
    return r;
}

// (mean, 1/sigma) of the row starting at base; every thread of the workgroup calls it
fn row_stats(base: u32, D: u32, li: u32) -> vec2<f32> {
    var s = 0.0;
    for (var j = li; j < D; j += WG) { s += x[base + j]; }
    let mu = wg_sum(li, s) / f32(D);
    var s2 = 0.0;
    for (var j = li; j < D; j += WG) { let d = x[base + j] - mu; s2 += d * d; }
    return vec2<f32>(mu, 1.0 / sqrt(wg_sum(li, s2) / f32(D) + pf(2u)));
}

// (mean(a), mean(a x_hat)) of the row, a = g * w
fn dx_means(base: u32, D: u32, li: u32, st: vec2<f32>) -> vec2<f32> {
    var s = 0.0;
    var sx = 0.0;
    for (var j = li; j < D; j += WG) {
        let a = g[base + j] * w[j];
        s += a;
        sx += a * (x[base + j] - st.x) * st.y;
    }
    return vec2<f32>(wg_sum(li, s), wg_sum(li, sx)) / f32(D);
}

// (mean, 1/sigma, mean(a), mean(a x_hat)) of the workgroup's row; every thread of the workgroup calls it
fn dx_row(base: u32, D: u32, li: u32) -> vec4<f32> {
    let st = row_stats(base, D, li);
    return vec4<f32>(st, dx_means(base, D, li, st));
}

// (dx, x_hat) of element j of the row, from dx_row's four numbers
fn dx_at(base: u32, j: u32, r: vec4<f32>) -> vec2<f32> {
    let xh = (x[base + j] - r.x) * r.y;
    return vec2<f32>(r.y * (g[base + j] * w[j] - r.z - xh * r.w), xh);
}

@compute @workgroup_size(128)
fn layer_norm_dx(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) li: u32) {
    let row = group_index(wid, nwg);
    if (row >= pu(0u)) { return; }
    let D = pu(1u);
    let base = row * D;
    let r = dx_row(base, D, li);
    for (var j = li; j < D; j += WG) { dx[base + j] = dx_at(base, j, r).x; }
}

@compute @workgroup_size(128)
fn layer_norm_dx_xhat(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_index) li: u32) {
    let row = group_index(wid, nwg);
    if (row >= pu(0u)) { return; }
    let D = pu(1u);
    let base = row * D;
    let r = dx_row(base, D, li);
    for (var j = li; j < D; j += WG) {
        let v = dx_at(base, j, r);
        dx[base + j] = v.x;
        xhat_out[base + j] = v.y;   // x_hat too: dw = sum_to(g * x_hat) reads it
    }
}

// The same two, writing dx + plus: a residual block's input adds the gradient of its skip
// connection (plus) to what comes back through the LayerNorm (dx); the add is done here.
@compute @workgroup_size(128)
fn layer_norm_dx_plus(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_index) li: u32) {
    let row = group_index(wid, nwg);
    if (row >= pu(0u)) { return; }
    let D = pu(1u);
    let base = row * D;
    let r = dx_row(base, D, li);
    for (var j = li; j < D; j += WG) { dx[base + j] = dx_at(base, j, r).x + plus[base + j]; }
}

@compute @workgroup_size(128)
fn layer_norm_dx_xhat_plus(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                           @builtin(local_invocation_index) li: u32) {
    let row = group_index(wid, nwg);
    if (row >= pu(0u)) { return; }
    let D = pu(1u);
    let base = row * D;
    let r = dx_row(base, D, li);
    for (var j = li; j < D; j += WG) {
        let v = dx_at(base, j, r);
        dx[base + j] = v.x + plus[base + j];
        xhat_out[base + j] = v.y;
    }
}

@compute @workgroup_size(128)
fn layer_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) li: u32) {
    let row = group_index(wid, nwg);
    if (row >= pu(0u)) { return; }
    let D = pu(1u);
    let base = row * D;
    var s = 0.0;
    for (var j = li; j < D; j += WG) { s += x[base + j]; }
    let mu = wg_sum(li, s) / f32(D);
    var s2 = 0.0;
    for (var j = li; j < D; j += WG) { let d = x[base + j] - mu; s2 += d * d; }
    let rstd = 1.0 / sqrt(wg_sum(li, s2) / f32(D) + pf(2u));
    for (var j = li; j < D; j += WG) { y[base + j] = (x[base + j] - mu) * rstd * w[j] + b[j]; }
}
