// fused.wgsl — a chain of elementwise ops computed by ONE kernel (a template: the backend
// writes the {{...}} parts for each chain, see asgteach/backends/wgpu_chain.py).
//
// Run one op at a time, `y = exp(a * b) + c` is three kernels, and every intermediate
// value makes a full trip to GPU memory and back: written by one kernel, read by the
// next. Elementwise ops are so cheap that this traffic IS their cost. When an
// intermediate has a single reader, the plan instead computes the whole chain per
// element in registers: each thread loads its inputs once, evaluates the ops in order
// (`let v0 = ...; let v1 = ...;`) and writes only the chain's result.
//
// Inputs are read as raw 32-bit words (a where-condition may hold ints) through their own
// strides in the output's index space, exactly as in elementwise.wgsl; one index walk
// serves every strided input. Scalar constants (1 / sqrt(d), the 0.5 of GELU...) and op
// attributes live in the uniform block, so the compiled pipeline depends only on the
// chain's STRUCTURE (which ops, wired how) and is shared by every chain of that shape.
// Uniform words: 0 numel  2 NaN bits  4.. output shape, then each strided input's strides,
// then the scalars (the generated code below names its word numbers).

@group(0) @binding(1) var<storage, read_write> out: array<f32>;
{{INPUTS}}

{{MATH}}

{{OPS}}

// Each thread computes {{ELEMS}} elements, 256 apart (so the threads of a workgroup still read
// neighbouring elements side by side). All of its loads come first, then the arithmetic, then
// the stores: its {{ELEMS}} reads wait on memory together instead of one after another. (A
// thread past the end reads the last element again and stores nothing.)
@compute @workgroup_size(256)
fn fused(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) li: u32) {
    let first = group_index(wid, nwg) * (256u * {{ELEMS}}u) + li;
    if (first >= pu(0u)) { return; }
    let last = pu(0u) - 1u;
{{CODE}}
}
