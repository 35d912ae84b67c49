"""Alternative register-blocked GEMM with a 1-D block of 64 threads (the handout's 16 x 4
threads, flattened): thread t owns column t of a 16 x 64 tile of C."""

import numpy as np

from nnkit.backend import cuda

THREADS = 64
TILE_M = 16
STEP = 4


@cuda.jit
def register_1d(A, B, C, alpha, beta):
    a_s = cuda.shared.array((STEP, TILE_M), np.float32)
    acc = cuda.local.array(TILE_M, np.float32)
    bv = cuda.local.array(STEP, np.float32)
    t = cuda.threadIdx.x
    i0 = cuda.blockIdx.y * TILE_M
    j = cuda.blockIdx.x * THREADS + t
    M, N = C.shape
    K = A.shape[1]
    for r in range(TILE_M):
        acc[r] = np.float32(0.0)
    for k0 in range(0, K, STEP):
        r, kk = t % TILE_M, t // TILE_M  # 64 threads, one element of the 16 x 4 piece each
        a_s[kk, r] = A[i0 + r, k0 + kk] if i0 + r < M and k0 + kk < K else np.float32(0.0)
        for q in range(STEP):
            bv[q] = B[k0 + q, j] if j < N and k0 + q < K else np.float32(0.0)
        cuda.syncthreads()
        for q in range(STEP):
            for r2 in range(TILE_M):
                acc[r2] += a_s[q, r2] * bv[q]
        cuda.syncthreads()
    if j < N:
        for r in range(TILE_M):
            if i0 + r < M:
                C[i0 + r, j] = alpha * acc[r] + (beta * C[i0 + r, j] if beta != 0 else 0)


def gemm_register(A, B, C, alpha, beta):
    M, N = C.shape
    register_1d[((N + THREADS - 1) // THREADS, (M + TILE_M - 1) // TILE_M), THREADS](
        A, B, C, np.float32(alpha), np.float32(beta))
