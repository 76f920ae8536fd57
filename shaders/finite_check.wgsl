// finite_check.wgsl — does any value the updates read (or the loss) hold a NaN or an infinity?
// Step 1 of the gate described in gate.wgsl (a template: asgteach/backends/wgpu_gate.py writes the
// {{...}} parts). Slot s is one buffer (d<s>), its length in uniform word 4 * s.

{{BINDINGS}}

const PER_WG: u32 = 4096u;   // words one workgroup looks at: 16 per thread, 256 apart

fn bad_bits(bits: u32) -> bool { return (bits & 0x7f800000u) == 0x7f800000u; }   // NaN or +-inf

@compute @workgroup_size(256)
fn finite_check(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) li: u32) {
    let g = group_index(wid, nwg);
    var slot = 0u;
    var first = 0u;   // the first workgroup of `slot`
    loop {
        let n = (pu(slot * 4u) + PER_WG - 1u) / PER_WG;
        if (g < first + n || slot + 1u >= {{SLOTS}}u) { break; }
        first += n;
        slot += 1u;
    }
    let n = pu(slot * 4u);
    let start = (g - first) * PER_WG + li;
    var bad = false;
    switch slot {
{{CASES}}
        default: {}
    }
    if (bad) { flag[0] = 1u; }
}
