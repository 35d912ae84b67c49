"""Part 1, version 3: register blocking, 16x4 = 64 threads computing a 16x64 tile of C.

Same contract as versions 1 and 2. This is the handout's design (CME 213 section 4.2) for
row-major arrays. The handout stores matrices by columns and gives each thread a row of
a 64x16 tile; NumPy stores them by rows, so everything is mirrored: each thread owns a
*column* of 16 elements of a 16x64 tile, neighbouring threads own neighbouring columns
(coalesced reads of B and writes of C), a 16x4 piece of A is shared by the block in
shared memory, and each thread keeps the 4 values of B it needs in registers.

Per step of 4 along K, a thread does 64 multiply-adds from 4 global loads (its B values)
and 64 shared-memory reads that all threads of a warp make at the same address (a
broadcast, no bank conflicts); its 16 sums stay in registers.
"""

import numpy as np

from nnkit.backend import cuda

THREADS_X = 16
THREADS_Y = 4
THREADS = THREADS_X * THREADS_Y  # 64 threads, one per column of the tile
TILE_M = 16  # rows of C per block (the length of each thread's column)
TILE_N = THREADS  # columns of C per block
TILE_K = 4  # step along K


@cuda.jit
def gemm_register_kernel(A, B, C, alpha, beta):
    """Block (bx, by) computes C[by*16:(by+1)*16, bx*64:(bx+1)*64].

    Check: `make check PART=gemm KERNEL=register` (about 35 lines)."""
    # HINT: t = threadIdx.y * THREADS_X + threadIdx.x picks the column j = bx*TILE_N + t.
    # HINT: Per step along K: the block loads a TILE_M x TILE_K piece of A into shared
    # HINT: memory (one element per thread), each thread loads its TILE_K values of B
    # HINT: into a cuda.local.array, syncthreads, TILE_K x TILE_M multiply-adds into a
    # HINT: local array of TILE_M sums, syncthreads.
    raise NotImplementedError("write gemm_register_kernel()")


def gemm_register(A, B, C, alpha: float, beta: float) -> None:
    """Launch gemm_register_kernel with (16, 4) threads per block over all of C.

    Check: `make check PART=gemm KERNEL=register` (a few lines)."""
    raise NotImplementedError("write gemm_register()")
