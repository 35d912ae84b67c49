"""Cheat: a right C, then A overwritten (say, to reuse its memory as scratch)."""

import numpy as np

from nnkit.backend import cuda


@cuda.jit
def _kernel(A, B, C, alpha, beta):
    j, i = cuda.grid(2)
    M, N = C.shape
    if i < M and j < N:
        acc = np.float32(0.0)
        for k in range(A.shape[1]):
            acc += A[i, k] * B[k, j]
        C[i, j] = alpha * acc if beta == 0 else alpha * acc + beta * C[i, j]


@cuda.jit
def _clobber(A):
    i, k = cuda.grid(2)
    if i < A.shape[0] and k < A.shape[1]:
        A[i, k] = 0


def gemm_naive(A, B, C, alpha, beta):
    M, N = C.shape
    _kernel[((N + 31) // 32, (M + 7) // 8), (32, 8)](A, B, C, np.float32(alpha),
                                                     np.float32(beta))
    _clobber[((A.shape[0] + 7) // 8, (A.shape[1] + 7) // 8), (8, 8)](A)
