// conv.wgsl — conv2d and its two gradient ops, f32, NCHW, any stride / padding /
// dilation / groups. Direct kernels: every output element computes its own sum.
//
// With stride s, padding p and dilation d, output pixel i reads input row
//     h = i * s - p + a * d          for kernel tap a = 0 .. KH-1
// (a row outside 0 .. H-1 is a padding zero). With G groups, output channel o reads the
// input channels of its group, g = o / (O/G): channels g*C/G .. (g+1)*C/G - 1.
//
//   conv2d              y[n,o,i,j]   = sum_{c,a,b} x[n, g*Cg + c, h, w] * k[o, c, a, b]
//   conv2d_grad_input   dx[n,c,h,w]  = sum_{o in c's group, a, b} gy[n, o, i, j] * k[o, c % Cg, a, b]
//                       over the (i, j) whose window tap (a, b) lands on (h, w):
//                       i = (h + p - a*d) / s, only when that division is exact and 0 <= i < OH.
//                       This is the transposed convolution written as a GATHER: each dx
//                       element sums what reaches it, so no two threads write one place
//                       and no atomics are needed.
//   conv2d_grad_weight  dk[o,c,a,b]  = sum_{n,i,j} x[n, g*Cg + c, h, w] * gy[n, o, i, j]
//                       a long sum (N*OH*OW terms) into few outputs: one WORKGROUP per
//                       output, its threads stride over the terms and add up in shared memory.
//
// Uniform words: 0 numel(out)  1 N  2 C  3 H  4 W  5 O  6 OH  7 OW  8 KH  9 KW
//   10 stride_h  11 stride_w  12 pad_h  13 pad_w  14 dil_h  15 dil_w  16 Cg (= C/G)  17 Og (= O/G)

@group(0) @binding(1) var<storage, read> in0: array<f32>;
@group(0) @binding(2) var<storage, read> in1: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

fn ip(i: u32) -> i32 { return i32(pu(i)); }

@compute @workgroup_size(256)
fn conv2d(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) li: u32) {
    // in0 = x (N, C, H, W), in1 = k (O, Cg, KH, KW), out = y (N, O, OH, OW)
    let e = group_index(wid, nwg) * 256u + li;
    if (e >= pu(0u)) { return; }
    let H = ip(3u); let W = ip(4u); let C = pu(2u); let O = pu(5u);
    let OH = pu(6u); let OW = pu(7u); let KH = pu(8u); let KW = pu(9u);
    let Cg = pu(16u); let Og = pu(17u);
    let j = e % OW; let i = (e / OW) % OH; let o = (e / (OW * OH)) % O; let n = e / (OW * OH * O);
    let c0 = (o / Og) * Cg;
    let h0 = i32(i) * ip(10u) - ip(12u);
    let w0 = i32(j) * ip(11u) - ip(13u);
    var acc = 0.0;
    // A tap on the zero padding adds 0 * k: nothing, unless k is NaN or infinite (then NaN, as numpy
    // gets by multiplying the padded zeros). Skipped, but its weight's bits are looked at.
    var padded_bad = false;
    for (var c = 0u; c < Cg; c++) {
        let xrow = (n * C + c0 + c) * u32(H);
        let krow = (o * Cg + c) * KH;
        for (var a = 0u; a < KH; a++) {
            let h = h0 + i32(a) * ip(14u);
            let kb = (krow + a) * KW;
            if (h < 0 || h >= H) {
                for (var b = 0u; b < KW; b++) { padded_bad = padded_bad || not_finite(in1[kb + b]); }
                continue;
            }
            let xb = (xrow + u32(h)) * u32(W);
            for (var b = 0u; b < KW; b++) {
                let w = w0 + i32(b) * ip(15u);
                if (w < 0 || w >= W) { padded_bad = padded_bad || not_finite(in1[kb + b]); continue; }
                acc = fma(in0[xb + u32(w)], in1[kb + b], acc);
            }
        }
    }
    out[e] = select(acc, bitcast<f32>(0x7fc00000u), padded_bad);
}

