"""Naive GEMM with the problem's dimensions in a small frozen dataclass (rows, cols and the
inner dimension K), cuda.grid(2) read as (row, column) with x along the rows, and the
dimensions passed to the kernel as integers."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnkit.backend import cuda

BLOCK = (8, 32)  # x: rows of C, y: columns


@dataclass(frozen=True)
class GemmShape:
    rows: int
    cols: int
    inner: int

    @classmethod
    def of(cls, A, B, C) -> GemmShape:
        assert A.shape[1] == B.shape[0] and C.shape == (A.shape[0], B.shape[1])
        return cls(C.shape[0], C.shape[1], A.shape[1])

    def grid(self, block: tuple[int, int]) -> tuple[int, int]:
        return ((self.rows + block[0] - 1) // block[0], (self.cols + block[1] - 1) // block[1])


@cuda.jit
def naive_rows_x(A, B, C, alpha, beta, M, N, K):
    i, j = cuda.grid(2)
    if i < M and j < N:
        acc = np.float32(0.0)
        for k in range(K):
            acc += A[i, k] * B[k, j]
        acc *= alpha
        if beta != 0:
            acc += beta * C[i, j]
        C[i, j] = acc


def gemm_naive(A, B, C, alpha: float, beta: float) -> None:
    shape = GemmShape.of(A, B, C)
    naive_rows_x[shape.grid(BLOCK), BLOCK](A, B, C, np.float32(alpha), np.float32(beta),
                                           shape.rows, shape.cols, shape.inner)
