// reduce.wgsl — sum, mean, max, var, argmax over any set of axes, and sum_to (a sum).
//
// The input's axes are split in two: "outer" axes survive (one output element per outer
// index, numbered row-major, so keepdims changes nothing in memory) and "inner" axes are
// reduced. Each side has its own shape and strides in the uniform, so reducing axis 0,
// the last axis or axes (0, 2) is the same kernel. sum_to (the un-broadcast of a
// gradient) is a sum over the axes broadcasting created.
//
// Two layouts: *_wg gives each output element a workgroup of 256 threads that stride
// over the reduced elements and combine in shared memory (a tree: also more accurate
// than one long running sum); *_t gives each output one thread (short reductions).
// A huge reduction into few outputs (the mean of a whole activation: one output, 4M
// inputs) would leave all but one workgroup idle, so sum_wg, mean_wg and max_wg can also split
// each output's reduced elements into P chunks of `chunk` elements: the workgroups write
// P partial results per output, and a second, small dispatch reduces those.
// Short rows (a softmax-backward sum over 256 elements, a mean over d_model) would leave
// most of a 256-thread workgroup idle and pay 8 barrier steps per row, so sum_wg, mean_wg
// and max_wg work in *segments*: LP threads per row (a power of 2, 32..256, word 40), so
// one workgroup reduces 256 / LP rows side by side.
// A sum over LEADING axes into few outputs (a bias gradient: (B*T, N) -> N) has no
// contiguous row to give a workgroup: sum_cols gives each thread one (output, chunk) pair,
// so neighbouring threads read neighbouring outputs' elements, and writes the partial sums
// as rows of P; sum_wg / mean_wg then add those rows up.
// Uniform words: 0 n_out  1 n_red  2 outer ndim  3 inner ndim  4 1/n (mean and var divide by n)
//   5 NaN bits  6 chunk  7 P (chunks per output)
//   8..15 outer shape  16..23 outer strides  24..31 inner shape  32..39 inner strides
//   40 LP: threads per row of the *_wg sums (0: 256)

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> x4: array<vec4<f32>>;   // the same buffer, 4 floats at a time (sum_cols4)
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

const WG: u32 = 256u;
var<workgroup> sv: array<f32, 256>;
var<workgroup> si: array<u32, 256>;

// The memory offset of element i of a row-major index space: peel the axes off from the last
// one (i % size, then i / size), and the first axis takes what is left, with no division.
// Integer division by a size known only at run time costs tens of instructions, so a walk
// over ONE axis (the common case, after neighbouring axes are merged) is one multiply.
fn walk(i: u32, nd: u32, shape_at: u32, stride_at: u32) -> u32 {
    if (nd == 0u) { return 0u; }
    var rest = i;
    var off = 0u;
    for (var d = nd - 1u; d > 0u; d--) {
        let size = pu(shape_at + d);
        off += (rest % size) * pu(stride_at + d);
        rest = rest / size;
    }
    return off + rest * pu(stride_at);
}
fn outer_off(o: u32) -> u32 { return walk(o, pu(2u), 8u, 16u); }
fn inner_off(r: u32) -> u32 { return walk(r, pu(3u), 24u, 32u); }

fn max_nan(m: f32, v: f32) -> f32 {
    // numpy's max propagates NaN; WGSL's max() may drop it
    if (is_nan(m)) { return m; }
    if (is_nan(v)) { return v; }
    return max(m, v);
}

// (v, i) beats (m, j)? Larger wins, ties go to the first index, NaN counts as largest.
fn beats(v: f32, i: u32, m: f32, j: u32) -> bool {
    if (is_nan(v)) { return !is_nan(m) || i < j; }
    if (is_nan(m)) { return false; }
    return v > m || (v == m && i < j);
}

fn lanes() -> u32 { return select(pu(40u), WG, pu(40u) == 0u); }

// The sum of v over the lp threads of this thread's segment (lp a power of 2; all threads call it).
fn seg_sum(li: u32, v: f32, lp: u32) -> f32 {
    sv[li] = v;
    workgroupBarrier();
    let lane = li & (lp - 1u);
    for (var s = lp / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) { sv[li] += sv[li + s]; }
        workgroupBarrier();
    }
    let r = sv[li - lane];
    workgroupBarrier();
    return r;
}

fn wg_sum(li: u32, v: f32) -> f32 { return seg_sum(li, v, WG); }

// The segment's row: which (output, chunk) pair the threads of segment li / LP of workgroup gi reduce.
fn seg_row(gi: u32, li: u32) -> u32 { let lp = lanes(); return gi * (WG / lp) + li / lp; }

