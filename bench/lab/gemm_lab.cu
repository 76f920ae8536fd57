// gemm_lab.cu -- the wgpu backend's f32 GEMM (shaders/matmul.wgsl, fast NN variant) written out in CUDA C++,
// so that nvcc can say what the algorithm costs on the GPU (registers, spills, SASS) and variants of it can be
// timed in seconds instead of through a WGSL rebuild. A lab for bench/, never part of the package: the backend
// runs WGSL only. bench/lab/gemm_lab.py compiles and times these against cuBLAS (PyTorch, TF32 off).
//
// Every kernel computes C = A @ B for row-major A (M, K), B (K, N), C (M, N), sizes multiples of the tile.
// The thread map is the WGSL kernel's: TX = BN / TN threads along N, TY = BM / TM along M; thread (tx, ty)
// owns rows (g * TY + ty) * 4 + 0..3 for g < TM / 4 and columns (h * TX + tx) * 4 + 0..3 for h < TN / 4.

#include <cuda_runtime.h>

#ifndef MINB
#define MINB 1
#endif

template <int BM, int BN, int BK, int TM, int TN>
struct Cfg {
    static constexpr int TX = BN / TN, TY = BM / TM, T = TX * TY;
    static constexpr int BM4 = BM / 4, BN4 = BN / 4, BK4 = BK / 4;
    static constexpr int LA = BM * BK / 4 / T, LB = BK * BN / 4 / T;
};

