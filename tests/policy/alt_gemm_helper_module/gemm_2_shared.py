"""Shared-memory GEMM, 32 x 32 tiles: guarded loads and the store through the device
functions of gemm_common; the launch plan is a dataclass."""

from __future__ import annotations

import numpy as np
from gemm_common import LOG2_WARP, LaunchPlan, as_f32, guarded, log, store

from nnkit.backend import cuda

TILE = 1 << LOG2_WARP  # 32


@cuda.jit
def tiled(A, B, C, alpha, beta):
    sA = cuda.shared.array(shape=(TILE, TILE), dtype=np.float32)
    sB = cuda.shared.array(shape=(TILE, TILE), dtype=np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    acc = np.float32(0.0)
    n_tiles = (A.shape[1] + TILE - 1) // TILE
    for t in range(n_tiles):
        sA[ty, tx] = guarded(A, row, t * TILE + tx)
        sB[ty, tx] = guarded(B, t * TILE + ty, col)
        cuda.syncthreads()
        for kk in range(TILE):
            acc += sA[ty, kk] * sB[kk, tx]
        cuda.syncthreads()
    store(C, row, col, acc, alpha, beta)


def gemm_shared(A, B, C, alpha: float, beta: float) -> None:
    plan = LaunchPlan(C.shape[0], C.shape[1], TILE, TILE, threads=(TILE, TILE))
    log.info(plan.describe())
    tiled[plan.grid, plan.threads](A, B, C, as_f32(alpha), as_f32(beta))
