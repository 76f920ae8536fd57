// pool.wgsl — max_pool2d, avg_pool2d and their gradient ops, f32, NCHW.
//
// Window (i, j) of a KH x KW pool with stride s and padding p covers input rows
// i*s - p .. i*s - p + KH - 1 (and columns likewise); rows outside the image are padding.
//
// Max pooling: the padding counts as -inf, and the window's winner is its FIRST maximum
// in row-major tap order (a*KW + b): a later tap must be strictly larger to take over,
// exactly numpy's argmax and PyTorch's rule. A NaN beats any number (numpy's argmax and
// max both pick the first NaN). Every max-pool kernel finds winners with the same
// `winner` function, so the forward value, the gradient and the gather always agree.
//
//   max_pool2d         y[i,j]  = x at the winner of window (i, j)
//   max_pool2d_grad    dx[h,w] = sum of g[i,j] over the windows whose winner is (h, w)
//   max_pool2d_gather  y[i,j]  = u at the winner of window (i, j) (always a real element)
//   avg_pool2d         y[i,j]  = sum of the window / (KH*KW)   (padding counts as 0, and counts)
//   avg_pool2d_grad    dx[h,w] = sum of g[i,j] / (KH*KW) over the windows that cover (h, w)
//
// The two gradients are written as GATHERS: each dx element visits the few windows that
// can cover it (i from ceil((h+p-KH+1)/s) to floor((h+p)/s)) and sums what they send, so
// no two threads write one place and no atomics are needed.
// Uniform words: 0 numel(out)  1 N  2 C  3 H  4 W  5 OH  6 OW  7 KH  8 KW
//   9 stride_h  10 stride_w  11 pad_h  12 pad_w

@group(0) @binding(1) var<storage, read> in0: array<f32>;
@group(0) @binding(2) var<storage, read> in1: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

fn ip(i: u32) -> i32 { return i32(pu(i)); }

// The input value at padded coordinates (h, w) of image plane `plane`; padding -> `fill`.
fn xval(plane: u32, h: i32, w: i32, fill: f32) -> f32 {
    if (h < 0 || w < 0 || h >= ip(3u) || w >= ip(4u)) { return fill; }
    return in0[(plane * pu(3u) + u32(h)) * pu(4u) + u32(w)];
}

// The winner of window (i, j) of image plane `plane`: (h, w) in input coordinates and
// the value there. The search starts at the window's first REAL element (padding is at
// most half the kernel, so there is one), as PyTorch's does: a padding -inf never beats
// it, so a window whose real elements are all -inf sends its gradient to a real element
// rather than into the padding, where it would be lost.
struct Win { h: i32, w: i32, v: f32 }

fn winner(plane: u32, i: u32, j: u32) -> Win {
    let NEG_INF = -bitcast<f32>(0x7f800000u);
    let h0 = i32(i) * ip(9u) - ip(11u);
    let w0 = i32(j) * ip(10u) - ip(12u);
    let hr = max(h0, 0);
    let wr = max(w0, 0);
    var best = Win(hr, wr, xval(plane, hr, wr, NEG_INF));
    for (var a = 0; a < ip(7u); a++) {
        for (var b = 0; b < ip(8u); b++) {
            let v = xval(plane, h0 + a, w0 + b, NEG_INF);
            if (v > best.v || (is_nan(v) && !is_nan(best.v))) { best = Win(h0 + a, w0 + b, v); }
        }
    }
    return best;
}

// The range of windows along one axis that cover input coordinate x: [lo, hi] (empty if lo > hi).
fn covering(x: i32, k: i32, s: i32, p: i32, n_out: i32) -> vec2<i32> {
    let t = x + p;                                    // window i covers x when i*s <= t < i*s + k
    let lo = max(0, (max(t - k + 1, 0) + s - 1) / s);  // ceil((t - k + 1) / s), at least 0
    let hi = min(n_out - 1, t / s);
    return vec2<i32>(lo, hi);
}

@compute @workgroup_size(256)
fn max_pool2d(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) li: u32) {
    let e = group_index(wid, nwg) * 256u + li;
    if (e >= pu(0u)) { return; }
    let OH = pu(5u); let OW = pu(6u);
    out[e] = winner(e / (OH * OW), (e / OW) % OH, e % OW).v;
}

@compute @workgroup_size(256)
fn max_pool2d_gather(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_index) li: u32) {
    // in0 = x, in1 = u (both N, C, H, W); out (N, C, OH, OW)
    let e = group_index(wid, nwg) * 256u + li;
    if (e >= pu(0u)) { return; }
    let OH = pu(5u); let OW = pu(6u);
    let plane = e / (OH * OW);
    let best = winner(plane, (e / OW) % OH, e % OW);
    var v = 0.0;
    if (best.h >= 0 && best.w >= 0 && best.h < ip(3u) && best.w < ip(4u)) {
        v = in1[(plane * pu(3u) + u32(best.h)) * pu(4u) + u32(best.w)];
    }
    out[e] = v;
}

@compute @workgroup_size(256)
fn max_pool2d_grad(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) li: u32) {
    // in0 = x (N, C, H, W), in1 = g (N, C, OH, OW); out dx (N, C, H, W)
    let e = group_index(wid, nwg) * 256u + li;
    if (e >= pu(0u)) { return; }
    let H = pu(3u); let W = pu(4u); let OH = ip(5u); let OW = ip(6u);
    let w = i32(e % W); let h = i32((e / W) % H); let plane = e / (W * H);
    let ri = covering(h, ip(7u), ip(9u), ip(11u), OH);
    let rj = covering(w, ip(8u), ip(10u), ip(12u), OW);
    var acc = 0.0;
    for (var i = ri.x; i <= ri.y; i++) {
        for (var j = rj.x; j <= rj.y; j++) {
            let best = winner(plane, u32(i), u32(j));
            if (best.h == h && best.w == w) { acc += in1[(plane * u32(OH) + u32(i)) * u32(OW) + u32(j)]; }
        }
    }
    out[e] = acc;
}

@compute @workgroup_size(256)
fn avg_pool2d(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) li: u32) {
    let e = group_index(wid, nwg) * 256u + li;
    if (e >= pu(0u)) { return; }
    let OH = pu(5u); let OW = pu(6u);
    let plane = e / (OH * OW);
    let h0 = i32((e / OW) % OH) * ip(9u) - ip(11u);
    let w0 = i32(e % OW) * ip(10u) - ip(12u);
    var acc = 0.0;
    for (var a = 0; a < ip(7u); a++) {
        for (var b = 0; b < ip(8u); b++) { acc += xval(plane, h0 + a, w0 + b, 0.0); }
    }
    out[e] = acc / f32(pu(7u) * pu(8u));
}

@compute @workgroup_size(256)
fn avg_pool2d_grad(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) li: u32) {
    // in0 = g (N, C, OH, OW); out dx (N, C, H, W)
    let e = group_index(wid, nwg) * 256u + li;
    if (e >= pu(0u)) { return; }
    let H = pu(3u); let W = pu(4u); let OH = ip(5u); let OW = ip(6u);
    let w = i32(e % W); let h = i32((e / W) % H); let plane = e / (W * H);
    let ri = covering(h, ip(7u), ip(9u), ip(11u), OH);
    let rj = covering(w, ip(8u), ip(10u), ip(12u), OW);
    var acc = 0.0;
    for (var i = ri.x; i <= ri.y; i++) {
        for (var j = rj.x; j <= rj.y; j++) { acc += in0[(plane * u32(OH) + u32(i)) * u32(OW) + u32(j)]; }
    }
    out[e] = acc / f32(pu(7u) * pu(8u));
}
