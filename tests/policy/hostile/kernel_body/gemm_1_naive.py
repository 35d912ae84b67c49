"""Kernels whose bodies are host Python: the simulator would run them, a GPU would not
compile them."""

# ruff: noqa (hostile code, written to be refused)

import numpy as np

from nnkit.backend import cuda

CACHE = {}


def host_helper(x):
    return x


@cuda.jit
def gemm_naive_kernel(A, B, C, alpha, beta):
    i, j = cuda.grid(2)
    if i == 0 and j == 0:
        C[:, :] = np.dot(A, B)  # expect: kernel-slice, kernel-call
    row = A[i]
    column_total = np.sum(A[i, :])  # expect: kernel-call, kernel-slice
    acc = np.sum(row * B[j])  # expect: kernel-call, kernel-array
    exec("C[i, j] = acc")  # expect: builtin
    total = sum(A[i, k] for k in range(3))  # expect: kernel-call, kernel-syntax
    C[i, j] = CACHE[0]  # expect: kernel-global
    host = host_helper(acc)  # expect: kernel-call
    copy = A.copy_to_host()  # expect: kernel-call
    pair = [total, host]  # expect: kernel-syntax
    try:  # expect: kernel-syntax
        pass
    except Exception:
        pass
    flipped = A.T[j, i]  # expect: kernel-attribute
    square = lambda q: q * q  # expect: kernel-syntax
    import math  # expect: kernel-syntax
    C[i] = alpha  # expect: kernel-array
    label = f"{i}"  # expect: kernel-syntax
    C[i, j] = C[i, ...]  # expect: kernel-slice
    C[i, j] = math.fsum(A[i]) + max(A[i])  # expect: kernel-call, kernel-array
    C[i, j] = B[None, j]  # expect: kernel-slice
    C[i, j] = pair[0] + copy + flipped + square(2) + len(label)  # expect: kernel-call


@cuda.jit
def row_kernel(A, C):
    i = cuda.grid(1)
    for k in range(A.shape[1]):
        C[i, k] = 0.0
    C[i] += A[i]  # expect: kernel-array
    scratch = cuda.local.array(A.shape[1], np.float32)  # expect: kernel-array
    scratch[0] = cuda.shared.array(16, np.float32)[0]
    global CACHE  # expect: kernel-syntax
    gemm_naive_kernel[1, 1](A, A, C, 1.0, 0.0)  # expect: kernel-call


def gemm_naive(A, B, C, alpha, beta):
    M, N = C.shape
    gemm_naive_kernel[(N + 31) // 32, (M + 7) // 8](A, B, C, np.float32(alpha),
                                                    np.float32(beta))
