"""Alternative register kernel with a smaller thread tile: a block of 32 x 8 threads
computes a 16 x 32 tile of C, each thread two elements of one column (rows ty and ty + 8),
both sums in registers; per step of 8 along K the block stages the 16 x 8 piece of A in
shared memory and each thread keeps its 8 values of B in a local array. On the version
rule's 33-row case the last row of threads stores one element each (680 threads for
1,320 elements): the rule once asked for 2 a thread and failed it."""

import numpy as np

from nnkit.backend import cuda

BX = 32  # threads along the columns
BY = 8  # threads along the rows
ROWS_PER_THREAD = 2
TILE_M = BY * ROWS_PER_THREAD  # 16
TILE_N = BX  # 32
TILE_K = 8


@cuda.jit
def gemm_register_kernel(A, B, C, alpha, beta):
    a_tile = cuda.shared.array((TILE_M, TILE_K), np.float32)
    b_reg = cuda.local.array(TILE_K, np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    i0 = cuda.blockIdx.y * TILE_M
    j = cuda.blockIdx.x * TILE_N + tx
    M, N = C.shape
    K = A.shape[1]
    acc0 = np.float32(0.0)
    acc1 = np.float32(0.0)
    t = ty * BX + tx  # 256 threads stage 16 x 8 = 128 values: the first 128 do it
    for k0 in range(0, K, TILE_K):
        if t < TILE_M * TILE_K:
            r, c = t // TILE_K, t % TILE_K
            if i0 + r < M and k0 + c < K:
                a_tile[r, c] = A[i0 + r, k0 + c]
            else:
                a_tile[r, c] = np.float32(0.0)
        for kk in range(TILE_K):
            if j < N and k0 + kk < K:
                b_reg[kk] = B[k0 + kk, j]
            else:
                b_reg[kk] = np.float32(0.0)
        cuda.syncthreads()
        for kk in range(TILE_K):
            acc0 += a_tile[ty, kk] * b_reg[kk]
            acc1 += a_tile[ty + BY, kk] * b_reg[kk]
        cuda.syncthreads()
    if j < N:
        i = i0 + ty
        if i < M:
            C[i, j] = alpha * acc0 if beta == 0 else alpha * acc0 + beta * C[i, j]
        i = i0 + ty + BY
        if i < M:
            C[i, j] = alpha * acc1 if beta == 0 else alpha * acc1 + beta * C[i, j]


def gemm_register(A, B, C, alpha: float, beta: float) -> None:
    M, N = C.shape
    grid = ((N + TILE_N - 1) // TILE_N, (M + TILE_M - 1) // TILE_M)
    gemm_register_kernel[grid, (BX, BY)](A, B, C, np.float32(alpha), np.float32(beta))
