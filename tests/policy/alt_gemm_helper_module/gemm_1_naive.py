"""Naive GEMM: a 1-D grid-stride loop over the M*N elements of C (cuda.grid(1) and
cuda.gridsize(1)), the dot product in a device function; the launcher prints its plan."""

from __future__ import annotations

import numpy as np
from gemm_common import as_f32, ceil_div, log, store

from nnkit.backend import cuda

THREADS = 128
MAX_BLOCKS = 8


@cuda.jit(device=True)
def dot(A, B, i, j):
    s = np.float32(0.0)
    for k in range(A.shape[1]):
        s += A[i, k] * B[k, j]
    return s


@cuda.jit
def naive_flat_stride(A, B, C, alpha, beta):
    start = cuda.grid(1)
    step = cuda.gridsize(1)
    N = C.shape[1]
    total = C.shape[0] * N
    for e in range(start, total, step):
        i = e // N
        j = e - i * N
        store(C, i, j, dot(A, B, i, j), alpha, beta)


def gemm_naive(A, B, C, alpha: float, beta: float) -> None:
    M, N = C.shape
    assert A.shape == (M, B.shape[0]) and B.shape[1] == N, f"shapes {A.shape} {B.shape} {C.shape}"
    blocks = min(MAX_BLOCKS, ceil_div(M * N, THREADS))
    print(f"gemm_naive: {M}x{N}x{A.shape[1]}, {blocks} blocks of {THREADS}")
    log.debug("naive launch %d blocks", blocks)
    naive_flat_stride[blocks, THREADS](A, B, C, as_f32(alpha), as_f32(beta))
