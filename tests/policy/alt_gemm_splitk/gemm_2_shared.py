"""Alternative shared-memory GEMM with 8 x 8 tiles; the launcher passes nothing but the
arrays and the scalars, and the kernel reads its tile size from cuda.blockDim (the shared
arrays are sized for the largest tile it supports)."""

import numpy as np

from nnkit.backend import cuda

MAX_TILE = 16
TILE = 8


@cuda.jit
def shared_any_tile(A, B, C, alpha, beta):
    a_tile = cuda.shared.array((MAX_TILE, MAX_TILE), np.float32)
    b_tile = cuda.shared.array((MAX_TILE, MAX_TILE), np.float32)
    t = cuda.blockDim.x  # square blocks: the tile size
    c, r = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * t + r
    col = cuda.blockIdx.x * t + c
    K = A.shape[1]
    total = np.float32(0.0)
    k0 = 0
    while k0 < K:
        a_tile[r, c] = A[row, k0 + c] if row < C.shape[0] and k0 + c < K else 0.0
        b_tile[r, c] = B[k0 + r, col] if k0 + r < K and col < C.shape[1] else 0.0
        cuda.syncthreads()
        for kk in range(t):
            total += a_tile[r, kk] * b_tile[kk, c]
        cuda.syncthreads()
        k0 += t
    if row < C.shape[0] and col < C.shape[1]:
        if beta == 0:
            C[row, col] = alpha * total
        else:
            C[row, col] = alpha * total + beta * C[row, col]


def gemm_shared(A, B, C, alpha, beta):
    M, N = C.shape
    shared_any_tile[((N + TILE - 1) // TILE, (M + TILE - 1) // TILE), (TILE, TILE)](
        A, B, C, np.float32(alpha), np.float32(beta))
