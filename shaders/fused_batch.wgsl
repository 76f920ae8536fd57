// fused_batch.wgsl — several fused chains of the SAME structure run by ONE dispatch (a template:
// the backend writes the {{...}} parts, see asgteach/backends/wgpu_batch.py).
//
// An optimizer updates every parameter with the same small formula: AdamW's m, v and p for a
// 4-block transformer is 70 fused kernels (fused.wgsl), one per parameter, most of them tiny (a
// bias of 512 numbers is two workgroups). A GPU runs dependent launches one after the other,
// with a barrier and a ramp-up between them, so 70 tiny launches cost far more than their
// arithmetic. Here those chains become the SLOTS of one kernel (PyTorch's "foreach" optimizers
// batch the same way, for the same reason):
//
// * slot s keeps everything it had as a kernel of its own, renamed: its buffers (bindings
//   s * {{STRIDE}} + 1, 2, ...; names ending in _s<s>) and its 64-word uniform block (words
//   s * {{WORDS}} ..., so the uniform buffer here is {{SLOTS}} blocks long);
// * the workgroups are dealt out slot after slot: slot 0 gets ceil(n0 / {{PER_GROUP}}), slot 1 the
//   next ceil(n1 / {{PER_GROUP}}), ... Each workgroup finds its slot from the element counts (word 0
//   of every block), then runs that slot's copy of the chain. Every thread of a workgroup picks
//   the same slot, so the `switch` below never splits a workgroup.

{{BINDINGS}}

{{MATH}}

{{OPS}}

@compute @workgroup_size(256)
fn fused_batch(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) li: u32) {
    let g = group_index(wid, nwg);
    var slot = 0u;
    var start = 0u;   // the first workgroup of `slot`
    loop {
        let n = (pu(slot * {{WORDS}}u) + {{PER_GROUP}}u - 1u) / {{PER_GROUP}}u;
        if (g < start + n || slot + 1u >= {{SLOTS}}u) { break; }
        start += n;
        slot += 1u;
    }
    // this thread's first element in its slot; it computes {{ELEMS}}, 256 apart, as fused.wgsl does
    let first = (g - start) * {{PER_GROUP}}u + li;
    switch slot {
{{CASES}}
        default: {}
    }
}
