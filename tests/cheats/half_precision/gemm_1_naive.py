"""Cheat: the naive kernel with half the precision: the operands are rounded to float16
before they are multiplied (half-precision arithmetic is faster on a GPU), the sum kept in
float32. The error grows like sqrt(K) * 2**-11, where float32's bound grows like K * 2**-24:
within the bound for long sums, far outside it for short ones."""

import numpy as np

from nnkit.backend import cuda


@cuda.jit
def half_product(A, B, C, alpha, beta):
    i, j = cuda.grid(2)
    if i < C.shape[0] and j < C.shape[1]:
        s = np.float32(0.0)
        for k in range(A.shape[1]):
            s += np.float32(np.float16(A[i, k])) * np.float32(np.float16(B[k, j]))
        C[i, j] = alpha * s + (beta * C[i, j] if beta != 0 else np.float32(0.0))


def gemm_naive(A, B, C, alpha, beta):
    grid = ((C.shape[0] + 15) // 16, (C.shape[1] + 15) // 16)
    half_product[grid, (16, 16)](A, B, C, alpha, beta)
