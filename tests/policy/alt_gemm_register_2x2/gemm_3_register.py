"""Register-blocked GEMM with a 2 x 2 micro-tile: a block of 16 x 16 threads computes a
32 x 32 tile of C, each thread the four elements (2 ty + a, 2 tx + b), a, b in {0, 1}, in
four scalar registers. Per step of 16 along K the block stages 32 x 16 of A and 16 x 32 of
B in shared memory (two elements of each per thread); per k a thread reads 2 values of A
and 2 of B for 4 multiply-adds."""

import numpy as np

from nnkit.backend import cuda

T = 16  # threads per block side
R = 2  # micro-tile side
BM = T * R  # 32
BK = 16


@cuda.jit
def register_2x2(A, B, C, alpha, beta):
    sA = cuda.shared.array((BM, BK), np.float32)
    sB = cuda.shared.array((BK, BM), np.float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    m0 = cuda.blockIdx.y * BM
    n0 = cuda.blockIdx.x * BM
    M = C.shape[0]
    N = C.shape[1]
    K = A.shape[1]
    zero = np.float32(0.0)
    c00 = zero
    c01 = zero
    c10 = zero
    c11 = zero
    for k0 in range(0, K, BK):
        for h in range(R):
            r = ty + h * T  # rows of the A piece
            sA[r, tx] = A[m0 + r, k0 + tx] if m0 + r < M and k0 + tx < K else zero
            c = tx + h * T  # columns of the B piece
            sB[ty, c] = B[k0 + ty, n0 + c] if k0 + ty < K and n0 + c < N else zero
        cuda.syncthreads()
        for kk in range(BK):
            a0 = sA[R * ty, kk]
            a1 = sA[R * ty + 1, kk]
            b0 = sB[kk, R * tx]
            b1 = sB[kk, R * tx + 1]
            c00 += a0 * b0
            c01 += a0 * b1
            c10 += a1 * b0
            c11 += a1 * b1
        cuda.syncthreads()
    i = m0 + R * ty
    j = n0 + R * tx
    for a in range(R):
        for b in range(R):
            if i + a < M and j + b < N:
                if a == 0:
                    v = c00 if b == 0 else c01
                else:
                    v = c10 if b == 0 else c11
                if beta == 0:
                    C[i + a, j + b] = alpha * v
                else:
                    C[i + a, j + b] = alpha * v + beta * C[i + a, j + b]


def gemm_register(A, B, C, alpha, beta):
    M, N = C.shape
    grid = ((N + BM - 1) // BM, (M + BM - 1) // BM)
    register_2x2[grid, (T, T)](A, B, C, np.float32(alpha), np.float32(beta))
