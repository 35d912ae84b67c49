"""Alternative shared-memory GEMM with non-square tiles: a block of 32 x 16 threads
computes a 16 x 32 tile of C, stepping 8 along K; the 16 x 8 piece of A is loaded by the
first 128 threads and the 8 x 32 piece of B by half the threads each."""

import numpy as np

from nnkit.backend import cuda

TM, TN, TK = 16, 32, 8


@cuda.jit
def rect_tiles(A, B, C, alpha, beta):
    sa = cuda.shared.array((TM, TK), np.float32)
    sb = cuda.shared.array((TK, TN), np.float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    tid = ty * TN + tx  # 0 .. 511
    i = cuda.blockIdx.y * TM + ty
    j = cuda.blockIdx.x * TN + tx
    M, N = C.shape
    K = A.shape[1]
    acc = np.float32(0.0)
    for k0 in range(0, K, TK):
        if tid < TM * TK:
            r, c = tid // TK, tid % TK
            gi, gk = cuda.blockIdx.y * TM + r, k0 + c
            sa[r, c] = A[gi, gk] if gi < M and gk < K else np.float32(0.0)
        if tid < TK * TN:
            r, c = tid // TN, tid % TN
            gk, gj = k0 + r, cuda.blockIdx.x * TN + c
            sb[r, c] = B[gk, gj] if gk < K and gj < N else np.float32(0.0)
        cuda.syncthreads()
        for kk in range(TK):
            acc += sa[ty, kk] * sb[kk, tx]
        cuda.syncthreads()
    if i < M and j < N:
        if beta != 0:
            C[i, j] = alpha * acc + beta * C[i, j]
        else:
            C[i, j] = alpha * acc


def gemm_shared(A, B, C, alpha, beta):
    M, N = C.shape
    rect_tiles[((N + TN - 1) // TN, (M + TM - 1) // TM), (TN, TM)](
        A, B, C, np.float32(alpha), np.float32(beta))
