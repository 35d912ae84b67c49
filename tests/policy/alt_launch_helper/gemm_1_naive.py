"""Alternative naive GEMM: a 1-D grid, each thread finding its (row, column) with divmod,
launched through a helper module that receives the kernel."""

import numba

from nnkit.backend import cuda

from .launching import WARP, cover, launch_gemm

THREADS = 4 * WARP


@cuda.jit(numba.void(numba.float32[:, :], numba.float32[:, :], numba.float32[:, :],
                     numba.float32, numba.float32))
def flat_kernel(A, B, C, alpha, beta):
    t = cuda.grid(1)
    rows, cols = C.shape
    if t < rows * cols:
        i, j = divmod(t, cols)
        acc = numba.float32(0.0)
        for k in range(A.shape[1]):
            acc += A[i, k] * B[k, j]
        if beta == 0:
            C[i, j] = alpha * acc
        else:
            C[i, j] = alpha * acc + beta * C[i, j]


def gemm_naive(A, B, C, alpha: float, beta: float) -> None:
    launch_gemm(flat_kernel, (cover(C.size, THREADS),), (THREADS,), A, B, C, alpha, beta)
