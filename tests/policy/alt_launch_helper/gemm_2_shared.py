"""Alternative shared-memory GEMM: the tile loads in a device function that writes into
the shared arrays it is given, numba types for the shared arrays, launched through the
helper."""

from numba import float32

from nnkit.backend import cuda

from .launching import cover, launch_gemm

TILE = 32


@cuda.jit(device=True)
def stage(A, B, a_tile, b_tile, row, col, k0, tx, ty):
    a_tile[ty, tx] = A[row, k0 + tx] if row < A.shape[0] and k0 + tx < A.shape[1] else 0
    b_tile[ty, tx] = B[k0 + ty, col] if k0 + ty < B.shape[0] and col < B.shape[1] else 0


@cuda.jit
def tiled_kernel(A, B, C, alpha, beta):
    a_tile = cuda.shared.array((TILE, TILE), float32)
    b_tile = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row, col = cuda.blockIdx.y * TILE + ty, cuda.blockIdx.x * TILE + tx
    acc = float32(0)
    for k0 in range(0, A.shape[1], TILE):
        stage(A, B, a_tile, b_tile, row, col, k0, tx, ty)
        cuda.syncthreads()
        for kk in range(TILE):
            acc += a_tile[ty, kk] * b_tile[kk, tx]
        cuda.syncthreads()
    if row < C.shape[0] and col < C.shape[1]:
        value = alpha * acc
        if beta != 0:
            value += beta * C[row, col]
        C[row, col] = value


def gemm_shared(A, B, C, alpha: float, beta: float) -> None:
    rows, cols = C.shape
    launch_gemm(tiled_kernel, (cover(cols, TILE), cover(rows, TILE)), (TILE, TILE), A, B, C,
                alpha, beta)
