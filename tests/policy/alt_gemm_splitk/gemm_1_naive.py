"""Alternative naive GEMM with split K: a first kernel writes beta * C (0 when beta is 0);
then the grid's z dimension cuts K into chunks, each thread sums its element's products
over one chunk and adds alpha times that partial sum into C with an atomic add."""

import numpy as np

from nnkit.backend import cuda

CHUNK = 16  # products summed by one thread before its atomic add
BLOCK = (16, 8, 1)


@cuda.jit
def scale_c(C, beta):
    j, i = cuda.grid(2)
    if i < C.shape[0] and j < C.shape[1]:
        C[i, j] = beta * C[i, j] if beta != 0 else np.float32(0.0)


@cuda.jit
def partial_products(A, B, C, alpha):
    j, i, chunk = cuda.grid(3)
    K = A.shape[1]
    if i < C.shape[0] and j < C.shape[1]:
        part = np.float32(0.0)
        for k in range(chunk * CHUNK, min(K, (chunk + 1) * CHUNK)):
            part += A[i, k] * B[k, j]
        cuda.atomic.add(C, (i, j), alpha * part)


def gemm_naive(A, B, C, alpha, beta):
    M, N = C.shape
    K = A.shape[1]
    grid = ((N + BLOCK[0] - 1) // BLOCK[0], (M + BLOCK[1] - 1) // BLOCK[1])
    scale_c[grid, BLOCK[:2]](C, np.float32(beta))
    partial_products[(*grid, (K + CHUNK - 1) // CHUNK), BLOCK](A, B, C, np.float32(alpha))
