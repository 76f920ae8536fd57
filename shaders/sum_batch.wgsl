// sum_batch.wgsl — the last stage of several split sums in ONE dispatch (a template: the backend
// writes the {{...}} parts, see asgteach/backends/wgpu_batch.py).
//
// A bias gradient is a sum over the batch and the sequence: (B*T, N) -> N. reduce.wgsl does it
// in two passes, partial sums of row chunks (sum_cols) and then one short sum per output of its
// P partials (sum_wg). In a training step every bias and LayerNorm weight has such a second
// stage, each a launch of a few microseconds, and none is needed before the optimizer's update
// at the end. So they wait, and run together here: slot s is one of them, with its own buffers
// (in_s<s>: the partials, P per output, side by side; out_s<s>: the sums) and its own uniform
// block (words s * {{WORDS}} ...: 0 outputs, 1 P). 32 threads add up one output's P partials
// (each thread every 32nd one, then a tree over the 32), 8 outputs per workgroup, the
// workgroups dealt out slot after slot as in fused_batch.wgsl.

{{BINDINGS}}

var<workgroup> sv: array<f32, 256>;

@compute @workgroup_size(256)
fn sum_batch(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) li: u32) {
    let g = group_index(wid, nwg);
    var slot = 0u;
    var first = 0u;   // the first workgroup of `slot`
    loop {
        let n = (pu(slot * {{WORDS}}u) + 7u) / 8u;
        if (g < first + n || slot + 1u >= {{SLOTS}}u) { break; }
        first += n;
        slot += 1u;
    }
    let lane = li % 32u;
    let o = (g - first) * 8u + li / 32u;   // this thread's output in its slot
    let n_out = pu(slot * {{WORDS}}u);
    let p_n = pu(slot * {{WORDS}}u + 1u);
    var acc = 0.0;
    if (o < n_out) {
        switch slot {
{{CASES}}
            default: {}
        }
    }
    sv[li] = acc;
    workgroupBarrier();
    for (var k = 16u; k > 0u; k = k >> 1u) {
        if (lane < k) { sv[li] += sv[li + k]; }
        workgroupBarrier();
    }
    if (lane == 0u && o < n_out) {
        switch slot {
{{STORES}}
            default: {}
        }
    }
}
