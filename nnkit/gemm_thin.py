"""Thin GEMM products in numba-cuda: one dimension of C, or K, at most THIN.

The network's output layer (10 classes) gives three products that a 64-wide tile serves
badly (54 of 64 columns of work wasted, or two K-steps for a whole tile of loads):

    forward   Z_L  = A_{L-1} W_L^T   M = batch, N = 10,    K = hidden   -> rows_gemm
    backward  dW_L = dZ_L^T A_{L-1}  M = 10,    N = hidden, K = batch   -> columns_gemm
    backward  dA   = dZ_L W_L        M = batch, N = hidden, K = 10      -> outer_gemm

Each kernel keeps the kit's contract (C <- alpha * A @ B + beta * C, float32, any strides;
with beta == 0, C is not read) and is correct for every layout; which one is fast for
which layout is nnkit.thin_dispatch's business. The three designs:

- rows_gemm (N <= THIN): a warp per row of C. Its lanes take every 32nd k, so a warp reads
  32 consecutive elements of A's row at once, and each lane keeps N partial sums; the
  32 partial sums of each column meet in shared memory (numba's simulator has no warp
  shuffles, so the kernel does without them).
- columns_gemm (M <= THIN): a thread per column of C keeps M sums; consecutive threads
  read consecutive elements of a row of B, and A[i, k] is the same for a whole warp (one
  broadcast read). K is long (the batch), so it is split: the 8 rows of threads of a
  block take every 8th k of the block's share of K and meet in shared memory; blocks
  along grid y take consecutive shares and leave partial sums in a workspace, which a
  second launch adds up in a fixed order (no atomics: the result is reproducible).
- outer_gemm (K <= THIN): a thread per column of C reads its K values of B once into
  registers and computes OUTER_ROWS rows; C is written row by row in whole warps.
"""

import numpy as np

from nnkit.backend import cuda, empty
from nnkit.thin_dispatch import THIN  # the per-thread arrays' size: the largest thin dimension

ROW_WARPS = 8  # rows_gemm: rows of C (one warp each) per block
COL_X = 32  # columns_gemm: columns of C per block (one warp wide)
COL_Y = 8  # columns_gemm: rows of threads splitting a block's share of K
K_PER_BLOCK = 256  # columns_gemm: about this much of K per block (32 k per thread)
MAX_SPLITS = 64  # columns_gemm: at most this many shares of K (workspace S x M x N)
OUTER_X = 128  # outer_gemm: columns of C per block
OUTER_ROWS = 16  # outer_gemm: rows of C per block
FINISH_THREADS = 256
GRID_Y_MAX = 65535  # CUDA's limit on gridDim.y


@cuda.jit
def rows_kernel(A, B, C, alpha, beta):
    """Warp y of block b computes row b * ROW_WARPS + y of C (N <= THIN columns)."""
    partial = cuda.shared.array((ROW_WARPS, THIN, 33), np.float32)  # 33: no bank conflicts
    acc = cuda.local.array(THIN, np.float32)
    M, N = C.shape
    K = A.shape[1]
    lane = cuda.threadIdx.x
    w = cuda.threadIdx.y
    m = cuda.blockIdx.x * ROW_WARPS + w
    # The loops run to the constant THIN with a guard, not to N: unrolled, every index
    # into acc is a constant and acc stays in registers.
    for j in range(THIN):
        acc[j] = 0.0
    if m < M:
        for k in range(lane, K, 32):
            a = A[m, k]
            for j in range(THIN):
                if j < N:
                    acc[j] += a * B[k, j]
    for j in range(THIN):
        partial[w, j, lane] = acc[j]
    cuda.syncthreads()
    if m < M and lane < N:  # lane j adds up column j: C's row is written in one go
        s = np.float32(0.0)
        for src in range(32):
            s += partial[w, lane, src]
        if beta == 0:
            C[m, lane] = alpha * s
        else:
            C[m, lane] = alpha * s + beta * C[m, lane]


