// elementwise.wgsl — the kernel of every elementwise op: add ... where, and any op a user registers
// with a `wgsl_expr`.
//
// One thread per output element. The output is contiguous; each input is read through
// its own strides in the output's index space (stride 0 = that axis was broadcast), so
// numpy broadcasting needs no special case. Inputs whose shape equals the output's are
// flagged "contiguous" and read at the thread's own index, skipping the div/mod walk.
//
// The backend fills in, for each op (asgteach/backends/wgpu_kernels.py, elementwise_source):
//   INPUTS  one storage binding per input (in0 at binding 1, in1 at 2, in2 at 3)
//   OP      the op's formula as a function, `fn op(a: f32, b: f32) -> f32 { return a * b; }`: its
//           parameters are the inputs (x; a, b; a, b, c) and the op's number attributes by name
//   ENTRY   main1, main2 or main3, by the number of inputs
//   LOADS   each input's value at this element (an int input, a where-condition, becomes its f32 value)
//   CALL    op(...), with each attribute read from its uniform word
// Uniform words: 0 numel  1 ndim  2 NaN bits  5 contiguity bits  8..15 output shape
//   16..23 / 24..31 / 32..39 strides of inputs 0 / 1 / 2; then the number attributes, one word each

@group(0) @binding(4) var<storage, read_write> out: array<f32>;
{{INPUTS}}

fn offset_of(i: u32, which: u32) -> u32 {
    if ((pu(5u) >> which & 1u) == 1u) { return i; }
    // peel the axes off from the last; the first axis takes what is left (no division)
    let nd = pu(1u);
    if (nd == 0u) { return 0u; }
    var rest = i;
    var off = 0u;
    for (var d = nd - 1u; d > 0u; d--) {
        let size = pu(8u + d);
        off += (rest % size) * pu(16u + which * 8u + d);
        rest = rest / size;
    }
    return off + rest * pu(16u + which * 8u);
}

{{MATH}}

{{OP}}

@compute @workgroup_size(256)
fn {{ENTRY}}(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) li: u32) {
    let i = group_index(wid, nwg) * 256u + li;
    if (i >= pu(0u)) { return; }
{{LOADS}}
    out[i] = {{CALL}};
}
