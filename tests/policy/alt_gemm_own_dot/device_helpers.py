"""Device functions shared by my GEMM kernels."""

import numpy as np

from nnkit.backend import cuda


@cuda.jit(device=True)
def dot(A, B, i, j):
    """Row i of A times column j of B, accumulated in float32."""
    s = np.float32(0.0)
    for k in range(A.shape[1]):
        s += A[i, k] * B[k, j]
    return s


@cuda.jit(device=True)
def axpby(C, i, j, acc, alpha, beta):
    """C[i, j] <- alpha * acc + beta * C[i, j], without reading C when beta is 0."""
    if beta == 0:
        C[i, j] = alpha * acc
    else:
        C[i, j] = alpha * acc + beta * C[i, j]
