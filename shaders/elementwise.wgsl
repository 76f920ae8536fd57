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

{{MATH}}

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
