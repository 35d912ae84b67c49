"""Register-blocked GEMM in the handout's shape (16 x 4 threads, a 16 x 64 tile of C, one
column of 16 sums per thread), with the B values loaded one step ahead into a second
local array (software pipelining), and timings of each launch logged."""

from __future__ import annotations

import time

import numpy as np
from gemm_common import LaunchPlan, as_f32, log

from nnkit.backend import cuda

TILE_M: int = 16
TILE_N: int = 64
TILE_K: int = 4


@cuda.jit
def register_pipelined(A, B, C, alpha, beta):
    a_tile = cuda.shared.array((TILE_M, TILE_K), np.float32)
    b_now = cuda.local.array(TILE_K, np.float32)
    b_next = cuda.local.array(TILE_K, np.float32)
    sums = cuda.local.array(TILE_M, np.float32)
    t = cuda.threadIdx.x + cuda.threadIdx.y * cuda.blockDim.x
    i0 = cuda.blockIdx.y * TILE_M
    j = cuda.blockIdx.x * TILE_N + t
    M, N = C.shape
    K = A.shape[1]
    for r in range(TILE_M):
        sums[r] = np.float32(0.0)
    for kk in range(TILE_K):
        b_next[kk] = B[kk, j] if j < N and kk < K else np.float32(0.0)
    lr, lk = t // TILE_K, t % TILE_K
    for k0 in range(0, K, TILE_K):
        for kk in range(TILE_K):
            b_now[kk] = b_next[kk]
        a_tile[lr, lk] = A[i0 + lr, k0 + lk] if i0 + lr < M and k0 + lk < K else np.float32(0.0)
        k1 = k0 + TILE_K
        for kk in range(TILE_K):
            b_next[kk] = B[k1 + kk, j] if j < N and k1 + kk < K else np.float32(0.0)
        cuda.syncthreads()
        for kk in range(TILE_K):
            bv = b_now[kk]
            for r in range(TILE_M):
                sums[r] += a_tile[r, kk] * bv
        cuda.syncthreads()
    if j < N:
        for r in range(TILE_M):
            i = i0 + r
            if i < M:
                out = alpha * sums[r]
                if beta != 0:
                    out = out + beta * C[i, j]
                C[i, j] = out


def gemm_register(A, B, C, alpha: float, beta: float) -> None:
    plan = LaunchPlan(C.shape[0], C.shape[1], TILE_M, TILE_N, threads=(16, 4))
    t0 = time.perf_counter()
    register_pipelined[plan.grid, plan.threads](A, B, C, as_f32(alpha), as_f32(beta))
    log.debug("register: %s in %.3f s", plan.describe(), time.perf_counter() - t0)
