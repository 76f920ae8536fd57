// copy.wgsl — moving 32-bit words without arithmetic: reshape, transpose, broadcast_to,
// getitem (slices with steps, ints, None, ...), getitem_grad and concat.
//
// All of them are ONE strided copy: walk an index space of some shape; read the word at
// in_base + sum(i_d * in_stride_d) and write it at out_base + sum(i_d * out_stride_d).
//   transpose    in strides permuted           broadcast_to  in stride 0 on new axes
//   getitem      in_base = slice starts, in strides * steps (may be negative)
//   getitem_grad fill zeros, then copy g INTO the slice (out strides * steps)
//   concat       one copy per input, out_base = where that input starts on the axis
// The words are copied as u32, so floats and integer ids move bit-exactly.
// Uniform words: 0 numel  1 ndim  2 in_base  3 out_base  4 fill bits
//   8..15 shape  16..23 in strides (i32)  24..31 out strides (i32)

@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(256)
fn copy(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let i = group_index(wid, nwg) * 256u + li;
    if (i >= pu(0u)) { return; }
    var rest = i;
    var s = i32(pu(2u));
    var o = i32(pu(3u));
    let nd = pu(1u);
    for (var k = 0u; k < nd; k++) {
        let d = nd - 1u - k;
        let size = pu(8u + d);
        let idx = i32(rest % size);
        rest = rest / size;
        s += idx * bitcast<i32>(pu(16u + d));
        o += idx * bitcast<i32>(pu(24u + d));
    }
    dst[u32(o)] = src[u32(s)];
}

@compute @workgroup_size(256)
fn fill(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let i = group_index(wid, nwg) * 256u + li;
    if (i >= pu(0u)) { return; }
    dst[i] = pu(4u);
}
