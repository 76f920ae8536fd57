// attention_bwd.wgsl — the gradients of attention (dQ, dK, dV) from dO, recomputing the scores.
//
// With P = softmax(S), S = Q K^T * scale + masks, O = P V and dO the gradient of O:
//     dV = P^T dO      dP = dO V^T      dS = P * (dP - D),  D_i = sum_j dP_ij P_ij = dO_i . O_i
//     dQ = dS K * scale                 dK = dS^T Q * scale
// (the graph computes the same with (T, T) tensors: dP, P * dP, its row sums, dS...). Here
// P_ij = exp(s_ij - m_i) / l_i is recomputed from the scores and the forward's row stats, tile
// by tile, so nothing of size (T, T) is ever stored.
//
// Three entries, launched one after the other:
// * attention_dq: a thread per query row (as the forward), keys in tiles; it also writes D_i.
// * attention_dk, attention_dv: a thread per key row, queries (with their dO rows, stats and D) in tiles.
// Every sum is over one thread's own loop: no atomics, and the same result on every run.
//
// Bindings: 1 Q  2 K  3 V  4 key bias (BIAS)  5 O  6 stats (m, 1/l)  7 dO  8 D  9 dQ  10 dK  11 dV
{{HELPERS}}
@group(0) @binding(1) var<storage, read> q_in: array<f32>;
@group(0) @binding(2) var<storage, read> k_in: array<f32>;
@group(0) @binding(3) var<storage, read> v_in: array<f32>;
{{BIAS_DECL}}
@group(0) @binding(5) var<storage, read> o_in: array<f32>;
@group(0) @binding(6) var<storage, read> stats: array<vec2<f32>>;
@group(0) @binding(7) var<storage, read> do_in: array<f32>;
@group(0) @binding(8) var<storage, read_write> delta: array<f32>;
@group(0) @binding(9) var<storage, read_write> dq_out: array<f32>;
@group(0) @binding(10) var<storage, read_write> dk_out: array<f32>;
@group(0) @binding(11) var<storage, read_write> dv_out: array<f32>;

var<workgroup> at: array<vec4<f32>, {{TILE_D4}}>;   // dq: keys; dk, dv: queries
var<workgroup> bt: array<vec4<f32>, {{TILE_D4}}>;   // dq: values; dk, dv: their dO rows
var<workgroup> ct: array<f32, {{TILE}}>;            // dq: key bias; dk, dv: D of the queries
var<workgroup> mt: array<vec2<f32>, {{TILE}}>;      // dk, dv: the queries' stats

fn bias_at(i: u32) -> f32 { {{BIAS_READ}} }

// element offset of (t, 4c) in a head; w: the operand's stride words (b, h, t, d)
fn at4(hb: u32, w: u32, t: u32, c: u32) -> u32 { return hb + t * pu(w + 2u) + 4u * c * pu(w + 3u); }

fn ld_q(hb: u32, t: u32, c: u32) -> vec4<f32> {
    let sd = pu(11u);
    let a = at4(hb, 8u, t, c);
    var r = vec4<f32>(0.0);
    if (4u * c < DH) { r.x = q_in[a]; }
    if (4u * c + 1u < DH) { r.y = q_in[a + sd]; }
    if (4u * c + 2u < DH) { r.z = q_in[a + 2u * sd]; }
    if (4u * c + 3u < DH) { r.w = q_in[a + 3u * sd]; }
    return r;
}

fn ld_k(hb: u32, t: u32, c: u32) -> vec4<f32> {
    let sd = pu(15u);
    let a = at4(hb, 12u, t, c);
    var r = vec4<f32>(0.0);
    if (4u * c < DH) { r.x = k_in[a]; }
    if (4u * c + 1u < DH) { r.y = k_in[a + sd]; }
    if (4u * c + 2u < DH) { r.z = k_in[a + 2u * sd]; }
    if (4u * c + 3u < DH) { r.w = k_in[a + 3u * sd]; }
    return r;
}

fn ld_v(hb: u32, t: u32, c: u32) -> vec4<f32> {
    let sd = pu(19u);
    let a = at4(hb, 16u, t, c);
    var r = vec4<f32>(0.0);
    if (4u * c < DH) { r.x = v_in[a]; }
    if (4u * c + 1u < DH) { r.y = v_in[a + sd]; }
    if (4u * c + 2u < DH) { r.z = v_in[a + 2u * sd]; }
    if (4u * c + 3u < DH) { r.w = v_in[a + 3u * sd]; }
    return r;
}

