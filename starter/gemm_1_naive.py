"""Part 1, version 1: the naive GEMM, one thread per element of the result.

Contract (the same for all three versions):

    gemm_naive(A, B, C, alpha, beta)    C <- alpha * A @ B + beta * C

A is M x K, B is K x N, C is M x N, all float32, row-major or strided views (the transposed
forms A^T B and A B^T arrive as transposed views). The result D overwrites C, as in cuBLAS.
When beta == 0, C is output only: its old contents may be garbage, even NaN, and must not
reach D. Any M, N, K >= 1 must work, not only multiples of the block size.
"""

import numpy as np

from nnkit.backend import cuda

# Threads per block: 32 along x (the columns of C), 8 along y (its rows).
BLOCK_X = 32
BLOCK_Y = 8


@cuda.jit
def gemm_naive_kernel(A, B, C, alpha, beta):
    """Each thread computes C[i, j].

    Check: `make check PART=gemm KERNEL=naive` (about 10 lines)."""
    # HINT: map threadIdx.x to the column so that a warp reads a row of B and writes a row of
    # HINT: C: consecutive threads, consecutive addresses (coalesced). Accumulate in float32.
    raise NotImplementedError("write gemm_naive_kernel()")


def gemm_naive(A, B, C, alpha: float, beta: float) -> None:
    """Launch gemm_naive_kernel over all of C.

    Check: `make check PART=gemm KERNEL=naive` (a few lines)."""
    # HINT: enough blocks of (BLOCK_X, BLOCK_Y) threads to cover all N columns and M rows;
    # HINT: pass alpha and beta as np.float32, or the kernel computes in float64.
    raise NotImplementedError("write gemm_naive()")
