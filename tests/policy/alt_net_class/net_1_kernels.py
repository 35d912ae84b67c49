"""Alternative network kernels: 1-D grids with divmod indexing, a sigmoid that branches on
the sign (never exp of a positive number), a softmax with one block per row and
shared-memory reductions for the maximum and the sum, column sums by one thread per
column, and an SGD update over a flat view with a grid-stride loop."""

import math

import numpy as np

from nnkit.backend import cuda

BLOCK_2D = (32, 4)  # kept from the starter; this file uses 1-D launches
BLOCK_1D = 256
ROW_THREADS = 32  # threads working on one row of logits in the softmax
SUM_COLS = 32
SUM_ROWS = 8


def _blocks(count: int, per_block: int = BLOCK_1D) -> int:
    return max(1, (count + per_block - 1) // per_block)


@cuda.jit
def bias_sigmoid_kernel(Z, b):
    t = cuda.grid(1)
    if t < Z.shape[0] * Z.shape[1]:
        i, j = divmod(t, Z.shape[1])
        x = Z[i, j] + b[j]
        if x >= 0:
            Z[i, j] = np.float32(1.0) / (np.float32(1.0) + math.exp(-x))
        else:
            e = math.exp(x)
            Z[i, j] = e / (np.float32(1.0) + e)


def bias_sigmoid(Z, b):
    bias_sigmoid_kernel[_blocks(Z.shape[0] * Z.shape[1]), BLOCK_1D](Z, b)


@cuda.jit
def add_bias_kernel(Z, b):
    t = cuda.grid(1)
    stride = cuda.gridsize(1)
    total = Z.shape[0] * Z.shape[1]
    while t < total:
        i = t // Z.shape[1]
        j = t - i * Z.shape[1]
        Z[i, j] = Z[i, j] + b[j]
        t += stride


def add_bias(Z, b):
    add_bias_kernel[min(_blocks(Z.size), 64), BLOCK_1D](Z, b)


@cuda.jit
def sigmoid_backward_kernel(dA, A):
    t = cuda.grid(1)
    if t < dA.shape[0] * dA.shape[1]:
        i, j = divmod(t, dA.shape[1])
        a = A[i, j]
        dA[i, j] = dA[i, j] * (a - a * a)


def sigmoid_backward(dA, A):
    sigmoid_backward_kernel[_blocks(dA.size), BLOCK_1D](dA, A)


@cuda.jit
def softmax_rows_kernel(Z, labels, P, dZ, losses, n):
    """Block i handles row i; its threads stride over the classes."""
    red = cuda.shared.array(ROW_THREADS, np.float32)
    i = cuda.blockIdx.x
    t = cuda.threadIdx.x
    C = Z.shape[1]
    # Row maximum.
    m = -np.float32(math.inf)
    for j in range(t, C, ROW_THREADS):
        m = max(m, Z[i, j])
    red[t] = m
    cuda.syncthreads()
    half = ROW_THREADS // 2
    while half > 0:
        if t < half:
            red[t] = max(red[t], red[t + half])
        cuda.syncthreads()
        half //= 2
    m = red[0]
    cuda.syncthreads()  # everyone has read the maximum before red is reused
    # Sum of the shifted exponentials.
    s = np.float32(0.0)
    for j in range(t, C, ROW_THREADS):
        s += math.exp(Z[i, j] - m)
    red[t] = s
    cuda.syncthreads()
    half = ROW_THREADS // 2
    while half > 0:
        if t < half:
            red[t] += red[t + half]
        cuda.syncthreads()
        half //= 2
    total = red[0]
    y = labels[i]
    if t == 0:
        losses[i] = m + math.log(total) - Z[i, y]
    for j in range(t, C, ROW_THREADS):
        p = math.exp(Z[i, j] - m) / total
        P[i, j] = p
        target = np.float32(1.0) if j == y else np.float32(0.0)
        dZ[i, j] = (p - target) / n


def softmax_cross_entropy(Z, labels, P, dZ, losses):
    rows = Z.shape[0]
    softmax_rows_kernel[rows, ROW_THREADS](Z, labels, P, dZ, losses, np.float32(rows))


@cuda.jit
def column_sums_kernel(X, out, scale):
    j = cuda.grid(1)
    if j < X.shape[1]:
        acc = np.float32(0.0)
        for i in range(X.shape[0]):
            acc += X[i, j]
        out[j] = acc * scale


def column_sums(X, out, scale=1.0):
    column_sums_kernel[_blocks(X.shape[1], 64), 64](X, out, np.float32(scale))


@cuda.jit
def sgd_update_kernel(P, G, lr):
    k = cuda.grid(1)
    while k < P.size:
        P[k] = P[k] - lr * G[k]
        k += cuda.gridsize(1)


def sgd_update(P, G, lr):
    n = P.size
    sgd_update_kernel[min(_blocks(n), 32), BLOCK_1D](P.reshape(n), G.reshape(n), np.float32(lr))
