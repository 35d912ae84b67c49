"""Alternative naive GEMM that looks at the operands' layouts: when A or B arrives as a
transposed view (its first stride the smaller), the launcher passes the untransposed
array to a kernel that indexes it the other way round, so that every kernel reads
row-major storage along its rows. Four kernels, one per layout."""

import numpy as np

from nnkit.backend import cuda

BLOCK = (32, 8)


@cuda.jit(device=True)
def store(C, i, j, acc, alpha, beta):
    if beta == 0:
        C[i, j] = alpha * acc
    else:
        C[i, j] = alpha * acc + beta * C[i, j]


@cuda.jit
def ab_kernel(A, B, C, alpha, beta):  # A: M x K, B: K x N
    j, i = cuda.grid(2)
    if i < C.shape[0] and j < C.shape[1]:
        acc = np.float32(0.0)
        for k in range(A.shape[1]):
            acc += A[i, k] * B[k, j]
        store(C, i, j, acc, alpha, beta)


@cuda.jit
def atb_kernel(At, B, C, alpha, beta):  # At: K x M holds A transposed
    j, i = cuda.grid(2)
    if i < C.shape[0] and j < C.shape[1]:
        acc = np.float32(0.0)
        for k in range(At.shape[0]):
            acc += At[k, i] * B[k, j]
        store(C, i, j, acc, alpha, beta)


@cuda.jit
def abt_kernel(A, Bt, C, alpha, beta):  # Bt: N x K holds B transposed
    j, i = cuda.grid(2)
    if i < C.shape[0] and j < C.shape[1]:
        acc = np.float32(0.0)
        for k in range(A.shape[1]):
            acc += A[i, k] * Bt[j, k]
        store(C, i, j, acc, alpha, beta)


@cuda.jit
def atbt_kernel(At, Bt, C, alpha, beta):
    j, i = cuda.grid(2)
    if i < C.shape[0] and j < C.shape[1]:
        acc = np.float32(0.0)
        for k in range(At.shape[0]):
            acc += At[k, i] * Bt[j, k]
        store(C, i, j, acc, alpha, beta)


def _transposed(X) -> bool:
    """A transposed view of a row-major array: its rows are the strided dimension."""
    return X.shape[0] > 1 and X.shape[1] > 1 and X.strides[0] < X.strides[1]


def gemm_naive(A, B, C, alpha, beta):
    M, N = C.shape
    grid = ((N + BLOCK[0] - 1) // BLOCK[0], (M + BLOCK[1] - 1) // BLOCK[1])
    a, b = np.float32(alpha), np.float32(beta)
    ta, tb = _transposed(A), _transposed(B)
    if ta and tb:
        atbt_kernel[grid, BLOCK](A.T, B.T, C, a, b)
    elif ta:
        atb_kernel[grid, BLOCK](A.T, B, C, a, b)
    elif tb:
        abt_kernel[grid, BLOCK](A, B.T, C, a, b)
    else:
        ab_kernel[grid, BLOCK](A, B, C, a, b)
