"""Part 1, version 3: register blocking, 16x4 = 64 threads computing a 16x64 tile of C.

Same contract as versions 1 and 2. This is the handout's design (CME 213 section 4.2) for
row-major arrays. The handout stores matrices by columns and gives each thread a row of
a 64x16 tile; NumPy stores them by rows, so everything is mirrored: each thread owns a
*column* of 16 elements of a 16x64 tile, neighbouring threads own neighbouring columns
(coalesced reads of B and writes of C), a 16x4 piece of A is shared by the block in
shared memory, and each thread keeps the 4 values of B it needs in registers.

Per step of 4 along K, a thread does 64 multiply-adds from 4 global loads (its B values)
and 64 shared-memory reads that all threads of a warp make at the same address (a
broadcast, no bank conflicts); its 16 sums stay in registers.
"""

import numpy as np

from nnkit.backend import cuda

THREADS_X = 16
THREADS_Y = 4
THREADS = THREADS_X * THREADS_Y  # 64 threads, one per column of the tile
TILE_M = 16  # rows of C per block (the length of each thread's column)
TILE_N = THREADS  # columns of C per block
TILE_K = 4  # step along K


@cuda.jit
def gemm_register_kernel(A, B, C, alpha, beta):
    """Block (bx, by) computes C[by*16:(by+1)*16, bx*64:(bx+1)*64]."""
    ### BEGIN SOLUTION
    # HINT: t = threadIdx.y * THREADS_X + threadIdx.x picks the column j = bx*TILE_N + t.
    # HINT: Per step along K: the block loads a TILE_M x TILE_K piece of A into shared
    # HINT: memory (one element per thread), each thread loads its TILE_K values of B
    # HINT: into a cuda.local.array, syncthreads, TILE_K x TILE_M multiply-adds into a
    # HINT: local array of TILE_M sums, syncthreads.
    # Stored k-major: A_tile[kk, r] = A[i0 + r, k0 + kk].
    A_tile = cuda.shared.array((TILE_K, TILE_M), np.float32)
    b = cuda.local.array(TILE_K, np.float32)
    acc = cuda.local.array(TILE_M, np.float32)
    t = cuda.threadIdx.y * THREADS_X + cuda.threadIdx.x
    i0 = cuda.blockIdx.y * TILE_M
    j = cuda.blockIdx.x * TILE_N + t
    M, N = C.shape
    K = A.shape[1]
    for r in range(TILE_M):
        acc[r] = 0.0
    # The element of A this thread stages at each step.
    load_r = t // TILE_K
    load_k = t % TILE_K
    for k0 in range(0, K, TILE_K):
        if i0 + load_r < M and k0 + load_k < K:
            A_tile[load_k, load_r] = A[i0 + load_r, k0 + load_k]
        else:
            A_tile[load_k, load_r] = 0.0
        for kk in range(TILE_K):
            if j < N and k0 + kk < K:
                b[kk] = B[k0 + kk, j]
            else:
                b[kk] = 0.0
        cuda.syncthreads()
        for kk in range(TILE_K):
            for r in range(TILE_M):
                acc[r] += A_tile[kk, r] * b[kk]
        cuda.syncthreads()  # the tile is rewritten by the next step
    if j < N:
        for r in range(TILE_M):
            i = i0 + r
            if i < M:
                if beta == 0:
                    C[i, j] = alpha * acc[r]
                else:
                    C[i, j] = alpha * acc[r] + beta * C[i, j]
    ### END SOLUTION


def gemm_register(A, B, C, alpha: float, beta: float) -> None:
    """Launch gemm_register_kernel with (16, 4) threads per block over all of C."""
    ### BEGIN SOLUTION
    M, N = C.shape
    grid = ((N + TILE_N - 1) // TILE_N, (M + TILE_M - 1) // TILE_M)
    gemm_register_kernel[grid, (THREADS_X, THREADS_Y)](
        A, B, C, np.float32(alpha), np.float32(beta)
    )
    ### END SOLUTION
