"""Alternative shared-memory GEMM: a block of 32 x 8 threads computes a 32 x 32 tile of C,
each thread 4 rows of it (thread coarsening), staging 32 x 32 pieces of A and B with 4
loads each per step."""

import numpy as np

from nnkit.backend import cuda

TILE = 32
ROWS_PER_THREAD = 4
BLOCK_ROWS = TILE // ROWS_PER_THREAD  # 8


@cuda.jit
def shared_coarse(A, B, C, alpha, beta):
    sA = cuda.shared.array(shape=(TILE, TILE), dtype=np.float32)
    sB = cuda.shared.array(shape=(TILE, TILE), dtype=np.float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row0 = cuda.blockIdx.y * TILE
    col = cuda.blockIdx.x * TILE + tx
    M = C.shape[0]
    N = C.shape[1]
    K = A.shape[1]
    acc = cuda.local.array(ROWS_PER_THREAD, np.float32)
    for q in range(ROWS_PER_THREAD):
        acc[q] = np.float32(0.0)
    for k0 in range(0, K, TILE):
        for q in range(ROWS_PER_THREAD):
            r = ty + q * BLOCK_ROWS
            a_val = np.float32(0.0)
            if row0 + r < M and k0 + tx < K:
                a_val = A[row0 + r, k0 + tx]
            sA[r, tx] = a_val
            b_val = np.float32(0.0)
            if k0 + r < K and col < N:
                b_val = B[k0 + r, col]
            sB[r, tx] = b_val
        cuda.syncthreads()
        for kk in range(TILE):
            b = sB[kk, tx]
            for q in range(ROWS_PER_THREAD):
                acc[q] += sA[ty + q * BLOCK_ROWS, kk] * b
        cuda.syncthreads()
    if col < N:
        for q in range(ROWS_PER_THREAD):
            row = row0 + ty + q * BLOCK_ROWS
            if row < M:
                value = alpha * acc[q]
                if beta != 0:
                    value += beta * C[row, col]
                C[row, col] = value


def gemm_shared(A, B, C, alpha, beta):
    M, N = C.shape
    grid = ((N + TILE - 1) // TILE, (M + TILE - 1) // TILE)
    shared_coarse[grid, (TILE, BLOCK_ROWS)](A, B, C, np.float32(alpha), np.float32(beta))
