// Version 5: the hierarchical-tiling SGEMM of version 4, written in CUDA C.
//
//     C <- alpha * A @ B + beta * C      (float32; with beta == 0, C is not read)
//
// A is M x K, B is K x N, C is M x N, each given by a pointer to element [0][0] and two
// strides in elements (any signs and sizes: row-major, transposed and strided views).
// Offsets are 32-bit ints (the launcher refuses operands whose offsets do not fit): with
// 64-bit strides the default tiles needed more than 128 registers and spilled.
//
// Three levels of tiles, as in version 4 (handouts/part1-gemm.md):
//   block  BM x BN outputs, its A and B panels BK deep in shared memory;
//   warp   WM x WN outputs, split into WMITER x WNITER sub-tiles of (WM/WMITER) x (WN/WNITER);
//   thread 4 x 4 outputs in each warp sub-tile: (4*WMITER) x (4*WNITER) accumulators,
//          8 x 8 with the default 2 x 2 sub-tiles.
// What CUDA C gives that numba-cuda does not:
//   - 128-bit loads (float4): one instruction reads four floats, from global memory where
//     the operand is contiguous and 16-byte aligned, and from shared memory for every
//     thread-tile read. The A panel is stored transposed (k-major) in shared memory so that
//     the four rows a thread needs at one k are adjacent and one float4 reads them.
//   - __launch_bounds__: the compiler is told the block size and how many blocks should fit
//     on an SM, and caps the registers accordingly (128 per thread here).
//   - #pragma unroll on every fixed-length loop, with tile sizes as template parameters,
//     so that all indices into registers and shared memory are compile-time constants.
// The copies are register-staged and double-buffered: the next panel's global loads are
// issued before the current panel's FMAs and written to the other shared buffer after
// them, so one __syncthreads per step suffices.
//
// Any M, N, K: a float4 is read or written only when it lies wholly inside the matrix and
// the operand allows it (bits of `vec`, set by the launcher); anything else falls back to
// guarded scalar accesses, with zeros for elements outside A and B.

namespace nnkit {

constexpr int VEC_A = 1;  // A[m][k..k+3] contiguous: stride along k is 1, 16-byte aligned rows
constexpr int VEC_B = 2;  // B[k][n..n+3] contiguous
constexpr int VEC_C = 4;  // C[m][n..n+3] contiguous

constexpr int MAX_REGISTERS = 128;  // per thread: two 256-thread blocks per SM

template <int BM, int BN, int BK, int WM, int WN, int WMITER, int WNITER>
struct Tiles {
    static constexpr int THREADS = (BM / WM) * (BN / WN) * 32;
    static constexpr int WSUBM = WM / WMITER;  // one warp sub-tile
    static constexpr int WSUBN = WN / WNITER;
    static constexpr int LANES_N = WSUBN / 4;  // lanes across a sub-tile, 4 columns each
    static constexpr int LDA = BM + 4;         // padded row of the transposed A panel
    static constexpr int A_VECS = BM * BK / 4 / THREADS;  // float4s each thread copies
    static constexpr int B_VECS = BK * BN / 4 / THREADS;
    static constexpr int MIN_BLOCKS =
        65536 / (THREADS * MAX_REGISTERS) > 0 ? 65536 / (THREADS * MAX_REGISTERS) : 1;

    static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must divide the block tile");
    static_assert(WM % (4 * WMITER) == 0 && WN % (4 * WNITER) == 0, "4 x 4 per sub-tile");
    static_assert((WSUBM / 4) * (WSUBN / 4) == 32, "a warp sub-tile is 32 lanes of 4 x 4");
    static_assert(BK % 4 == 0 && BN % 4 == 0, "panels are copied in float4s");
    static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0,
                  "every thread copies the same number of float4s");
};

// A float4 from four values (make_float4 needs a header that NVRTC may not provide).
__device__ __forceinline__ float4 f4(float x, float y, float z, float w) {
    float4 v;
    v.x = x, v.y = y, v.z = z, v.w = w;
    return v;
}

// Element (r, c) of a strided matrix, or 0 outside rows x cols.
__device__ __forceinline__ float guarded(const float* __restrict__ X, int r, int c, int rows,
                                         int cols, int s_r, int s_c) {
    return (r < rows && c < cols) ? X[r * s_r + c * s_c] : 0.0f;
}

template <int BM, int BN, int BK, int WM, int WN, int WMITER, int WNITER>
__global__ void __launch_bounds__(Tiles<BM, BN, BK, WM, WN, WMITER, WNITER>::THREADS,
                                  Tiles<BM, BN, BK, WM, WN, WMITER, WNITER>::MIN_BLOCKS)
