// attention_fwd.wgsl — softmax(Q K^T * scale + masks) V for one head, without the (T, T) scores.
//
// A workgroup takes ROWS query rows of one head, a thread per row. The keys and values come in
// tiles of TILE rows through workgroup memory (every thread reads the same key at the same time:
// one read serves the whole workgroup). For each key, a thread computes its score and folds it
// into an *online softmax*: m, the largest score so far, l = sum of exp(s - m), and
// o = sum of exp(s - m) v. When a new score beats m, l and o are rescaled by exp(m_old - m_new),
// so after the last key o / l is exactly softmax(s) @ V, and the scores were never stored.
// The backward kernels recompute the scores; they need each row's (m, 1 / l): the `stats` output.
//
// Bindings: 1 Q  2 K  3 V  4 key bias (when BIAS)  5 O  6 stats (m, 1/l) per row of every head
{{HELPERS}}
@group(0) @binding(1) var<storage, read> q_in: array<f32>;
@group(0) @binding(2) var<storage, read> k_in: array<f32>;
@group(0) @binding(3) var<storage, read> v_in: array<f32>;
{{BIAS_DECL}}
@group(0) @binding(5) var<storage, read_write> o_out: array<f32>;
@group(0) @binding(6) var<storage, read_write> stats: array<vec2<f32>>;

var<workgroup> kt: array<vec4<f32>, {{TILE_D4}}>;   // TILE keys, D4 vec4s each
var<workgroup> vt: array<vec4<f32>, {{TILE_D4}}>;
var<workgroup> bt: array<f32, {{TILE}}>;             // their key bias

fn bias_at(i: u32) -> f32 { {{BIAS_READ}} }

// elements 4c .. 4c+3 of row t of a head (zero past DH); w: the operand's stride words
fn ld_q(hb: u32, t: u32, c: u32) -> vec4<f32> {
    let sd = pu(11u);
    let at = hb + t * pu(10u) + 4u * c * sd;
    var r = vec4<f32>(0.0);
    if (4u * c < DH) { r.x = q_in[at]; }
    if (4u * c + 1u < DH) { r.y = q_in[at + sd]; }
    if (4u * c + 2u < DH) { r.z = q_in[at + 2u * sd]; }
    if (4u * c + 3u < DH) { r.w = q_in[at + 3u * sd]; }
    return r;
}

fn ld_k(hb: u32, t: u32, c: u32) -> vec4<f32> {
    let sd = pu(15u);
    let at = hb + t * pu(14u) + 4u * c * sd;
    var r = vec4<f32>(0.0);
    if (4u * c < DH) { r.x = k_in[at]; }
    if (4u * c + 1u < DH) { r.y = k_in[at + sd]; }
    if (4u * c + 2u < DH) { r.z = k_in[at + 2u * sd]; }
    if (4u * c + 3u < DH) { r.w = k_in[at + 3u * sd]; }
    return r;
}

fn ld_v(hb: u32, t: u32, c: u32) -> vec4<f32> {
    let sd = pu(19u);
    let at = hb + t * pu(18u) + 4u * c * sd;
    var r = vec4<f32>(0.0);
    if (4u * c < DH) { r.x = v_in[at]; }
    if (4u * c + 1u < DH) { r.y = v_in[at + sd]; }
    if (4u * c + 2u < DH) { r.z = v_in[at + 2u * sd]; }
    if (4u * c + 3u < DH) { r.w = v_in[at + 3u * sd]; }
    return r;
}

fn st_o(hb: u32, t: u32, c: u32, v: vec4<f32>) {
    let sd = pu(23u);
    let at = hb + t * pu(22u) + 4u * c * sd;
    if (4u * c < DH) { o_out[at] = v.x; }
    if (4u * c + 1u < DH) { o_out[at + sd] = v.y; }
    if (4u * c + 2u < DH) { o_out[at + 2u * sd] = v.z; }
    if (4u * c + 3u < DH) { o_out[at + 3u * sd] = v.w; }
}

@compute @workgroup_size(ROWS)
fn attention_fwd(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) li: u32) {
    let g = group_index(wid, nwg);
    let nb = pu(3u);
    if (g >= nb * pu(2u)) { return; }   // uniform per workgroup: safe before barriers
    let bh = g / nb;
    let i0 = (g - bh * nb) * ROWS;
    let T = pu(0u);
    let i = i0 + li;
    let ti = min(i, T - 1u);            // a thread past the last row computes row T-1 and stores nothing
    let hq = head(8u, bh);
    let hk = head(12u, bh);
    let hv = head(16u, bh);
    let hb = head(40u, bh);
    let scale = pf(4u);
    var q: array<vec4<f32>, {{D4}}>;
    var o: array<vec4<f32>, {{D4}}>;
    for (var c = 0u; c < D4; c++) {
        q[c] = ld_q(hq, ti, c);
        o[c] = vec4<f32>(0.0);
    }
    var m = neg_inf();
    var l = 0.0;
    var bad = false;
    var kend = T;
    if (SKIP) { kend = min(T, i0 + ROWS); }   // keys past the block's last row: all masked, they add 0
    for (var k0 = 0u; k0 < kend; k0 += TILE) {
        workgroupBarrier();
        for (var e = li; e < TILE * D4; e += ROWS) {
            let r = e / D4;
            let c = e - r * D4;
            var kv = vec4<f32>(0.0);
            var vv = vec4<f32>(0.0);
            if (k0 + r < T) {
                kv = ld_k(hk, k0 + r, c);
                vv = ld_v(hv, k0 + r, c);
            }
            kt[e] = kv;
            vt[e] = vv;
        }
        if (BIAS) {
            for (var r = li; r < TILE; r += ROWS) {
                if (k0 + r < T) { bt[r] = bias_at(hb + (k0 + r) * pu(42u)); }
            }
        }
        workgroupBarrier();
        let n = min(TILE, T - k0);
        for (var r = 0u; r < n; r++) {
            var acc = array<vec4<f32>, 4>();   // four partial sums: four independent chains
            for (var c = 0u; c < D4; c++) { acc[c % 4u] = fma(q[c], kt[r * D4 + c], acc[c % 4u]); }
            var bias = 0.0;
            if (BIAS) { bias = bt[r]; }
            let s = masked(sum16(acc) * scale, ti, k0 + r, bias);
            bad = bad || poisons(s);
            if (s > m) {
                let a = exp(m - s);
                l = l * a + 1.0;
                for (var c = 0u; c < D4; c++) { o[c] = fma(o[c], vec4<f32>(a), vt[r * D4 + c]); }
                m = s;
            } else {
                let p = exp(s - m);
                l += p;
                for (var c = 0u; c < D4; c++) { o[c] = fma(vec4<f32>(p), vt[r * D4 + c], o[c]); }
            }
        }
    }
    if (i < T) {
        let inv = 1.0 / l;
        let nan = bitcast<f32>(0x7fc00000u);
        for (var c = 0u; c < D4; c++) { st_o(head(20u, bh), i, c, select(o[c] * inv, vec4<f32>(nan), bad)); }
        stats[bh * T + i] = vec2<f32>(select(m, nan, bad), inv);   // NaN: every p of the row is NaN
    }
}