// The sum of one output's reduced elements (of chunk row % P when a reduction is split in P
// chunks), by the LP threads of a segment. Every thread of the workgroup calls it: the tree
// in seg_sum needs them all, also those of a segment past the last row (they add nothing).
fn sum_of_group(gi: u32, li: u32) -> f32 {
    let lp = lanes();
    let row = seg_row(gi, li);
    var acc = 0.0;
    if (row < pu(0u) * pu(7u)) {
        let o = row / pu(7u);
        let r0 = (row % pu(7u)) * pu(6u);
        let r1 = min(pu(1u), r0 + pu(6u));
        let base = outer_off(o);
        for (var r = r0 + (li & (lp - 1u)); r < r1; r += lp) { acc += x[base + inner_off(r)]; }
    }
    return seg_sum(li, acc, lp);
}

// Does this thread write its segment's result? (the first lane of a segment that holds a row)
fn seg_writes(gi: u32, li: u32) -> bool {
    return (li & (lanes() - 1u)) == 0u && seg_row(gi, li) < pu(0u) * pu(7u);
}

fn sum_of_thread(o: u32) -> f32 {
    let base = outer_off(o);
    var acc = 0.0;
    for (var r = 0u; r < pu(1u); r++) { acc += x[base + inner_off(r)]; }
    return acc;
}

@compute @workgroup_size(256)
fn sum_wg(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) li: u32) {
    let gi = group_index(wid, nwg);
    if (seg_row(gi, 0u) >= pu(0u) * pu(7u)) { return; }   // uniform per workgroup: safe before barriers
    let total = sum_of_group(gi, li);
    if (seg_writes(gi, li)) { out[seg_row(gi, li)] = bitcast<u32>(total); }
}

@compute @workgroup_size(256)
fn sum_cols(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) li: u32) {
    let t = group_index(wid, nwg) * WG + li;
    let n_out = pu(0u);
    if (t >= n_out * pu(7u)) { return; }
    let o = t % n_out;
    let p = t / n_out;
    let r0 = p * pu(6u);
    let r1 = min(pu(1u), r0 + pu(6u));
    let base = outer_off(o);
    // Four sums side by side: a thread asks for four rows before it needs any of them, so four
    // loads wait on memory at once instead of one after another (a load takes ~0.5 us; with one
    // in flight per thread this pass ran at a third of the memory's speed).
    var a = vec4<f32>(0.0);
    var r = r0;
    for (; r + 4u <= r1; r += 4u) {
        a += vec4<f32>(x_at(base + inner_off(r)), x_at(base + inner_off(r + 1u)),
                       x_at(base + inner_off(r + 2u)), x_at(base + inner_off(r + 3u)));
    }
    var acc = (a.x + a.y) + (a.z + a.w);
    for (; r < r1; r++) { acc += x_at(base + inner_off(r)); }
    out[o * pu(7u) + p] = bitcast<u32>(acc);
}

// One element of what is reduced (the product variant reads x[i] * y[i] here).
fn x_at(i: u32) -> f32 { return x[i]; }

// sum_cols for a (rows, n_out) matrix whose row length is a multiple of 4 (every bias gradient):
// a thread reads four neighbouring columns as one vec4, so each of its loads brings 16 bytes, and
// it writes the four partial sums. (P and the chunk are sum_cols's words 7 and 6; word 1 the rows.)
@compute @workgroup_size(256)
fn sum_cols4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) li: u32) {
    let t = group_index(wid, nwg) * WG + li;
    let n4 = pu(0u) / 4u;
    if (t >= n4 * pu(7u)) { return; }
    let o4 = t % n4;
    let p = t / n4;
    let r0 = p * pu(6u);
    let r1 = min(pu(1u), r0 + pu(6u));
    var a = array<vec4<f32>, 4>(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
    var r = r0;
    for (; r + 4u <= r1; r += 4u) {   // four rows' loads in flight, as in sum_cols
        a[0] += x4_at(r * n4 + o4);
        a[1] += x4_at((r + 1u) * n4 + o4);
        a[2] += x4_at((r + 2u) * n4 + o4);
        a[3] += x4_at((r + 3u) * n4 + o4);
    }
    var acc = (a[0] + a[1]) + (a[2] + a[3]);
    for (; r < r1; r++) { acc += x4_at(r * n4 + o4); }
    let P = pu(7u);
    out[(4u * o4) * P + p] = bitcast<u32>(acc.x);
    out[(4u * o4 + 1u) * P + p] = bitcast<u32>(acc.y);
    out[(4u * o4 + 2u) * P + p] = bitcast<u32>(acc.z);
    out[(4u * o4 + 3u) * P + p] = bitcast<u32>(acc.w);
}

fn x4_at(i: u32) -> vec4<f32> { return x4[i]; }

@compute @workgroup_size(256)
fn sum_t(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) li: u32) {
    let o = group_index(wid, nwg) * WG + li;
    if (o >= pu(0u)) { return; }
    out[o] = bitcast<u32>(sum_of_thread(o));
}

