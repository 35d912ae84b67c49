"""Alternative naive GEMM in two kernels: the product A @ B into a temporary device array,
then a separate kernel for alpha and beta (gemm_parts.epilogue)."""

import numpy as np
from gemm_parts import Geometry, epilogue

from nnkit.backend import cuda


@cuda.jit
def product_kernel(A, B, T):
    j, i = cuda.grid(2)
    if i < T.shape[0] and j < T.shape[1]:
        s = np.float32(0.0)
        for k in range(A.shape[1]):
            s += A[i, k] * B[k, j]
        T[i, j] = s


def gemm_naive(A, B, C, alpha: float, beta: float) -> None:
    T = cuda.device_array(C.shape, dtype=np.float32)
    geo = Geometry.covering(C.shape[0], C.shape[1], 16, 16)
    product_kernel[geo.grid, geo.block](A, B, T)
    epilogue(T, C, alpha, beta)