sgemm_warptile(int M, int N, int K, float alpha,
               const float* __restrict__ A, int sAm, int sAk,
               const float* __restrict__ B, int sBk, int sBn,
               float beta, float* __restrict__ C, int sCm, int sCn, int vec) {
    using T = Tiles<BM, BN, BK, WM, WN, WMITER, WNITER>;
    // Two buffers of each panel. As[k][m] is A's panel transposed, rows padded by 4 floats
    // (keeps float4 alignment; halves the bank conflicts of the transposing stores).
    __shared__ __align__(16) float As[2][BK][T::LDA];
    __shared__ __align__(16) float Bs[2][BK][BN];

    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    // This thread's first row and column inside the block tile. In one quarter-warp the
    // lanes' float4 reads of As cover 128 consecutive bytes and those of Bs are broadcasts
    // or consecutive: no bank conflicts.
    const int tm = (warp / (BN / WN)) * WM + (lane / T::LANES_N) * 4;
    const int tn = (warp % (BN / WN)) * WN + (lane % T::LANES_N) * 4;

    float4 a_stage[T::A_VECS], b_stage[T::B_VECS];  // the next panels, on their way
    float acc[4 * WMITER][4 * WNITER];
#pragma unroll
    for (int i = 0; i < 4 * WMITER; ++i)
#pragma unroll
        for (int j = 0; j < 4 * WNITER; ++j) acc[i][j] = 0.0f;

    // Global -> registers: A's panel rows m0.., columns k0..k0+BK; B's rows k0.., cols n0..
    auto load_panels = [&](int k0) {
#pragma unroll
        for (int i = 0; i < T::A_VECS; ++i) {
            const int v = tid + i * T::THREADS;
            const int m = m0 + v / (BK / 4), k = k0 + (v % (BK / 4)) * 4;
            if ((vec & VEC_A) && m < M && k + 3 < K) {
                a_stage[i] = *reinterpret_cast<const float4*>(A + m * sAm + k);
            } else {
                a_stage[i] = f4(guarded(A, m, k, M, K, sAm, sAk),
                                         guarded(A, m, k + 1, M, K, sAm, sAk),
                                         guarded(A, m, k + 2, M, K, sAm, sAk),
                                         guarded(A, m, k + 3, M, K, sAm, sAk));
            }
        }
#pragma unroll
        for (int i = 0; i < T::B_VECS; ++i) {
            const int v = tid + i * T::THREADS;
            const int k = k0 + v / (BN / 4), n = n0 + (v % (BN / 4)) * 4;
            if ((vec & VEC_B) && k < K && n + 3 < N) {
                b_stage[i] = *reinterpret_cast<const float4*>(B + k * sBk + n);
            } else {
                b_stage[i] = f4(guarded(B, k, n, K, N, sBk, sBn),
                                         guarded(B, k, n + 1, K, N, sBk, sBn),
                                         guarded(B, k, n + 2, K, N, sBk, sBn),
                                         guarded(B, k, n + 3, K, N, sBk, sBn));
            }
        }
    };
    // Registers -> shared buffer `buf`: A transposed (four scalar stores), B as it is.
    auto store_panels = [&](int buf) {
#pragma unroll
        for (int i = 0; i < T::A_VECS; ++i) {
            const int v = tid + i * T::THREADS;
            const int m = v / (BK / 4), k = (v % (BK / 4)) * 4;
            As[buf][k + 0][m] = a_stage[i].x;
            As[buf][k + 1][m] = a_stage[i].y;
            As[buf][k + 2][m] = a_stage[i].z;
            As[buf][k + 3][m] = a_stage[i].w;
        }
#pragma unroll
        for (int i = 0; i < T::B_VECS; ++i) {
            const int v = tid + i * T::THREADS;
            *reinterpret_cast<float4*>(&Bs[buf][v / (BN / 4)][(v % (BN / 4)) * 4]) = b_stage[i];
        }
    };

    const int steps = (K + BK - 1) / BK;
    if (steps > 0) {
        load_panels(0);
        store_panels(0);
    }
    __syncthreads();
    for (int step = 0; step < steps; ++step) {
        const int buf = step & 1;
        const bool more = step + 1 < steps;
        if (more) load_panels((step + 1) * BK);  // in flight during the FMAs below
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[4 * WMITER], b[4 * WNITER];
#pragma unroll
            for (int i = 0; i < WMITER; ++i) {
                const float4 x = *reinterpret_cast<const float4*>(&As[buf][k][tm + i * T::WSUBM]);
                a[4 * i] = x.x, a[4 * i + 1] = x.y, a[4 * i + 2] = x.z, a[4 * i + 3] = x.w;
            }
#pragma unroll
            for (int j = 0; j < WNITER; ++j) {
                const float4 x = *reinterpret_cast<const float4*>(&Bs[buf][k][tn + j * T::WSUBN]);
                b[4 * j] = x.x, b[4 * j + 1] = x.y, b[4 * j + 2] = x.z, b[4 * j + 3] = x.w;
            }
#pragma unroll
            for (int i = 0; i < 4 * WMITER; ++i)
#pragma unroll
                for (int j = 0; j < 4 * WNITER; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        // Buffer buf ^ 1 was last read in the previous step, before the barrier that ended
        // it; the barrier below makes these stores visible before the next step reads them.
        if (more) store_panels(buf ^ 1);
        __syncthreads();
    }

    // Epilogue: D = alpha * acc + beta * C, a float4 per row of a sub-tile where possible.
#pragma unroll
    for (int i = 0; i < WMITER; ++i) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int m = m0 + tm + i * T::WSUBM + r;
            if (m >= M) continue;
#pragma unroll
            for (int j = 0; j < WNITER; ++j) {
                const int n = n0 + tn + j * T::WSUBN;
                const float* d = &acc[4 * i + r][4 * j];
                if ((vec & VEC_C) && n + 3 < N) {
                    float4* p = reinterpret_cast<float4*>(C + m * sCm + n);
                    float4 out = f4(alpha * d[0], alpha * d[1], alpha * d[2],
                                             alpha * d[3]);
                    if (beta != 0.0f) {  // with beta == 0, C may hold NaN: never read it
                        const float4 old = *p;
                        out.x = fmaf(beta, old.x, out.x), out.y = fmaf(beta, old.y, out.y);
                        out.z = fmaf(beta, old.z, out.z), out.w = fmaf(beta, old.w, out.w);
                    }
                    *p = out;
                } else {
#pragma unroll
                    for (int c = 0; c < 4; ++c) {
                        if (n + c < N) {
                            float* p = C + m * sCm + (n + c) * sCn;
                            *p = beta != 0.0f ? fmaf(beta, *p, alpha * d[c]) : alpha * d[c];
                        }
                    }
                }
            }
        }
    }
}

}  // namespace nnkit
