"""Alternative naive GEMM: numba's cuda imported directly, cuda.grid(2) with x along the
columns, a typed signature string, math.ceil for the launch and typing hints."""

# ruff: noqa: UP006, UP035, UP045, B905 (written as students do: typing's old names, zip)

import math
from typing import Tuple

import numpy as np
from numba import cuda, float32

THREADS = (16, 16)


@cuda.jit("void(float32[:, :], float32[:, :], float32[:, :], float32, float32)")
def naive_kernel(A, B, C, alpha, beta):
    col, row = cuda.grid(2)
    if row >= C.shape[0] or col >= C.shape[1]:
        return
    total = float32(0.0)
    for k in range(A.shape[1]):
        total += A[row, k] * B[k, col]
    result = alpha * total
    if beta != 0:
        result += beta * C[row, col]
    C[row, col] = result


def _blocks(rows: int, cols: int) -> Tuple[int, int]:
    return math.ceil(cols / THREADS[0]), math.ceil(rows / THREADS[1])


def gemm_naive(A, B, C, alpha: float, beta: float) -> None:
    naive_kernel[_blocks(*C.shape), THREADS](A, B, C, np.float32(alpha), np.float32(beta))


if __name__ == "__main__":  # a student's own test: not graded, not checked
    import sys

    A = np.ones((3, 4), dtype=np.float32)
    print(np.einsum("ik,kj->ij", A, A.T), sys.argv)