// mean = sum * (1/n). A split reduction's first stage (P > 1 chunks) writes plain partial
// sums; the stage that adds them up (P = 1) divides, by the n of the whole reduction.
@compute @workgroup_size(256)
fn mean_wg(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) li: u32) {
    let gi = group_index(wid, nwg);
    if (seg_row(gi, 0u) >= pu(0u) * pu(7u)) { return; }
    let total = sum_of_group(gi, li);
    if (seg_writes(gi, li)) { out[seg_row(gi, li)] = bitcast<u32>(select(total * pf(4u), total, pu(7u) > 1u)); }
}

@compute @workgroup_size(256)
fn mean_t(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) li: u32) {
    let o = group_index(wid, nwg) * WG + li;
    if (o >= pu(0u)) { return; }
    out[o] = bitcast<u32>(sum_of_thread(o) * pf(4u));
}

@compute @workgroup_size(256)
fn var_wg(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) li: u32) {
    // two passes (mean first, then squared deviations): no catastrophic cancellation
    let o = group_index(wid, nwg);
    if (o >= pu(0u)) { return; }
    let base = outer_off(o);
    var acc = 0.0;
    for (var r = li; r < pu(1u); r += WG) { acc += x[base + inner_off(r)]; }
    let mu = wg_sum(li, acc) * pf(4u);
    var acc2 = 0.0;
    for (var r = li; r < pu(1u); r += WG) { let d = x[base + inner_off(r)] - mu; acc2 += d * d; }
    let v = wg_sum(li, acc2) * pf(4u);
    if (li == 0u) { out[o] = bitcast<u32>(v); }
}

@compute @workgroup_size(256)
fn var_t(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) li: u32) {
    let o = group_index(wid, nwg) * WG + li;
    if (o >= pu(0u)) { return; }
    let base = outer_off(o);
    var acc = 0.0;
    for (var r = 0u; r < pu(1u); r++) { acc += x[base + inner_off(r)]; }
    let mu = acc * pf(4u);
    var acc2 = 0.0;
    for (var r = 0u; r < pu(1u); r++) { let d = x[base + inner_off(r)] - mu; acc2 += d * d; }
    out[o] = bitcast<u32>(acc2 * pf(4u));
}

@compute @workgroup_size(256)
fn max_wg(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) li: u32) {
    let gi = group_index(wid, nwg);
    if (seg_row(gi, 0u) >= pu(0u) * pu(7u)) { return; }
    let lp = lanes();
    let lane = li & (lp - 1u);
    let row = seg_row(gi, li);
    var m = -bitcast<f32>(0x7f800000u);
    if (row < pu(0u) * pu(7u)) {
        let o = row / pu(7u);
        let r0 = (row % pu(7u)) * pu(6u);
        let r1 = min(pu(1u), r0 + pu(6u));
        let base = outer_off(o);
        for (var r = r0 + lane; r < r1; r += lp) { m = max_nan(m, x[base + inner_off(r)]); }
    }
    sv[li] = m;
    workgroupBarrier();
    for (var s = lp / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) { sv[li] = max_nan(sv[li], sv[li + s]); }
        workgroupBarrier();
    }
    if (seg_writes(gi, li)) { out[row] = bitcast<u32>(sv[li]); }
}

@compute @workgroup_size(256)
fn max_t(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) li: u32) {
    let o = group_index(wid, nwg) * WG + li;
    if (o >= pu(0u)) { return; }
    let base = outer_off(o);
    var m = -bitcast<f32>(0x7f800000u);
    for (var r = 0u; r < pu(1u); r++) { m = max_nan(m, x[base + inner_off(r)]); }
    out[o] = bitcast<u32>(m);
}

@compute @workgroup_size(256)
fn argmax_wg(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) li: u32) {
    let o = group_index(wid, nwg);
    if (o >= pu(0u)) { return; }
    let base = outer_off(o);
    var m = -bitcast<f32>(0x7f800000u);
    var mi = 0xffffffffu;
    for (var r = li; r < pu(1u); r += WG) {
        let v = x[base + inner_off(r)];
        if (beats(v, r, m, mi)) { m = v; mi = r; }
    }
    sv[li] = m;
    si[li] = mi;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (li < s && beats(sv[li + s], si[li + s], sv[li], si[li])) { sv[li] = sv[li + s]; si[li] = si[li + s]; }
        workgroupBarrier();
    }
    if (li == 0u) { out[o] = si[0]; }
}

@compute @workgroup_size(256)
fn argmax_t(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) li: u32) {
    let o = group_index(wid, nwg) * WG + li;
    if (o >= pu(0u)) { return; }
    let base = outer_off(o);
    var m = -bitcast<f32>(0x7f800000u);
    var mi = 0xffffffffu;
    for (var r = 0u; r < pu(1u); r++) {
        let v = x[base + inner_off(r)];
        if (beats(v, r, m, mi)) { m = v; mi = r; }
    }
    out[o] = mi;
}
