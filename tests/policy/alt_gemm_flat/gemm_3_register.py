"""Alternative register-blocked GEMM: the handout's 16 x 64 tile per (16, 4) block, with the
four values of B held in four scalars (the loop over the step unrolled by hand), the
piece of A stored row-major in shared memory and the sums kept in a local array."""

import numpy as np

from nnkit.backend import cuda

TM = 16
TN = 64
TK = 4


@cuda.jit
def register_unrolled(A, B, C, alpha, beta):
    a_piece = cuda.shared.array((TM, TK), dtype=np.float32)
    sums = cuda.local.array(TM, dtype=np.float32)
    t = cuda.threadIdx.x + 16 * cuda.threadIdx.y
    top = TM * cuda.blockIdx.y
    j = TN * cuda.blockIdx.x + t
    M = C.shape[0]
    N = C.shape[1]
    K = A.shape[1]
    for r in range(TM):
        sums[r] = np.float32(0.0)
    lr = t // TK
    lk = t - lr * TK
    zero = np.float32(0.0)
    for k0 in range(0, K, TK):
        a_piece[lr, lk] = A[top + lr, k0 + lk] if top + lr < M and k0 + lk < K else zero
        in_col = j < N
        b0 = B[k0, j] if in_col else zero
        b1 = B[k0 + 1, j] if in_col and k0 + 1 < K else zero
        b2 = B[k0 + 2, j] if in_col and k0 + 2 < K else zero
        b3 = B[k0 + 3, j] if in_col and k0 + 3 < K else zero
        cuda.syncthreads()
        for r in range(TM):
            s = sums[r]
            s += a_piece[r, 0] * b0
            s += a_piece[r, 1] * b1
            s += a_piece[r, 2] * b2
            s += a_piece[r, 3] * b3
            sums[r] = s
        cuda.syncthreads()
    if j < N:
        for r in range(TM):
            if top + r < M:
                if beta == 0:
                    C[top + r, j] = alpha * sums[r]
                else:
                    C[top + r, j] = alpha * sums[r] + beta * C[top + r, j]


def gemm_register(A, B, C, alpha, beta):
    M, N = C.shape
    register_unrolled[(-(-N // TN), -(-M // TM)), (16, 4)](
        A, B, C, np.float32(alpha), np.float32(beta))
