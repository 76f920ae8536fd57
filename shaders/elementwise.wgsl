// elementwise.wgsl — every unary, binary and ternary elementwise op (add ... where).
//
// One thread per output element. The output is contiguous; each input is read through
// its own strides in the output's index space (stride 0 = that axis was broadcast), so
// numpy broadcasting needs no special case. Inputs whose shape equals the output's are
// flagged "contiguous" and read at the thread's own index, skipping the div/mod walk.
//
// The backend substitutes the OP_EXPR placeholder with the op's formula in a, b, c (the inputs) and
// attr0 / attr1 (float attributes such as leaky_relu's slope). Uniform words:
//   0 numel  1 ndim  2 NaN bits  3 attr0  4 attr1  5 contiguity bits  6 where-cond is int
//   8..15 output shape   16..23 / 24..31 / 32..39 strides of inputs 0 / 1 / 2

@group(0) @binding(1) var<storage, read> in0: array<u32>;
@group(0) @binding(2) var<storage, read> in1: array<u32>;
@group(0) @binding(3) var<storage, read> in2: array<u32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

fn nan() -> f32 { return bitcast<f32>(pu(2u)); }

fn offset_of(i: u32, which: u32) -> u32 {
    if ((pu(5u) >> which & 1u) == 1u) { return i; }
    var rest = i;
    var off = 0u;
    let nd = pu(1u);
    for (var k = 0u; k < nd; k++) {
        let d = nd - 1u - k;
        let size = pu(8u + d);
        off += (rest % size) * pu(16u + which * 8u + d);
        rest = rest / size;
    }
    return off;
}

// --- scalar functions with numpy's semantics (WGSL leaves some cases undefined) ------
fn f_log(x: f32) -> f32 { return select(log(x), nan(), x < 0.0 || x != x); }
fn f_sqrt(x: f32) -> f32 { return select(sqrt(x), nan(), x < 0.0 || x != x); }
fn f_relu(x: f32) -> f32 { return select(0.0, x, x > 0.0 || x != x); }
fn f_max(a: f32, b: f32) -> f32 { return select(max(a, b), nan(), a != a || b != b); }
fn f_min(a: f32, b: f32) -> f32 { return select(min(a, b), nan(), a != a || b != b); }

fn f_tanh(x: f32) -> f32 {
    // (1 - e^-2|x|) / (1 + e^-2|x|) never overflows; a short series keeps tiny x exact
    let ax = abs(x);
    if (ax < 0.004) { return x - x * x * x / 3.0; }
    let t = exp(-2.0 * ax);
    return sign(x) * (1.0 - t) / (1.0 + t);
}

fn f_sigmoid(x: f32) -> f32 {
    let e = exp(-abs(x));
    return select(e / (1.0 + e), 1.0 / (1.0 + e), x >= 0.0);
}

fn f_log1p(e: f32) -> f32 {
    // log(1 + e) without losing e when it is tiny (the classic u - 1 correction)
    let u = 1.0 + e;
    if (u == 1.0) { return e; }
    return log(u) * e / (u - 1.0);
}

fn f_softplus(x: f32, beta: f32) -> f32 {
    let z = beta * x;
    return (max(z, 0.0) + f_log1p(exp(-abs(z)))) / beta;
}

fn f_erf(x: f32) -> f32 {
    // |x| < 0.5: Taylor series (next term < 2e-8). Otherwise erf = 1 - erfc with the
    // Chebyshev fit of Numerical Recipes (fractional error < 1.2e-7 everywhere).
    let z = abs(x);
    if (z < 0.5) {
        let x2 = x * x;
        return 1.1283791670955126 * x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (0.1 + x2 * (-1.0 / 42.0
               + x2 * (1.0 / 216.0 + x2 * (-1.0 / 1320.0))))));
    }
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
               + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
    return sign(x) * (1.0 - t * exp(poly));
}

fn f_pow(a: f32, b: f32) -> f32 {
    // numpy: any base to an integer power (x**2 of a negative x is fine), NaN for a
    // negative base to a fractional power. Small integer powers multiply exactly.
    if (b == 0.0) { return 1.0; }
    if (a != a || b != b) { return nan(); }
    let integral = b == round(b);
    if (integral && abs(b) <= 32.0) {
        var n = u32(abs(b));
        var base = a;
        var r = 1.0;
        loop {
            if ((n & 1u) == 1u) { r *= base; }
            n = n >> 1u;
            if (n == 0u) { break; }
            base *= base;
        }
        return select(r, 1.0 / r, b < 0.0);
    }
    if (a < 0.0) {
        if (!integral) { return nan(); }
        let m = exp2(b * log2(-a));
        return select(m, -m, abs(b % 2.0) == 1.0);
    }
    if (a == 0.0) { return select(0.0, 1.0 / a, b < 0.0); }
    return exp2(b * log2(a));
}

fn op(a: f32, b: f32, c: f32, attr0: f32, attr1: f32) -> f32 { return {{OP_EXPR}}; }

@compute @workgroup_size(256)
fn main1(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) li: u32) {
    let i = group_index(wid, nwg) * 256u + li;
    if (i >= pu(0u)) { return; }
    let a = bitcast<f32>(in0[offset_of(i, 0u)]);
    out[i] = op(a, 0.0, 0.0, pf(3u), pf(4u));
}

@compute @workgroup_size(256)
fn main2(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) li: u32) {
    let i = group_index(wid, nwg) * 256u + li;
    if (i >= pu(0u)) { return; }
    let a = bitcast<f32>(in0[offset_of(i, 0u)]);
    let b = bitcast<f32>(in1[offset_of(i, 1u)]);
    out[i] = op(a, b, 0.0, pf(3u), pf(4u));
}

// where(cond, a, b): cond may hold ints or floats; "nonzero" is judged on the raw bits
// (a float -0.0 counts as zero, as in numpy).
@compute @workgroup_size(256)
fn main_where(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) li: u32) {
    let i = group_index(wid, nwg) * 256u + li;
    if (i >= pu(0u)) { return; }
    let bits = in0[offset_of(i, 0u)];
    let is_int = pu(6u) == 1u;
    let truth = select((bits & 0x7fffffffu) != 0u, bits != 0u, is_int);
    let a = bitcast<f32>(in1[offset_of(i, 1u)]);
    let b = bitcast<f32>(in2[offset_of(i, 2u)]);
    out[i] = select(b, a, truth);
}