__device__ __forceinline__ float comp(const float4& v, int j) {
    return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

// acc += a * b, four FFMAs
__device__ __forceinline__ void fma4(float4& acc, float a, const float4& b) {
    acc.x = fmaf(a, b.x, acc.x);
    acc.y = fmaf(a, b.y, acc.y);
    acc.z = fmaf(a, b.z, acc.z);
    acc.w = fmaf(a, b.w, acc.w);
}

template <int TM, int TN>
__device__ __forceinline__ void zero_acc(float4 (&acc)[TM][TN / 4]) {
#pragma unroll
    for (int r = 0; r < TM; r++)
#pragma unroll
        for (int h = 0; h < TN / 4; h++) acc[r][h] = make_float4(0.f, 0.f, 0.f, 0.f);
}

// C's rows and columns of thread (tx, ty), in the thread map above
template <int TM, int TN, int TX, int TY>
__device__ __forceinline__ void store_acc(const float4 (&acc)[TM][TN / 4], float4* __restrict__ C, int N, int row0,
                                          int col0, int tx, int ty) {
#pragma unroll
    for (int r = 0; r < TM; r++) {
        int row = row0 + (r / 4) * TY * 4 + r % 4 + ty * 4;
#pragma unroll
        for (int h = 0; h < TN / 4; h++) C[(row * N + col0) / 4 + h * TX + tx] = acc[r][h];
    }
}

// --- v0: the WGSL kernel as it is: one shared copy, the next tile held in registers, two barriers per K tile ---
template <int BM, int BN, int BK, int TM, int TN, int STAGES>
__device__ __forceinline__ void gemm_body(const float4* __restrict__ A, const float4* __restrict__ B,
                                          float4* __restrict__ C, int M, int N, int K) {
    using P = Cfg<BM, BN, BK, TM, TN>;
    __shared__ float4 As[STAGES ? STAGES : 1][BK][P::BM4];   // [k][m / 4]
    __shared__ float4 Bs[STAGES ? STAGES : 1][BK][P::BN4];   // [k][n / 4]
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * P::TX + tx;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float4 acc[TM][TN / 4];
    zero_acc<TM, TN>(acc);
    float4 ra[P::LA], rb[P::LB];
    auto load = [&](int k0) {
#pragma unroll
        for (int i = 0; i < P::LA; i++) {
            int idx = tid + i * P::T, r = idx / P::BK4, q = idx % P::BK4;
            ra[i] = A[((row0 + r) * K + k0) / 4 + q];
        }
#pragma unroll
        for (int i = 0; i < P::LB; i++) {
            int idx = tid + i * P::T, k = idx / P::BN4, q = idx % P::BN4;
            rb[i] = B[((k0 + k) * N + col0) / 4 + q];
        }
    };
    auto store = [&](int s) {
#pragma unroll
        for (int i = 0; i < P::LA; i++) {
            int idx = tid + i * P::T, r = idx / P::BK4, q = idx % P::BK4;
#pragma unroll
            for (int j = 0; j < 4; j++) reinterpret_cast<float*>(&As[s][q * 4 + j][r / 4])[r % 4] = comp(ra[i], j);
        }
#pragma unroll
        for (int i = 0; i < P::LB; i++) {
            int idx = tid + i * P::T;
            Bs[s][idx / P::BN4][idx % P::BN4] = rb[i];
        }
    };
    auto compute = [&](int s) {
#pragma unroll
        for (int kk = 0; kk < BK; kk++) {
            float4 a[TM / 4], b[TN / 4];
#pragma unroll
            for (int g = 0; g < TM / 4; g++) a[g] = As[s][kk][g * P::TY + ty];
#pragma unroll
            for (int h = 0; h < TN / 4; h++) b[h] = Bs[s][kk][h * P::TX + tx];
#pragma unroll
            for (int r = 0; r < TM; r++) {
                float av = comp(a[r / 4], r % 4);
#pragma unroll
                for (int h = 0; h < TN / 4; h++) {
                    fma4(acc[r][h], av, b[h]);
                }
            }
        }
    };
    const int ntiles = K / BK;
    load(0);
    if (STAGES == 0) {   // no tile held in registers: load and store it at the top of the step (fewer registers)
        for (int t = 0; t < ntiles; t++) {
            if (t) load(t * BK);
            store(0);
            __syncthreads();
            compute(0);
            __syncthreads();
        }
    } else if (STAGES == 1) {
        for (int t = 0; t < ntiles; t++) {
            store(0);
            __syncthreads();
            if (t + 1 < ntiles) load((t + 1) * BK);
            compute(0);
            __syncthreads();
        }
    } else {   // two shared copies: the next tile is stored while others may still read this one; one barrier
        store(0);
        __syncthreads();
        for (int t = 0; t < ntiles; t++) {
            const int s = t & 1;
            if (t + 1 < ntiles) load((t + 1) * BK);
            compute(s);
            if (t + 1 < ntiles) store(s ^ 1);
            __syncthreads();
        }
    }
    store_acc<TM, TN, P::TX, P::TY>(acc, C, N, row0, col0, tx, ty);
}

#define KERNEL(name, BM, BN, BK, TM, TN, ST, MB)                                                              \
    extern "C" __global__ void __launch_bounds__((BM / TM) * (BN / TN), MB)                                  \
        name(const float4* __restrict__ A, const float4* __restrict__ B, float4* __restrict__ C, int M, int N, \
             int K) {                                                                                        \
        gemm_body<BM, BN, BK, TM, TN, ST>(A, B, C, M, N, K);                                                 \
    }

KERNEL(v0, 128, 128, 16, 8, 8, 1, 1)          // the WGSL default tile, as it is
KERNEL(v0_minb2, 128, 128, 16, 8, 8, 1, 2)    // the same, with the compiler held to 2 workgroups per SM
KERNEL(db, 128, 128, 16, 8, 8, 2, 1)          // two shared copies, one barrier per K tile
KERNEL(db_minb2, 128, 128, 16, 8, 8, 2, 2)
KERNEL(db8, 128, 128, 8, 8, 8, 2, 1)          // two copies of BK 8 (the same shared bytes as one copy of 16)
KERNEL(v0_bk32, 128, 128, 32, 8, 8, 1, 1)
KERNEL(np, 128, 128, 16, 8, 8, 0, 1)          // no register prefetch
KERNEL(np_minb2, 128, 128, 16, 8, 8, 0, 2)
KERNEL(db8_minb2, 128, 128, 8, 8, 8, 2, 2)
KERNEL(w8x16, 128, 256, 8, 8, 16, 2, 1)       // 128 accumulators per thread, 8 warps per SM
KERNEL(t16x8, 256, 128, 8, 16, 8, 2, 1)
KERNEL(s64, 64, 64, 16, 4, 4, 2, 4)           // the causal tile, two copies
KERNEL(m128x64, 128, 64, 8, 8, 8, 2, 3)       // 128 threads, 8 x 8 each, 3 workgroups per SM

// --- ca: what WGSL cannot say. Tiles go from global to shared memory by cp.async (no registers in between,
// ST stages in flight), A kept k-contiguous in shared memory ([m][k]: the copy cannot transpose) and read as
// float4s along k, four K steps at a time. 128 x 128 tile, 8 x 8 per thread, 256 threads. ---
__device__ __forceinline__ void cp16(void* smem, const void* gmem) {
    unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

template <int ST, int BK>
__device__ __forceinline__ void ca_body(const float* __restrict__ A, const float* __restrict__ B, float4* __restrict__ C,
                                        int M, int N, int K) {
    constexpr int BM = 128, BN = 128, TM = 8, TN = 8, TX = 16, TY = 16, T = 256;
    constexpr int LA = BM * BK / 4 / T, LB = BK * BN / 4 / T;
    __shared__ __align__(16) float As[ST][BM][BK];
    __shared__ float4 Bs[ST][BK][BN / 4];
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * TX + tx;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float4 acc[TM][TN / 4];
    zero_acc<TM, TN>(acc);
    const int ntiles = K / BK;
    auto issue = [&](int s, int t) {
        if (t < ntiles) {
            const int k0 = t * BK;
#pragma unroll
            for (int i = 0; i < LA; i++) {
                int idx = tid + i * T, r = idx / (BK / 4), q = idx % (BK / 4);
                cp16(&As[s][r][q * 4], A + (size_t)(row0 + r) * K + k0 + q * 4);
            }
#pragma unroll
            for (int i = 0; i < LB; i++) {
                int idx = tid + i * T, k = idx / (BN / 4), q = idx % (BN / 4);
                cp16(&Bs[s][k][q], B + (size_t)(k0 + k) * N + col0 + q * 4);
            }
        }
        cp_commit();
    };
#pragma unroll
    for (int s = 0; s < ST - 1; s++) issue(s, s);
    for (int t = 0; t < ntiles; t++) {
        cp_wait<ST - 2>();
        __syncthreads();
        issue((t + ST - 1) % ST, t + ST - 1);
        const int s = t % ST;
#pragma unroll
        for (int kq = 0; kq < BK / 4; kq++) {
            float4 a[TM];
#pragma unroll
            for (int r = 0; r < TM; r++)
                a[r] = *reinterpret_cast<const float4*>(&As[s][((r / 4) * TY + ty) * 4 + r % 4][kq * 4]);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                float4 b[TN / 4];
#pragma unroll
                for (int h = 0; h < TN / 4; h++) b[h] = Bs[s][kq * 4 + j][h * TX + tx];
#pragma unroll
                for (int r = 0; r < TM; r++) {
                    float av = comp(a[r], j);
#pragma unroll
                    for (int h = 0; h < TN / 4; h++) {
                        fma4(acc[r][h], av, b[h]);
                    }
                }
            }
        }
    }
    store_acc<TM, TN, TX, TY>(acc, C, N, row0, col0, tx, ty);
}

#define CA(name, ST, BK, MB)                                                                                   \
    extern "C" __global__ void __launch_bounds__(256, MB)                                                      \
        name(const float4* __restrict__ A, const float4* __restrict__ B, float4* __restrict__ C, int M, int N, \
             int K) {                                                                                          \
        ca_body<ST, BK>(reinterpret_cast<const float*>(A), reinterpret_cast<const float*>(B), C, M, N, K);    \
    }
CA(ca3_8, 3, 8, 2)
CA(ca3_16, 3, 16, 2)
CA(ca4_8, 4, 8, 2)
CA(ca2_16, 2, 16, 2)
CA(ca3_8_minb1, 3, 8, 1)