@compute @workgroup_size(256)
fn conv2d_grad_input(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_index) li: u32) {
    // in0 = gy (N, O, OH, OW), in1 = k (O, Cg, KH, KW), out = dx (N, C, H, W)
    let e = group_index(wid, nwg) * 256u + li;
    if (e >= pu(0u)) { return; }
    let H = pu(3u); let W = pu(4u); let C = pu(2u); let O = pu(5u);
    let OH = ip(6u); let OW = ip(7u); let KH = pu(8u); let KW = pu(9u);
    let sh = ip(10u); let sw = ip(11u);
    let Cg = pu(16u); let Og = pu(17u);
    let w = i32(e % W); let h = i32((e / W) % H); let c = (e / (W * H)) % C; let n = e / (W * H * C);
    let o0 = (c / Cg) * Og;
    let cc = c % Cg;
    var acc = 0.0;
    for (var a = 0u; a < KH; a++) {
        let th = h + ip(12u) - i32(a) * ip(14u);     // = i * stride_h for the window that uses tap a
        if (th < 0 || th % sh != 0 || th / sh >= OH) { continue; }
        let i = u32(th / sh);
        for (var b = 0u; b < KW; b++) {
            let tw = w + ip(13u) - i32(b) * ip(15u);
            if (tw < 0 || tw % sw != 0 || tw / sw >= OW) { continue; }
            let j = u32(tw / sw);
            for (var q = 0u; q < Og; q++) {
                let o = o0 + q;
                acc = fma(in0[((n * O + o) * u32(OH) + i) * u32(OW) + j], in1[((o * Cg + cc) * KH + a) * KW + b], acc);
            }
        }
    }
    out[e] = acc;
}

const WG: u32 = 256u;
var<workgroup> sv: array<f32, 256>;

@compute @workgroup_size(256)
fn conv2d_grad_weight(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_index) li: u32) {
    // in0 = x (N, C, H, W), in1 = gy (N, O, OH, OW), out = dk (O, Cg, KH, KW); a workgroup per dk element
    let e = group_index(wid, nwg);
    if (e >= pu(0u)) { return; }   // uniform per workgroup: safe before the barriers
    let N = pu(1u); let C = pu(2u); let H = ip(3u); let W = ip(4u); let O = pu(5u);
    let OH = pu(6u); let OW = pu(7u); let KH = pu(8u); let KW = pu(9u);
    let Cg = pu(16u); let Og = pu(17u);
    let b = e % KW; let a = (e / KW) % KH; let c = (e / (KW * KH)) % Cg; let o = e / (KW * KH * Cg);
    let cin = (o / Og) * Cg + c;
    let dh = i32(a) * ip(14u) - ip(12u);
    let dw = i32(b) * ip(15u) - ip(13u);
    let terms = N * OH * OW;
    var acc = 0.0;
    var padded_bad = false;   // a padded zero times a NaN or infinite gradient: NaN (as in conv2d)
    for (var t = li; t < terms; t += WG) {
        let j = t % OW; let i = (t / OW) % OH; let n = t / (OW * OH);
        let h = i32(i) * ip(10u) + dh;
        let w = i32(j) * ip(11u) + dw;
        let gy = in1[((n * O + o) * OH + i) * OW + j];
        if (h < 0 || h >= H || w < 0 || w >= W) { padded_bad = padded_bad || not_finite(gy); continue; }
        acc = fma(in0[((n * C + cin) * u32(H) + u32(h)) * u32(W) + u32(w)], gy, acc);
    }
    sv[li] = select(acc, bitcast<f32>(0x7fc00000u), padded_bad);
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (li < s) { sv[li] += sv[li + s]; }
        workgroupBarrier();
    }
    if (li == 0u) { out[e] = sv[0]; }
}
