// gather.wgsl — embedding (row lookup) and embedding_grad (its scatter-add).
//
// embedding: out[i, j] = table[ids[i], j], one thread per output element. An id out of
// range writes NaN (the host checks fed ids first and names the node; NaN makes a
// computed bad id visible too).
// embedding_grad: out[ids[i], j] += g[i, j]. A repeated id must receive the SUM of its
// rows, and two threads may add into one place at once, so the add is atomic: WGSL has
// no atomic float add, so we read the bits, add in f32, and compare-exchange until no
// other thread changed the value in between (the classic CAS loop).
// Uniform words: 0 n (elements of g / out)  1 D (row length)  2 V (table rows)  3 NaN bits

@group(0) @binding(1) var<storage, read> ids: array<i32>;
@group(0) @binding(2) var<storage, read> src: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> acc: array<atomic<u32>>;

@compute @workgroup_size(256)
fn embedding(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) li: u32) {
    let i = group_index(wid, nwg) * 256u + li;
    if (i >= pu(0u)) { return; }
    let D = pu(1u);
    let id = ids[i / D];
    if (id < 0 || u32(id) >= pu(2u)) { out[i] = bitcast<f32>(pu(3u)); return; }
    out[i] = src[u32(id) * D + i % D];
}

@compute @workgroup_size(256)
fn embedding_grad(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) li: u32) {
    let i = group_index(wid, nwg) * 256u + li;
    if (i >= pu(0u)) { return; }
    let D = pu(1u);
    let id = ids[i / D];
    if (id < 0 || u32(id) >= pu(2u)) { return; }
    let k = u32(id) * D + i % D;
    let v = src[i];
    var old = atomicLoad(&acc[k]);
    loop {
        let r = atomicCompareExchangeWeak(&acc[k], old, bitcast<u32>(bitcast<f32>(old) + v));
        if (r.exchanged) { break; }
        old = r.old_value;
    }
}
