"""Part 1, version 2: GEMM blocked in shared memory, one 32x32 tile of C per block.

Same contract as version 1 (C <- alpha * A @ B + beta * C, any M, N, K, strided views,
beta == 0 means C is output only). Each block of TILE x TILE threads walks along K one
tile at a time: it stages a TILE x TILE piece of A and one of B in shared memory, then
every thread reads the row and column it needs from there instead of global memory.
"""

import numpy as np

from nnkit.backend import cuda

TILE = 32


@cuda.jit
def gemm_shared_kernel(A, B, C, alpha, beta):
    """Block (bx, by) computes C[by*TILE:(by+1)*TILE, bx*TILE:(bx+1)*TILE]."""
    ### BEGIN SOLUTION
    # HINT: cuda.shared.array((TILE, TILE), np.float32) for each operand. Load one element
    # HINT: per thread (zero where the tile hangs over the edge of A or B), syncthreads,
    # HINT: accumulate TILE products, syncthreads again before the next load.
    A_tile = cuda.shared.array((TILE, TILE), np.float32)
    B_tile = cuda.shared.array((TILE, TILE), np.float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    i = cuda.blockIdx.y * TILE + ty
    j = cuda.blockIdx.x * TILE + tx
    M, N = C.shape
    K = A.shape[1]
    acc = np.float32(0.0)
    for k0 in range(0, K, TILE):
        # Threads past the edge load zeros, which add nothing to the sums.
        if i < M and k0 + tx < K:
            A_tile[ty, tx] = A[i, k0 + tx]
        else:
            A_tile[ty, tx] = 0.0
        if k0 + ty < K and j < N:
            B_tile[ty, tx] = B[k0 + ty, j]
        else:
            B_tile[ty, tx] = 0.0
        cuda.syncthreads()
        for kk in range(TILE):
            acc += A_tile[ty, kk] * B_tile[kk, tx]
        cuda.syncthreads()  # nobody overwrites the tiles while others still read them
    if i < M and j < N:
        if beta == 0:
            C[i, j] = alpha * acc
        else:
            C[i, j] = alpha * acc + beta * C[i, j]
    ### END SOLUTION


def gemm_shared(A, B, C, alpha: float, beta: float) -> None:
    """Launch gemm_shared_kernel with TILE x TILE threads per block over all of C."""
    ### BEGIN SOLUTION
    M, N = C.shape
    grid = ((N + TILE - 1) // TILE, (M + TILE - 1) // TILE)
    gemm_shared_kernel[grid, (TILE, TILE)](A, B, C, np.float32(alpha), np.float32(beta))
    ### END SOLUTION