fn ld_o(hb: u32, t: u32, c: u32) -> vec4<f32> {
    let sd = pu(23u);
    let a = at4(hb, 20u, t, c);
    var r = vec4<f32>(0.0);
    if (4u * c < DH) { r.x = o_in[a]; }
    if (4u * c + 1u < DH) { r.y = o_in[a + sd]; }
    if (4u * c + 2u < DH) { r.z = o_in[a + 2u * sd]; }
    if (4u * c + 3u < DH) { r.w = o_in[a + 3u * sd]; }
    return r;
}

fn ld_do(hb: u32, t: u32, c: u32) -> vec4<f32> {
    let sd = pu(27u);
    let a = at4(hb, 24u, t, c);
    var r = vec4<f32>(0.0);
    if (4u * c < DH) { r.x = do_in[a]; }
    if (4u * c + 1u < DH) { r.y = do_in[a + sd]; }
    if (4u * c + 2u < DH) { r.z = do_in[a + 2u * sd]; }
    if (4u * c + 3u < DH) { r.w = do_in[a + 3u * sd]; }
    return r;
}

fn st_dq(hb: u32, t: u32, c: u32, v: vec4<f32>) {
    let sd = pu(31u);
    let a = at4(hb, 28u, t, c);
    if (4u * c < DH) { dq_out[a] = v.x; }
    if (4u * c + 1u < DH) { dq_out[a + sd] = v.y; }
    if (4u * c + 2u < DH) { dq_out[a + 2u * sd] = v.z; }
    if (4u * c + 3u < DH) { dq_out[a + 3u * sd] = v.w; }
}

fn st_dk(hb: u32, t: u32, c: u32, v: vec4<f32>) {
    let sd = pu(35u);
    let a = at4(hb, 32u, t, c);
    if (4u * c < DH) { dk_out[a] = v.x; }
    if (4u * c + 1u < DH) { dk_out[a + sd] = v.y; }
    if (4u * c + 2u < DH) { dk_out[a + 2u * sd] = v.z; }
    if (4u * c + 3u < DH) { dk_out[a + 3u * sd] = v.w; }
}

fn st_dv(hb: u32, t: u32, c: u32, v: vec4<f32>) {
    let sd = pu(39u);
    let a = at4(hb, 36u, t, c);
    if (4u * c < DH) { dv_out[a] = v.x; }
    if (4u * c + 1u < DH) { dv_out[a + sd] = v.y; }
    if (4u * c + 2u < DH) { dv_out[a + 2u * sd] = v.z; }
    if (4u * c + 3u < DH) { dv_out[a + 3u * sd] = v.w; }
}

@compute @workgroup_size(ROWS)
fn attention_dq(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
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
    let hd = head(24u, bh);
    let ho = head(20u, bh);
    let scale = pf(4u);
    var q: array<vec4<f32>, {{D4}}>;
    var go: array<vec4<f32>, {{D4}}>;
    var dq: array<vec4<f32>, {{D4}}>;
    var dd = vec4<f32>(0.0);
    for (var c = 0u; c < D4; c++) {
        q[c] = ld_q(hq, ti, c);
        go[c] = ld_do(hd, ti, c);
        dd = fma(go[c], ld_o(ho, ti, c), dd);
        dq[c] = vec4<f32>(0.0);
    }
    let d_i = hsum4(dd);
    let st = stats[bh * T + ti];
    if (i < T) { delta[bh * T + i] = d_i; }
    var kend = T;
    if (SKIP) { kend = min(T, i0 + ROWS); }
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
            at[e] = kv;
            bt[e] = vv;
        }
        if (BIAS) {
            for (var r = li; r < TILE; r += ROWS) {
                if (k0 + r < T) { ct[r] = bias_at(hb + (k0 + r) * pu(42u)); }
            }
        }
        workgroupBarrier();
        let n = min(TILE, T - k0);
        for (var r = 0u; r < n; r++) {
            var sa = vec4<f32>(0.0);
            var pa = vec4<f32>(0.0);
            for (var c = 0u; c < D4; c++) {
                sa = fma(q[c], at[r * D4 + c], sa);
                pa = fma(go[c], bt[r * D4 + c], pa);
            }
            var bias = 0.0;
            if (BIAS) { bias = ct[r]; }
            let p = exp(masked(hsum4(sa) * scale, ti, k0 + r, bias) - st.x) * st.y;
            let ds = p * (hsum4(pa) - d_i);
            for (var c = 0u; c < D4; c++) { dq[c] = fma(vec4<f32>(ds), at[r * D4 + c], dq[c]); }
        }
    }
    if (i < T) {
        for (var c = 0u; c < D4; c++) { st_dq(head(28u, bh), i, c, dq[c] * scale); }
    }
}

