"""Alternative register-blocked GEMM, blocked in two dimensions: a block of 8 x 8 threads
computes a 32 x 32 tile of C, each thread a 4 x 4 patch of it in a local array, from
32 x 8 and 8 x 32 pieces of A and B in shared memory (8 steps along K at a time)."""

import numpy as np
from numba import cuda as nb_cuda

BM = 32
BN = 32
BK = 8
TM = 4
TN = 4
THREADS = (BN // TN) * (BM // TM)  # 64


@nb_cuda.jit
def register_2d(A, B, C, alpha, beta):
    As = nb_cuda.shared.array((BM, BK), np.float32)
    Bs = nb_cuda.shared.array((BK, BN), np.float32)
    acc = nb_cuda.local.array((TM, TN), np.float32)
    a_reg = nb_cuda.local.array(TM, np.float32)
    b_reg = nb_cuda.local.array(TN, np.float32)
    tx = nb_cuda.threadIdx.x  # patch column
    ty = nb_cuda.threadIdx.y  # patch row
    tid = ty * (BN // TN) + tx
    row0 = nb_cuda.blockIdx.y * BM
    col0 = nb_cuda.blockIdx.x * BN
    M, N = C.shape
    K = A.shape[1]
    for a in range(TM):
        for b in range(TN):
            acc[a, b] = 0
    for k0 in range(0, K, BK):
        # 256 elements of each piece, 64 threads: 4 loads each.
        for q in range(tid, BM * BK, THREADS):
            r = q // BK
            kk = q % BK
            if row0 + r < M and k0 + kk < K:
                As[r, kk] = A[row0 + r, k0 + kk]
            else:
                As[r, kk] = 0
        for q in range(tid, BK * BN, THREADS):
            kk = q // BN
            c = q % BN
            if k0 + kk < K and col0 + c < N:
                Bs[kk, c] = B[k0 + kk, col0 + c]
            else:
                Bs[kk, c] = 0
        nb_cuda.syncthreads()
        for kk in range(BK):
            for a in range(TM):
                a_reg[a] = As[ty * TM + a, kk]
            for b in range(TN):
                b_reg[b] = Bs[kk, tx + b * (BN // TN)]
            for a in range(TM):
                for b in range(TN):
                    acc[a, b] += a_reg[a] * b_reg[b]
        nb_cuda.syncthreads()
    for a in range(TM):
        i = row0 + ty * TM + a
        for b in range(TN):
            j = col0 + tx + b * (BN // TN)
            if i < M and j < N:
                if beta == 0:
                    C[i, j] = alpha * acc[a, b]
                else:
                    C[i, j] = alpha * acc[a, b] + beta * C[i, j]


def gemm_register(A, B, C, alpha, beta):
    M, N = C.shape
    grid = ((N + BN - 1) // BN, (M + BM - 1) // BM)
    register_2d[grid, (BN // TN, BM // TM)](A, B, C, np.float32(alpha), np.float32(beta))
