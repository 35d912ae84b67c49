"""Alternative register-blocked GEMM, the handout's design with a deeper step along K:
(16, 4) threads, a 16 x 64 tile of C, 8 values of B per thread in registers and a 16 x 8
piece of A in shared memory (two elements staged by each thread)."""

import numpy as np

from nnkit.backend import cuda

ROWS = 16
COLS = 64
DEPTH = 8


@cuda.jit
def register_deep(A, B, C, alpha, beta):
    piece = cuda.shared.array((DEPTH, ROWS), np.float32)  # k-major
    breg = cuda.local.array(DEPTH, np.float32)
    sums = cuda.local.array(ROWS, np.float32)
    t = cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x
    top = cuda.blockIdx.y * ROWS
    j = cuda.blockIdx.x * COLS + t
    M, N = C.shape
    K = A.shape[1]
    for r in range(ROWS):
        sums[r] = 0
    for k0 in range(0, K, DEPTH):
        for e in range(t, ROWS * DEPTH, COLS):
            r = e // DEPTH
            k = e % DEPTH
            v = np.float32(0.0)
            if top + r < M and k0 + k < K:
                v = A[top + r, k0 + k]
            piece[k, r] = v
        for k in range(DEPTH):
            breg[k] = B[k0 + k, j] if j < N and k0 + k < K else np.float32(0.0)
        cuda.syncthreads()
        for k in range(DEPTH):
            bk = breg[k]
            for r in range(ROWS):
                sums[r] += piece[k, r] * bk
        cuda.syncthreads()
    if j >= N:
        return
    for r in range(min(ROWS, M - top)):
        if beta == 0:
            C[top + r, j] = alpha * sums[r]
        else:
            C[top + r, j] = alpha * sums[r] + beta * C[top + r, j]


def gemm_register(A, B, C, alpha, beta):
    M, N = C.shape
    register_deep[((N + COLS - 1) // COLS, (M + ROWS - 1) // ROWS), (16, 4)](
        A, B, C, np.float32(alpha), np.float32(beta))
