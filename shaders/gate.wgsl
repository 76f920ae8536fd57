// gate.wgsl — a training step that met a NaN or an infinity changes nothing (see asgteach/backends/wgpu_gate.py).
//
// A GPU plan with bind_updates writes the new parameters and optimizer state over the old ones in
// the same submit that computes the loss, so by the time the host sees a NaN loss the damage is
// done, and every later step fails. PyTorch's GradScaler looks at the gradients first (found_inf)
// and skips the optimizer's step; this does the same on the device, with no extra host sync:
//
// 1. finite_check: before the first update kernel, look at every value the updates read (the
//    gradients) and at the loss; any NaN or infinity sets flag[0]. Values are judged on their
//    bits, never by `x != x` (WGSL lets a compiler assume no NaN exists). Slot s is one buffer
//    (d<s>), with its length in uniform word 4 * s; 16 words per thread, the workgroups dealt
//    out slot after slot as in fused_batch.wgsl.
// 2. gate_args: write each update kernel's workgroup counts (the real ones, or 0, 0, 0 when the
//    flag is set) into the buffer the updates are then dispatched from (dispatch_workgroups_indirect).
// 3. copy_words: an update whose kernel could not write in place is copied into the parameter by
//    this kernel, dispatched the same way, instead of by an unconditional buffer copy.
// The flag is cleared at the start of every run and read back with the outputs.

@group(0) @binding(1) var<storage, read_write> flag: array<u32>;
@group(0) @binding(2) var<storage, read> groups: array<u32>;
@group(0) @binding(3) var<storage, read_write> args: array<u32>;

@compute @workgroup_size(64)
fn gate_args(@builtin(global_invocation_id) gid: vec3<u32>) {
    // uniform word 0: how many words (3 per gated launch)
    let i = gid.x;
    if (i >= pu(0u)) { return; }
    args[i] = select(groups[i], 0u, flag[0] != 0u);
}
