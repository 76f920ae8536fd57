// gate_copy.wgsl — step 3 of the gate described in gate.wgsl: dst = src, word by word, for an update
// that could not be written in place. It is dispatched from the gate's arguments, so it copies
// nothing in a step that met a NaN or an infinity.

@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<storage, read> src: array<u32>;

@compute @workgroup_size(256)
fn copy_words(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) li: u32) {
    let i = group_index(wid, nwg) * 256u + li;   // uniform word 0: how many words
    if (i < pu(0u)) { dst[i] = src[i]; }
}
