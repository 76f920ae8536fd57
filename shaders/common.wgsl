// common.wgsl — prepended to every kernel family by the wgpu backend.
//
// Every dispatch gets one small uniform block of 64 u32 words (256 bytes, the largest
// uniform-offset alignment GPUs ask for). Shapes, strides, element counts and float
// attributes live there, so ONE compiled pipeline serves every shape: broadcasting is a
// stride of 0, a transpose is a permuted stride list, a slice is a base offset plus
// scaled strides. Floats are stored as their bit patterns (bitcast). The array's length is
// filled in by the backend: 16 vec4s for one block; a batched launch (fused_batch.wgsl)
// reads several blocks in a row.

struct Params { d: array<vec4<u32>, {{PARAM_VEC4S}}> }
@group(0) @binding(0) var<uniform> P: Params;

fn pu(i: u32) -> u32 { return P.d[i >> 2u][i & 3u]; }

// NaN, judged on the bits. Not `x != x`: WGSL lets a compiler assume that no value is NaN or
// infinite, and naga + lavapipe do fold `x != x` to false, so a kernel that tested that way
// quietly turned a NaN into a number (relu(NaN) = 0, max(NaN, 1) = 1) where numpy keeps it.
fn is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn not_finite(x: f32) -> bool { return (bitcast<u32>(x) & 0x7f800000u) == 0x7f800000u; }   // NaN or +-inf
fn pf(i: u32) -> f32 { return bitcast<f32>(pu(i)); }

// Workgroups are laid out on a 2-D grid (a grid dimension holds at most 65535 groups);
// this turns (x, y) back into one running number.
fn group_index(wid: vec3<u32>, nwg: vec3<u32>) -> u32 { return wid.x + wid.y * nwg.x; }
