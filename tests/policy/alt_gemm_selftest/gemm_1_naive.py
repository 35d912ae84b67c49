"""(A correct alternative: module metadata, and the student's own unittest check in the
module, which imports unittest when the grader loads it: alternatives round five.)

Part 1, version 1: the naive GEMM, one thread per element of the result.

Contract (the same for all three versions):

    gemm_naive(A, B, C, alpha, beta)    C <- alpha * A @ B + beta * C

A is M x K, B is K x N, C is M x N, all float32, row-major or strided views (the transposed
forms A^T B and A B^T arrive as transposed views). The result D overwrites C, as in cuBLAS.
When beta == 0, C is output only: its old contents may be garbage, even NaN, and must not
reach D. Any M, N, K >= 1 must work, not only multiples of the block size.
"""

import unittest

__author__ = "Jane Student <jane@example.edu>"
__version__ = "1.0"

import numpy as np

from nnkit.backend import cuda

# Threads per block: 32 along x (the columns of C), 8 along y (its rows).
BLOCK_X = 32
BLOCK_Y = 8


@cuda.jit
def gemm_naive_kernel(A, B, C, alpha, beta):
    """Each thread computes C[i, j]."""
    ### BEGIN SOLUTION
    # HINT: map threadIdx.x to the column so that a warp reads a row of B and writes a row of
    # HINT: C: consecutive threads, consecutive addresses (coalesced). Accumulate in float32.
    j, i = cuda.grid(2)
    M, N = C.shape
    if i < M and j < N:
        acc = np.float32(0.0)
        for k in range(A.shape[1]):
            acc += A[i, k] * B[k, j]
        if beta == 0:
            C[i, j] = alpha * acc
        else:
            C[i, j] = alpha * acc + beta * C[i, j]
    ### END SOLUTION


def gemm_naive(A, B, C, alpha: float, beta: float) -> None:
    """Launch gemm_naive_kernel over all of C."""
    ### BEGIN SOLUTION
    # HINT: enough blocks of (BLOCK_X, BLOCK_Y) threads to cover all N columns and M rows;
    # HINT: pass alpha and beta as np.float32, or the kernel computes in float64.
    M, N = C.shape
    grid = ((N + BLOCK_X - 1) // BLOCK_X, (M + BLOCK_Y - 1) // BLOCK_Y)
    gemm_naive_kernel[grid, (BLOCK_X, BLOCK_Y)](A, B, C, np.float32(alpha), np.float32(beta))
    ### END SOLUTION


class TestGemmNaive(unittest.TestCase):
    """My own quick check: python -m unittest gemm_1_naive (in the simulator)."""

    def test_small(self):
        rng = np.random.default_rng(0)
        A = rng.standard_normal((5, 3)).astype(np.float32)
        B = rng.standard_normal((3, 4)).astype(np.float32)
        C = np.zeros((5, 4), dtype=np.float32)
        dA, dB, dC = cuda.to_device(A), cuda.to_device(B), cuda.to_device(C)
        gemm_naive(dA, dB, dC, 1.0, 0.0)
        want = [[sum(float(A[i, k]) * float(B[k, j]) for k in range(3)) for j in range(4)]
                for i in range(5)]
        got = dC.copy_to_host()
        for i in range(5):
            for j in range(4):
                self.assertAlmostEqual(float(got[i, j]), want[i][j], places=4)


if __name__ == "__main__":
    unittest.main()
