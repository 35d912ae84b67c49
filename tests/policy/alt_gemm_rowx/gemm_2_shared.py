"""Alternative shared-memory GEMM: 16 x 16 tiles, threadIdx.x along the rows of C, the
tile size taken from math, and a 2-D grid whose x covers the rows."""

import math

from numba import cuda as nb_cuda
from numba import float32

TILE = int(math.pow(2, 4))  # 16


@nb_cuda.jit
def shared_rows_first(A, B, C, alpha, beta):
    a_s = nb_cuda.shared.array((TILE, TILE), float32)
    b_s = nb_cuda.shared.array((TILE, TILE), float32)
    r = nb_cuda.threadIdx.x
    c = nb_cuda.threadIdx.y
    i = nb_cuda.blockIdx.x * TILE + r
    j = nb_cuda.blockIdx.y * TILE + c
    M, N = C.shape
    K = A.shape[1]
    acc = float32(0.0)
    tiles = (K + TILE - 1) // TILE
    for t in range(tiles):
        ka = t * TILE + c
        kb = t * TILE + r
        a_s[r, c] = A[i, ka] if (i < M and ka < K) else float32(0.0)
        b_s[r, c] = B[kb, j] if (kb < K and j < N) else float32(0.0)
        nb_cuda.syncthreads()
        for kk in range(TILE):
            acc += a_s[r, kk] * b_s[kk, c]
        nb_cuda.syncthreads()
    if i < M and j < N:
        C[i, j] = alpha * acc + (beta * C[i, j] if beta != 0 else float32(0.0))


def gemm_shared(A, B, C, alpha, beta):
    M, N = C.shape
    grid = (math.ceil(M / TILE), math.ceil(N / TILE))
    shared_rows_first[grid, (TILE, TILE)](A, B, C, float32(alpha), float32(beta))
