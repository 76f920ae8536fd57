// matmul.wgsl — C = A @ B, batched with broadcast batch axes: a tiled, register-blocked,
// vec4 kernel (template: the backend fills in the {{...}} parts).
//
// Each workgroup computes a BM x BN tile of C. It walks K in steps of BK: the threads
// copy an A tile (BM x BK, stored k-major so a thread reads 4 consecutive rows as one
// vec4) and a B tile (BK x BN) into shared memory, then every thread multiplies the
// tile into TM x TN accumulators held in registers. A thread owns rows spread in groups
// of 4 (ty*4.., then +TY*4 ..) and columns likewise, so neighbouring threads read
// neighbouring vec4s of shared memory. While it multiplies one tile, a thread already
// holds the next tile's values in registers (loaded before the multiply), which hides
// global-memory latency. The multiply-add block is unrolled by the backend (over BK too) so the
// accumulators stay in registers and shared-memory offsets are constants.
//
// Why As and Bs are arrays of rows: WebGPU checks every index (wgpu clamps it into range), and
// a clamp costs an instruction per read unless the compiler can hoist it. In a flat array the
// index k * BM/4 + column changes with k, so every one of the 4 reads per K step was clamped
// anew; with [k][column] the constant k needs no check and the column's clamp is the same at
// every step. On an H100 that took the 2048^3 product from 37 to 43 TFLOP/s (bench/README.md).
//
// Causal tiles (variants ":zero-..."): for a (T, T) operand known to be zero above or below its
// diagonal, the K loop runs only over the tiles that can hold non-zeros for this workgroup's rows
// or columns, and a workgroup whose C tile lies wholly where C is never used runs no K step (its
// tile is stored as 0 plus the epilogue). Skipped terms are 0 * b: leaving them out changes no sum
// (wgpu_passes/causal_tiles.py says when the zeros are exact). With a rule on A or B, workgroups
// differ in work, up to T / BK K tiles against one, so the grid is laid out (x: columns, y: batch,
// z: row blocks) and the row blocks ordered most work first: the GPU starts workgroups in order,
// and the long ones then do not start last, when the rest of the GPU has nothing left to do (on an
// H100 that took heads = w @ v from 0.40 to 0.31 ms at seq 1024). A rule on C keeps the plain grid
// (its workgroups either run every K step or none; the plain order keeps a batch's tiles together).
//
// Epilogue (variant ":bias"): C = A @ B + bias, the bias (N,) added to every row as C is stored,
// when a Linear layer's "+ b" is the product's only reader (pass wgpu_passes/epilogue.py); the add runs no kernel.
//
// Two variants: "fast" needs M % BM == N % BN == K % BK == 0 and reads/writes vec4s;
// "edge" handles every size (1-D operands too) with bounds-checked scalar loads that
// pad with zeros and bounds-checked stores.
// Uniform words: 0 M  1 N  2 K  3 batch ndim  4 LDA  5 LDB (elements between rows of the stored A / B:
//   K or M for A, N or K for B when contiguous; more when a head-split transpose is read in place)
//   6 LDC (C's row stride: N, or more when C is written straight into a head-merge transpose's layout)
//   8..13 batch shape  16..21 A batch strides  24..29 B batch strides (0 where that operand's batch
//   axis is broadcast)  32..37 C batch strides

const BM: u32 = {{BM}}u;
const BN: u32 = {{BN}}u;
const BK: u32 = {{BK}}u;
const TX: u32 = {{TX}}u;           // threads along N  (= BN / TN)
const TY: u32 = {{TY}}u;           // threads along M  (= BM / TM)
const T: u32 = TX * TY;
const LA: u32 = {{LA}}u;           // A-tile loads per thread
const LB: u32 = {{LB}}u;           // B-tile loads per thread

@group(0) @binding(1) var<storage, read> A: array<{{ELEM}}>;
@group(0) @binding(2) var<storage, read> B: array<{{ELEM}}>;
@group(0) @binding(3) var<storage, read_write> C: array<{{ELEM}}>;
{{BIAS_DECL}}

// Two-dimensional, so the row index (k, a constant in the unrolled multiply) and the column
// index (depends on the thread only) are bounds-checked separately: the column's check is the
// same at every k, and the compiler computes it once instead of once per read.
var<workgroup> As: array<array<vec4<f32>, {{BM4}}>, BK>;   // [k][m / 4]
var<workgroup> Bs: array<array<vec4<f32>, {{BN4}}>, BK>;   // [k][n / 4]

fn batch_offsets(z: u32) -> vec3<u32> {
    var rest = z;
    var oa = 0u;
    var ob = 0u;
    var oc = 0u;
    let nd = pu(3u);
    for (var k = 0u; k < nd; k++) {
        let d = nd - 1u - k;
        let i = rest % pu(8u + d);
        rest = rest / pu(8u + d);
        oa += i * pu(16u + d);
        ob += i * pu(24u + d);
        oc += i * pu(32u + d);
    }
    return vec3<u32>(oa, ob, oc);
}

@compute @workgroup_size({{TX}}, {{TY}})
fn matmul(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let M = pu(0u);
    let N = pu(1u);
    let K = pu(2u);
    let LDA = pu(4u);
    let LDB = pu(5u);
    let LDC = pu(6u);
    let tx = lid.x;
    let ty = lid.y;
    let tid = ty * TX + tx;
    let row0 = {{ROW0}};
    let col0 = wid.x * BN;
    let offs = batch_offsets({{BATCH}});
    let a_off = offs.x;
    let b_off = offs.y;
    let c_off = offs.z;

{{ACC_DECL}}
    var ra: array<{{ELEM}}, LA>;
    var rb: array<{{ELEM}}, LB>;
    let ntiles = (K + BK - 1u) / BK;
    // The K tiles this workgroup multiplies: all of them, unless the pass causal_tiles knows that
    // an operand is zero on one side of its diagonal (attention's causal weights), or that C's
    // values on one side are never used; then the tiles that add only zeros are left out.
{{K_RANGE}}

    {{LOAD_GLOBAL}}
    for (var t = {{T_LO}}; t < {{T_HI}}; t++) {
        {{STORE_SHARED}}
        workgroupBarrier();
        if (t + 1u < {{T_HI}}) {
            let k0 = (t + 1u) * BK;
            {{LOAD_NEXT}}
        }
        // the BK steps of the tile, unrolled: each reads TM/4 + TN/4 vec4s and does TM*TN/4 vec4 FMAs
{{COMPUTE}}
        workgroupBarrier();
    }
{{STORE_C}}
}
