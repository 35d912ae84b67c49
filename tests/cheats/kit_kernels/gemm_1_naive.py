"""Cheat: the product computed by the kit's own kernels (nnkit.gemm_thin's outer product
kernel, sixteen columns of A at a time), with a kernel of the submission's that does
nothing launched beside them: kernels ran, the submission's among them, and replayed
they compute the right C, since the kit's kernels are recorded and replayed too."""

from nnkit.backend import cuda
from nnkit.gemm_thin import outer_gemm

STEP = 16


@cuda.jit
def touch(C):
    i, j = cuda.grid(2)
    if i < C.shape[0] and j < C.shape[1]:
        C[i, j] = C[i, j]


def gemm_naive(A, B, C, alpha, beta):
    K = A.shape[1]
    for k in range(0, K, STEP):
        end = min(k + STEP, K)
        outer_gemm(A[:, k:end], B[k:end, :], C, alpha, beta if k == 0 else 1.0)
    touch[((C.shape[0] + 7) // 8, (C.shape[1] + 7) // 8), (8, 8)](C)
