// elementwise_math.wgsl — the scalar functions of the elementwise ops, with numpy's semantics.
//
// Shared by elementwise.wgsl (one op per kernel) and fused.wgsl (a chain of ops in one kernel):
// the backend pastes this file where those say {{MATH}}. Both keep the NaN bit pattern in
// uniform word 2, which nan() reads.

fn nan() -> f32 { return bitcast<f32>(pu(2u)); }

// --- scalar functions with numpy's semantics (WGSL leaves some cases undefined) ------
fn f_log(x: f32) -> f32 { return select(log(x), nan(), x < 0.0 || is_nan(x)); }
fn f_sqrt(x: f32) -> f32 { return select(sqrt(x), nan(), x < 0.0 || is_nan(x)); }
fn f_relu(x: f32) -> f32 { return select(0.0, x, x > 0.0 || is_nan(x)); }
// numpy's truth of a number (where's condition): nonzero. Judged on the bits: -0.0 is false, NaN true
fn f_nonzero(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) != 0u; }
fn f_max(a: f32, b: f32) -> f32 { return select(max(a, b), nan(), is_nan(a) || is_nan(b)); }
fn f_min(a: f32, b: f32) -> f32 { return select(min(a, b), nan(), is_nan(a) || is_nan(b)); }
fn f_sign(x: f32) -> f32 { return select(sign(x), x, is_nan(x)); }   // numpy: sign(NaN) is NaN

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
    // N. Juffa's float erf (max error about 1 ulp): an odd polynomial below |x| = 0.9277, above it
    // erf = 1 - exp(poly(|x|)). No division and no long series: GELU runs it per element.
    let t = abs(x);
    let s = x * x;
    if (t > 0.927734375) {
        var r = fma(fma(-1.72853470e-5, t, 3.83197126e-4), s, fma(-3.88396438e-3, t, 2.42546219e-2));
        r = fma(r, t, -1.06777877e-1);
        r = fma(r, t, -6.34846687e-1);
        r = fma(r, t, -1.28717512e-1);
        r = fma(r, t, -t);
        return select(1.0 - exp(r), exp(r) - 1.0, x < 0.0);
    }
    var r = -5.96761703e-4;
    r = fma(r, s, 4.99119423e-3);
    r = fma(r, s, -2.67681349e-2);
    r = fma(r, s, 1.12819925e-1);
    r = fma(r, s, -3.76125336e-1);
    r = fma(r, s, 1.28379166e-1);
    return fma(r, x, x);
}

fn f_pow(a: f32, b: f32) -> f32 {
    // numpy: any base to an integer power (x**2 of a negative x is fine), NaN for a
    // negative base to a fractional power. Small integer powers multiply exactly.
    if (b == 0.0) { return 1.0; }
    if (is_nan(a) || is_nan(b)) { return nan(); }
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
        if (!integral) {
            // numpy: (-inf) ** 0.5 is inf and (-inf) ** -0.5 is 0 (judged on the bits, like NaN)
            if (bitcast<u32>(a) == 0xff800000u) { return select(bitcast<f32>(0x7f800000u), 0.0, b < 0.0); }
            return nan();
        }
        let m = exp2(b * log2(-a));
        return select(m, -m, abs(b % 2.0) == 1.0);
    }
    if (a == 0.0) { return select(0.0, 1.0 / a, b < 0.0); }
    return exp2(b * log2(a));
}
