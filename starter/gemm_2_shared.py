"""Part 1, version 2: GEMM blocked in shared memory, one 32x32 tile of C per block.

Same contract as version 1 (C <- alpha * A @ B + beta * C, any M, N, K, strided views,
beta == 0 means C is output only). Each block of TILE x TILE threads walks along K one
tile at a time: it stages a TILE x TILE piece of A and one of B in shared memory, then
every thread reads the row and column it needs from there instead of global memory.
"""

import numpy as np

from nnkit.backend import cuda

TILE = 32


@cuda.jit
def gemm_shared_kernel(A, B, C, alpha, beta):
    """Block (bx, by) computes C[by*TILE:(by+1)*TILE, bx*TILE:(bx+1)*TILE].

    Check: `make check PART=gemm KERNEL=shared` (about 25 lines)."""
    # HINT: cuda.shared.array((TILE, TILE), np.float32) for each operand. Load one element
    # HINT: per thread (zero where the tile hangs over the edge of A or B), syncthreads,
    # HINT: accumulate TILE products, syncthreads again before the next load.
    raise NotImplementedError("write gemm_shared_kernel()")


def gemm_shared(A, B, C, alpha: float, beta: float) -> None:
    """Launch gemm_shared_kernel with TILE x TILE threads per block over all of C.

    Check: `make check PART=gemm KERNEL=shared` (a few lines)."""
    raise NotImplementedError("write gemm_shared()")
