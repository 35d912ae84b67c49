"""Alternative network kernels: 2-D grids with x along the rows, a softmax in two kernels
(per-row maximum and log-sum-exp into a scratch array, then one thread per element), column
sums by one block per column with a shared-memory tree, and an SGD update that keeps the
parameter's own shape (2-D or 1-D kernel)."""

import math

import numpy as np

from nnkit.backend import cuda, empty

BLOCK_2D = (16, 16)
BLOCK_1D = 64
SUM_THREADS = 128  # threads of the block that sums one column


def _grid_rows_first(rows, cols):
    return (math.ceil(rows / BLOCK_2D[0]), math.ceil(cols / BLOCK_2D[1]))


@cuda.jit
def bias_sigmoid_kernel(Z, b):
    i, j = cuda.grid(2)
    if i < Z.shape[0] and j < Z.shape[1]:
        Z[i, j] = 1 / (1 + math.exp(-(Z[i, j] + b[j])))


def bias_sigmoid(Z, b):
    bias_sigmoid_kernel[_grid_rows_first(*Z.shape), BLOCK_2D](Z, b)


@cuda.jit
def add_bias_kernel(Z, b):
    i, j = cuda.grid(2)
    if i < Z.shape[0] and j < Z.shape[1]:
        Z[i, j] = b[j] + Z[i, j]


def add_bias(Z, b):
    add_bias_kernel[_grid_rows_first(*Z.shape), BLOCK_2D](Z, b)


@cuda.jit
def sigmoid_backward_kernel(dA, A):
    i, j = cuda.grid(2)
    if i < dA.shape[0] and j < dA.shape[1]:
        dA[i, j] = A[i, j] * (1 - A[i, j]) * dA[i, j]


def sigmoid_backward(dA, A):
    sigmoid_backward_kernel[_grid_rows_first(*dA.shape), BLOCK_2D](dA, A)


@cuda.jit
def row_stats_kernel(Z, stats):
    """stats[i, 0] = max of row i, stats[i, 1] = its log-sum-exp."""
    i = cuda.grid(1)
    if i < Z.shape[0]:
        m = Z[i, 0]
        for j in range(1, Z.shape[1]):
            if Z[i, j] > m:
                m = Z[i, j]
        s = np.float32(0)
        for j in range(Z.shape[1]):
            s += math.exp(Z[i, j] - m)
        stats[i, 0] = m
        stats[i, 1] = m + math.log(s)


@cuda.jit
def softmax_elements_kernel(Z, labels, stats, P, dZ, losses, inv_n):
    i, j = cuda.grid(2)
    if i < Z.shape[0] and j < Z.shape[1]:
        lse = stats[i, 1]
        p = math.exp(Z[i, j] - lse)
        P[i, j] = p
        if j == labels[i]:
            dZ[i, j] = (p - 1) * inv_n
            losses[i] = lse - Z[i, j]
        else:
            dZ[i, j] = p * inv_n


def softmax_cross_entropy(Z, labels, P, dZ, losses):
    n = Z.shape[0]
    stats = empty((n, 2))
    row_stats_kernel[math.ceil(n / BLOCK_1D), BLOCK_1D](Z, stats)
    softmax_elements_kernel[_grid_rows_first(*Z.shape), BLOCK_2D](
        Z, labels, stats, P, dZ, losses, np.float32(1 / n))


@cuda.jit
def column_sums_kernel(X, out, scale):
    part = cuda.shared.array(SUM_THREADS, np.float32)
    j = cuda.blockIdx.x
    t = cuda.threadIdx.x
    acc = np.float32(0.0)
    for i in range(t, X.shape[0], SUM_THREADS):
        acc += X[i, j]
    part[t] = acc
    cuda.syncthreads()
    width = SUM_THREADS // 2
    while width >= 1:
        if t < width:
            part[t] = part[t] + part[t + width]
        cuda.syncthreads()
        width = width // 2
    if t == 0:
        out[j] = part[0] * scale


def column_sums(X, out, scale=1.0):
    column_sums_kernel[X.shape[1], SUM_THREADS](X, out, np.float32(scale))


@cuda.jit
def sgd_matrix_kernel(P, G, lr):
    i, j = cuda.grid(2)
    if i < P.shape[0] and j < P.shape[1]:
        P[i, j] -= lr * G[i, j]


@cuda.jit
def sgd_vector_kernel(P, G, lr):
    k = cuda.grid(1)
    if k < P.shape[0]:
        P[k] -= lr * G[k]


def sgd_update(P, G, lr):
    if P.ndim == 2:
        sgd_matrix_kernel[_grid_rows_first(*P.shape), BLOCK_2D](P, G, np.float32(lr))
    else:
        flat_p, flat_g = P.reshape(P.size), G.reshape(G.size)
        sgd_vector_kernel[math.ceil(P.size / BLOCK_1D), BLOCK_1D](flat_p, flat_g,
                                                                 np.float32(lr))