// dK or dV of ROWS key rows (one thread each), queries in tiles. Both need the scores (k . q_i); dK also
// needs dP (v . dO_i). The two run as separate launches so that a thread holds only what its own
// gradient needs (k, v and dk; or k and dv): registers, not memory.
fn dkv(wid: vec3<u32>, nwg: vec3<u32>, li: u32, want_dk: bool) {
    let g = group_index(wid, nwg);
    let nb = pu(3u);
    if (g >= nb * pu(2u)) { return; }
    let bh = g / nb;
    let j0 = (g - bh * nb) * ROWS;
    let T = pu(0u);
    let j = j0 + li;
    let tj = min(j, T - 1u);            // a thread past the last key computes key T-1 and stores nothing
    let hq = head(8u, bh);
    let hd = head(24u, bh);
    let scale = pf(4u);
    var bias = 0.0;
    if (BIAS) { bias = bias_at(head(40u, bh) + tj * pu(42u)); }
    var k: array<vec4<f32>, {{D4}}>;
    var v: array<vec4<f32>, {{D4}}>;
    var acc: array<vec4<f32>, {{D4}}>;
    for (var c = 0u; c < D4; c++) {
        k[c] = ld_k(head(12u, bh), tj, c);
        if (want_dk) { v[c] = ld_v(head(16u, bh), tj, c); }
        acc[c] = vec4<f32>(0.0);
    }
    var q0 = 0u;
    if (SKIP) { q0 = (j0 / TILE) * TILE; }   // queries before the block's first key see none of its keys
    for (; q0 < T; q0 += TILE) {
        workgroupBarrier();
        for (var e = li; e < TILE * D4; e += ROWS) {
            let r = e / D4;
            let c = e - r * D4;
            var qv = vec4<f32>(0.0);
            var ov = vec4<f32>(0.0);
            if (q0 + r < T) {
                qv = ld_q(hq, q0 + r, c);
                ov = ld_do(hd, q0 + r, c);
            }
            at[e] = qv;
            bt[e] = ov;
        }
        for (var r = li; r < TILE; r += ROWS) {
            if (q0 + r < T) {
                mt[r] = stats[bh * T + q0 + r];
                ct[r] = delta[bh * T + q0 + r];
            }
        }
        workgroupBarrier();
        let n = min(TILE, T - q0);
        for (var r = 0u; r < n; r++) {
            var sa = vec4<f32>(0.0);
            for (var c = 0u; c < D4; c++) { sa = fma(at[r * D4 + c], k[c], sa); }
            let st = mt[r];
            let p = exp(masked(hsum4(sa) * scale, q0 + r, tj, bias) - st.x) * st.y;
            if (want_dk) {
                var pa = vec4<f32>(0.0);
                for (var c = 0u; c < D4; c++) { pa = fma(bt[r * D4 + c], v[c], pa); }
                let ds = vec4<f32>(p * (hsum4(pa) - ct[r]));
                for (var c = 0u; c < D4; c++) { acc[c] = fma(ds, at[r * D4 + c], acc[c]); }
            } else {
                for (var c = 0u; c < D4; c++) { acc[c] = fma(vec4<f32>(p), bt[r * D4 + c], acc[c]); }
            }
        }
    }
    if (j < T) {
        if (want_dk) {
            for (var c = 0u; c < D4; c++) { st_dk(head(32u, bh), j, c, acc[c] * scale); }
        } else {
            for (var c = 0u; c < D4; c++) { st_dv(head(36u, bh), j, c, acc[c]); }
        }
    }
}

@compute @workgroup_size(ROWS)
fn attention_dk(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) li: u32) { dkv(wid, nwg, li, true); }

@compute @workgroup_size(ROWS)
fn attention_dv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) li: u32) { dkv(wid, nwg, li, false); }
