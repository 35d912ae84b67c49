// Thin products for version 5: the kernels of nnkit/gemm_thin.py in CUDA C.
//
//     C <- alpha * A @ B + beta * C      (float32; with beta == 0, C is not read)
//
// with N <= THIN (thin_rows), M <= THIN (thin_columns, then thin_finish when K is split)
// or K <= THIN (thin_outer). Operands are given as in sgemm_warptile.cu: a pointer to
// element [0][0] and two strides in elements, 32-bit offsets (the launcher checks them).
// nnkit/thin_dispatch.py says which kernel gets which product; the Python module says why
// each is shaped as it is. What differs from the numba versions: thin_rows adds up a
// warp's partial sums with shuffles instead of shared memory, and every loop over the
// THIN-sized arrays is unrolled by #pragma, so that they stay in registers.

namespace nnkit_thin {
constexpr int THIN = 16;
constexpr int ROW_WARPS = 8;
constexpr int COL_X = 32;
constexpr int COL_Y = 8;
constexpr int OUTER_X = 128;
constexpr int OUTER_ROWS = 16;
constexpr int FINISH_THREADS = 256;

// NVRTC compiles without the CUDA runtime's headers: no min() to rely on.
__device__ __forceinline__ int smaller(int a, int b) { return a < b ? a : b; }

// D = alpha * s + beta * C at p, without reading C when beta == 0 (it may hold NaN).
__device__ __forceinline__ void store(float* p, float s, float alpha, float beta) {
    *p = beta != 0.0f ? fmaf(beta, *p, alpha * s) : alpha * s;
}
}  // namespace nnkit_thin

// Warp y of block b computes row b * ROW_WARPS + y of C; block (32, ROW_WARPS).
extern "C" __global__ void __launch_bounds__(32 * nnkit_thin::ROW_WARPS)
thin_rows(int M, int N, int K, float alpha, const float* __restrict__ A, int sAm, int sAk,
          const float* __restrict__ B, int sBk, int sBn, float beta, float* __restrict__ C,
          int sCm, int sCn) {
    using namespace nnkit_thin;
    const int lane = threadIdx.x;
    const int m = blockIdx.x * ROW_WARPS + threadIdx.y;
    if (m >= M) return;  // the whole warp: the shuffles below still see all 32 lanes
    float acc[THIN];
#pragma unroll
    for (int j = 0; j < THIN; ++j) acc[j] = 0.0f;
    for (int k = lane; k < K; k += 32) {
        const float a = A[m * sAm + k * sAk];
#pragma unroll
        for (int j = 0; j < THIN; ++j)
            if (j < N) acc[j] = fmaf(a, B[k * sBk + j * sBn], acc[j]);
    }
    // A butterfly per column leaves its sum in every lane; lane j keeps column j's.
    float mine = 0.0f;
#pragma unroll
    for (int j = 0; j < THIN; ++j) {
        if (j < N) {  // N is the same in every lane: no lane leaves a shuffle out
            float v = acc[j];
#pragma unroll
            for (int offset = 16; offset > 0; offset /= 2)
                v += __shfl_xor_sync(0xffffffffu, v, offset);
            if (lane == j) mine = v;
        }
    }
    if (lane < N) store(C + m * sCm + lane * sCn, mine, alpha, beta);
}

// Block (bx, by) sums k in [by * chunk, (by + 1) * chunk) for columns bx * COL_X .. of C;
// block (COL_X, COL_Y). With one share of K (gridDim.y == 1) it writes C, otherwise its
// partial sums go to work[by][i][n] (M x N each) for thin_finish.
extern "C" __global__ void __launch_bounds__(nnkit_thin::COL_X * nnkit_thin::COL_Y)
thin_columns(int M, int N, int K, float alpha, const float* __restrict__ A, int sAm, int sAk,
             const float* __restrict__ B, int sBk, int sBn, float beta, float* __restrict__ C,
             int sCm, int sCn, float* __restrict__ work, int chunk) {
    using namespace nnkit_thin;
    __shared__ float partial[COL_Y][THIN][COL_X];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int n = blockIdx.x * COL_X + tx;
    const int k_start = blockIdx.y * chunk;
    const int k_end = smaller(k_start + chunk, K);
    float acc[THIN];
#pragma unroll
    for (int i = 0; i < THIN; ++i) acc[i] = 0.0f;
    if (n < N) {
        for (int k = k_start + ty; k < k_end; k += COL_Y) {
            const float b = B[k * sBk + n * sBn];
#pragma unroll
            for (int i = 0; i < THIN; ++i)
                if (i < M) acc[i] = fmaf(A[i * sAm + k * sAk], b, acc[i]);
        }
    }
#pragma unroll
    for (int i = 0; i < THIN; ++i) partial[ty][i][tx] = acc[i];
    __syncthreads();
    if (n >= N) return;
    for (int i = ty; i < M; i += COL_Y) {
        float s = 0.0f;
#pragma unroll
        for (int y = 0; y < COL_Y; ++y) s += partial[y][i][tx];
        if (gridDim.y > 1)
            work[(static_cast<long long>(blockIdx.y) * M + i) * N + n] = s;
        else
            store(C + i * sCm + n * sCn, s, alpha, beta);
    }
}

// C <- alpha * (work[0] + ... + work[shares - 1]) + beta * C, one thread per element.
extern "C" __global__ void __launch_bounds__(nnkit_thin::FINISH_THREADS)
thin_finish(int M, int N, int shares, const float* __restrict__ work, float alpha, float beta,
            float* __restrict__ C, int sCm, int sCn) {
    using namespace nnkit_thin;
    const long long t = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    const long long size = static_cast<long long>(M) * N;
    if (t >= size) return;
    const int i = static_cast<int>(t / N), n = static_cast<int>(t % N);
    float s = 0.0f;
    for (int p = 0; p < shares; ++p) s += work[p * size + t];
    store(C + i * sCm + n * sCn, s, alpha, beta);
}

// Thread x of block (bx, by) computes column bx * OUTER_X + x of rows by * OUTER_ROWS ..
// of C, its K <= THIN values of B held in registers; block OUTER_X.
extern "C" __global__ void __launch_bounds__(nnkit_thin::OUTER_X)
thin_outer(int M, int N, int K, float alpha, const float* __restrict__ A, int sAm, int sAk,
           const float* __restrict__ B, int sBk, int sBn, float beta, float* __restrict__ C,
           int sCm, int sCn) {
    using namespace nnkit_thin;
    const int n = blockIdx.x * OUTER_X + threadIdx.x;
    if (n >= N) return;
    float b[THIN];
#pragma unroll
    for (int k = 0; k < THIN; ++k) b[k] = k < K ? B[k * sBk + n * sBn] : 0.0f;
    const int m_start = blockIdx.y * OUTER_ROWS;
    const int m_end = smaller(m_start + OUTER_ROWS, M);
    for (int m = m_start; m < m_end; ++m) {
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < THIN; ++k)
            if (k < K) s = fmaf(A[m * sAm + k * sAk], b[k], s);
        store(C + m * sCm + n * sCn, s, alpha, beta);
    }
}
