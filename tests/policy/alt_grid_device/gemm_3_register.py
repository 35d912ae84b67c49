"""Alternative register-blocked GEMM: the solution's tile shape with the loads written
out differently (local arrays sized by constants, min() for the row count, a while loop)."""

import numpy as np

from nnkit.backend import cuda

TX, TY = 16, 4
TILE_N = TX * TY
TILE_M = 16
TILE_K = 4


@cuda.jit
def register_kernel(A, B, C, alpha, beta):
    a_part = cuda.shared.array((TILE_K, TILE_M), np.float32)
    b_regs = cuda.local.array(TILE_K, np.float32)
    sums = cuda.local.array(TILE_M, np.float32)
    t = cuda.threadIdx.x + TX * cuda.threadIdx.y
    first_row = cuda.blockIdx.y * TILE_M
    col = cuda.blockIdx.x * TILE_N + t
    n_rows, n_cols = C.shape
    depth = A.shape[1]
    for r in range(TILE_M):
        sums[r] = np.float32(0.0)
    k0 = 0
    while k0 < depth:
        r_load, k_load = t // TILE_K, t % TILE_K
        value = np.float32(0.0)
        if first_row + r_load < n_rows and k0 + k_load < depth:
            value = A[first_row + r_load, k0 + k_load]
        a_part[k_load, r_load] = value
        for kk in range(TILE_K):
            b_regs[kk] = B[k0 + kk, col] if col < n_cols and k0 + kk < depth else 0.0
        cuda.syncthreads()
        for kk in range(TILE_K):
            bk = b_regs[kk]
            for r in range(TILE_M):
                sums[r] += a_part[kk, r] * bk
        cuda.syncthreads()
        k0 += TILE_K
    if col < n_cols:
        for r in range(min(TILE_M, n_rows - first_row)):
            if beta == 0:
                C[first_row + r, col] = alpha * sums[r]
            else:
                C[first_row + r, col] = alpha * sums[r] + beta * C[first_row + r, col]


def gemm_register(A, B, C, alpha: float, beta: float) -> None:
    rows, cols = C.shape
    grid = (-(-cols // TILE_N), -(-rows // TILE_M))
    register_kernel[grid, (TX, TY)](A, B, C, np.float32(alpha), np.float32(beta))
