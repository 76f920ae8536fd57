// layer_norm.wgsl — y = (x - mean) / sqrt(var + eps) * w + b over the last axis.
//
// One workgroup per row of D contiguous elements: a shared-memory sum gives the mean,
// a second pass gives the variance of the centred values (two passes: no cancellation),
// a third writes the output. Uniform words: 0 n_rows  1 D  2 eps

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

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