@cuda.jit
def columns_kernel(A, B, C, work, alpha, beta, chunk):
    """Block (bx, by) sums k in [by * chunk, (by + 1) * chunk) for columns bx * COL_X ..
    of C (M <= THIN rows); with one share of K (gridDim.y == 1) it writes C, otherwise
    work[by]."""
    partial = cuda.shared.array((COL_Y, THIN, COL_X), np.float32)
    acc = cuda.local.array(THIN, np.float32)
    M, N = C.shape
    K = A.shape[1]
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    n = cuda.blockIdx.x * COL_X + tx
    k_start = cuda.blockIdx.y * chunk
    k_end = min(k_start + chunk, K)
    for i in range(THIN):
        acc[i] = 0.0
    if n < N:
        for k in range(k_start + ty, k_end, COL_Y):
            b = B[k, n]
            for i in range(THIN):
                if i < M:
                    acc[i] += A[i, k] * b
    for i in range(THIN):
        partial[ty, i, tx] = acc[i]
    cuda.syncthreads()
    if n < N:
        for i in range(ty, M, COL_Y):
            s = np.float32(0.0)
            for y in range(COL_Y):
                s += partial[y, i, tx]
            if cuda.gridDim.y > 1:
                work[cuda.blockIdx.y, i, n] = s
            elif beta == 0:
                C[i, n] = alpha * s
            else:
                C[i, n] = alpha * s + beta * C[i, n]


@cuda.jit
def finish_kernel(work, C, alpha, beta):
    """C <- alpha * (work[0] + work[1] + ...) + beta * C, one thread per element."""
    M, N = C.shape
    t = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if t < M * N:
        i = t // N
        n = t % N
        s = np.float32(0.0)
        for p in range(work.shape[0]):
            s += work[p, i, n]
        if beta == 0:
            C[i, n] = alpha * s
        else:
            C[i, n] = alpha * s + beta * C[i, n]


@cuda.jit
def outer_kernel(A, B, C, alpha, beta):
    """Thread x of block (bx, by) computes column bx * OUTER_X + x of rows
    by * OUTER_ROWS .. of C (K <= THIN)."""
    b = cuda.local.array(THIN, np.float32)
    M, N = C.shape
    K = A.shape[1]
    n = cuda.blockIdx.x * OUTER_X + cuda.threadIdx.x
    m_start = cuda.blockIdx.y * OUTER_ROWS
    m_end = min(m_start + OUTER_ROWS, M)
    if n < N:
        for k in range(THIN):
            if k < K:
                b[k] = B[k, n]
        for m in range(m_start, m_end):
            s = np.float32(0.0)
            for k in range(THIN):
                if k < K:
                    s += A[m, k] * b[k]
            if beta == 0:
                C[m, n] = alpha * s
            else:
                C[m, n] = alpha * s + beta * C[m, n]


def _shape(A, C) -> tuple[int, int, int]:
    M, N = C.shape
    return M, N, A.shape[1]


def rows_gemm(A, B, C, alpha: float, beta: float) -> None:
    """The contract for N <= THIN (any M, K)."""
    M, N, _ = _shape(A, C)
    if N > THIN:
        raise ValueError(f"rows_gemm computes at most {THIN} columns, C has {N}")
    if M == 0 or N == 0:
        return
    grid = -(-M // ROW_WARPS)
    rows_kernel[grid, (32, ROW_WARPS)](A, B, C, np.float32(alpha), np.float32(beta))


def splits(K: int) -> int:
    """How many shares of K columns_gemm makes: about K_PER_BLOCK each, at most MAX_SPLITS."""
    return max(1, min(MAX_SPLITS, -(-K // K_PER_BLOCK)))


def columns_gemm(A, B, C, alpha: float, beta: float) -> None:
    """The contract for M <= THIN (any N, K)."""
    M, N, K = _shape(A, C)
    if M > THIN:
        raise ValueError(f"columns_gemm computes at most {THIN} rows, C has {M}")
    if M == 0 or N == 0:
        return
    shares = splits(K)
    chunk = max(1, -(-K // shares))
    shares = max(1, -(-K // chunk))  # no empty share at the end
    work = empty((shares, M, N)) if shares > 1 else empty((1, 1, 1))
    alpha32, beta32 = np.float32(alpha), np.float32(beta)
    columns_kernel[(-(-N // COL_X), shares), (COL_X, COL_Y)](A, B, C, work, alpha32, beta32,
                                                             chunk)
    if shares > 1:
        finish_kernel[-(-(M * N) // FINISH_THREADS), FINISH_THREADS](work, C, alpha32, beta32)


def outer_gemm(A, B, C, alpha: float, beta: float) -> None:
    """The contract for K <= THIN (any M, N)."""
    M, N, K = _shape(A, C)
    if K > THIN:
        raise ValueError(f"outer_gemm sums at most {THIN} products, K is {K}")
    if M == 0 or N == 0:
        return
    grid = (-(-N // OUTER_X), -(-M // OUTER_ROWS))
    if grid[1] > GRID_Y_MAX:
        raise ValueError(f"M = {M}: more than {GRID_Y_MAX} blocks of {OUTER_ROWS} rows")
    outer_kernel[grid, OUTER_X](A, B, C, np.float32(alpha), np.float32(beta))
