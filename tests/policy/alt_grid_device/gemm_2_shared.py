"""Alternative shared-memory GEMM: 16x16 tiles, a device function that stages one element,
constants built from arithmetic, keyword arguments to cuda.shared.array."""

import numpy as np

from nnkit.backend import cuda

LOG_TILE = 4
TILE = 2 ** LOG_TILE
BLOCK = (TILE, TILE)
ZERO = np.float32(0.0)


@cuda.jit(device=True)
def fetch(M, r, c):
    """M[r, c], or zero outside M."""
    if r < M.shape[0] and c < M.shape[1]:
        return M[r, c]
    return ZERO


@cuda.jit
def shared_kernel(A, B, C, alpha, beta):
    a_tile = cuda.shared.array(shape=BLOCK, dtype=np.float32)
    b_tile = cuda.shared.array(shape=BLOCK, dtype=np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * cuda.blockDim.y + ty
    col = cuda.blockIdx.x * cuda.blockDim.x + tx
    acc = ZERO
    steps = (A.shape[1] + TILE - 1) // TILE
    for s in range(steps):
        a_tile[ty, tx] = fetch(A, row, s * TILE + tx)
        b_tile[ty, tx] = fetch(B, s * TILE + ty, col)
        cuda.syncthreads()
        for kk in range(TILE):
            acc = cuda.fma(a_tile[ty, kk], b_tile[kk, tx], acc)
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = alpha * acc if beta == 0 else alpha * acc + beta * C[row, col]


def gemm_shared(A, B, C, alpha: float, beta: float) -> None:
    rows, cols = C.shape
    grid = ((cols + TILE - 1) // TILE, (rows + TILE - 1) // TILE)
    shared_kernel[grid, BLOCK](A, B, C, np.float32(alpha), np.float32(beta))
