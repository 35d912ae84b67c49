"""Alternative shared-memory GEMM: 32 x 32 tiles with guarded loads in a device function
of another module, the product into a temporary made with device_array_like, and the
alpha/beta epilogue as its own kernel."""

import gemm_parts
import numpy as np

from nnkit.backend import cuda

TILE = 32


@cuda.jit
def tiled_product(A, B, T):
    sa = cuda.shared.array((TILE, TILE), np.float32)
    sb = cuda.shared.array((TILE, TILE), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    i = cuda.blockIdx.y * TILE + ty
    j = cuda.blockIdx.x * TILE + tx
    acc = np.float32(0.0)
    for k0 in range(0, A.shape[1], TILE):
        sa[ty, tx] = gemm_parts.load_or_zero(A, i, k0 + tx)
        sb[ty, tx] = gemm_parts.load_or_zero(B, k0 + ty, j)
        cuda.syncthreads()
        for kk in range(TILE):
            acc += sa[ty, kk] * sb[kk, tx]
        cuda.syncthreads()
    if i < T.shape[0] and j < T.shape[1]:
        T[i, j] = acc


def gemm_shared(A, B, C, alpha, beta):
    T = cuda.device_array_like(C)
    geo = gemm_parts.Geometry.covering(C.shape[0], C.shape[1], TILE, TILE)
    tiled_product[geo.grid, geo.block](A, B, T)
    gemm_parts.epilogue(T, C, alpha, beta)
