"""Network kernels written my way: elementwise kernels on 1-D grids that walk the matrix
column by column (column-major order of the elements), the softmax fused with the loss and
its gradient in one thread per row (P from exp(z - max) / sum), column sums whose partial
sums are added by one thread per column (no tree), and the SGD update over a raveled view.
"""

from __future__ import annotations

import math

import numpy as np

from nnkit.backend import cuda

BLOCK_2D = (32, 4)
BLOCK_1D = 128


def _grid_2d(rows: int, cols: int) -> tuple[int, int]:
    return ((cols + BLOCK_2D[0] - 1) // BLOCK_2D[0], (rows + BLOCK_2D[1] - 1) // BLOCK_2D[1])


def _blocks(count: int) -> int:
    return max(1, (count + BLOCK_1D - 1) // BLOCK_1D)


@cuda.jit(device=True)
def sigmoid(x):
    return np.float32(1.0) / (np.float32(1.0) + math.exp(-x))


@cuda.jit
def bias_sigmoid_kernel(Z, b):
    e = cuda.grid(1)
    n = Z.shape[0]
    if e < n * Z.shape[1]:
        i = e % n  # column-major walk: consecutive threads go down a column
        j = e // n
        Z[i, j] = sigmoid(Z[i, j] + b[j])


def bias_sigmoid(Z, b) -> None:
    """Z[i, j] <- sigmoid(Z[i, j] + b[j]): a hidden layer's activation, in place."""
    bias_sigmoid_kernel[_blocks(Z.shape[0] * Z.shape[1]), BLOCK_1D](Z, b)


@cuda.jit
def add_bias_kernel(Z, b):
    i, j = cuda.grid(2)  # x along the rows here
    if i < Z.shape[0] and j < Z.shape[1]:
        Z[i, j] = Z[i, j] + b[j]


def add_bias(Z, b) -> None:
    """Z[i, j] <- Z[i, j] + b[j]: the output layer's logits, in place."""
    rows, cols = Z.shape
    grid = ((rows + 15) // 16, (cols + 15) // 16)
    add_bias_kernel[grid, (16, 16)](Z, b)


@cuda.jit
def sigmoid_backward_kernel(dA, A):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    n = dA.shape[0]
    for e in range(start, n * dA.shape[1], stride):
        i = e % n
        j = e // n
        a = A[i, j]
        dA[i, j] = dA[i, j] * (a * (np.float32(1.0) - a))


def sigmoid_backward(dA, A) -> None:
    """dA <- dA * A * (1 - A), in place; A is the layer's output."""
    sigmoid_backward_kernel[min(4, _blocks(dA.shape[0] * dA.shape[1])), BLOCK_1D](dA, A)


@cuda.jit
def softmax_ce_kernel(Z, labels, P, dZ, losses, n):
    i = cuda.grid(1)
    if i >= Z.shape[0]:
        return
    C = Z.shape[1]
    m = Z[i, 0]
    for j in range(1, C):
        if Z[i, j] > m:
            m = Z[i, j]
    s = np.float32(0.0)
    for j in range(C):
        s += math.exp(Z[i, j] - m)
    y = labels[i]
    losses[i] = m + math.log(s) - Z[i, y]
    for j in range(C):
        p = math.exp(Z[i, j] - m) / s
        P[i, j] = p
        g = p - np.float32(1.0) if j == y else p
        dZ[i, j] = g / n


def softmax_cross_entropy(Z, labels, P, dZ, losses) -> None:
    """P = softmax(Z), losses = cross-entropy, dZ = (P - Y) / n, row by row."""
    n = Z.shape[0]
    softmax_ce_kernel[_blocks(n), BLOCK_1D](Z, labels, P, dZ, losses, np.float32(n))


SUM_COLS = 32
SUM_ROWS = 8


@cuda.jit
def column_sums_kernel(X, out, scale):
    part = cuda.shared.array((SUM_ROWS, SUM_COLS), np.float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    j = cuda.blockIdx.x * SUM_COLS + tx
    s = np.float32(0.0)
    if j < X.shape[1]:
        i = ty
        while i < X.shape[0]:
            s += X[i, j]
            i += SUM_ROWS
    part[ty, tx] = s
    cuda.syncthreads()
    if ty == 0 and j < X.shape[1]:
        total = np.float32(0.0)
        for r in range(SUM_ROWS):
            total += part[r, tx]
        out[j] = scale * total


def column_sums(X, out, scale: float = 1.0) -> None:
    """out[j] <- scale * sum_i X[i, j]."""
    blocks = (X.shape[1] + SUM_COLS - 1) // SUM_COLS
    column_sums_kernel[blocks, (SUM_COLS, SUM_ROWS)](X, out, np.float32(scale))


@cuda.jit
def sgd_kernel(P, G, lr):
    k = cuda.grid(1)
    if k < P.size:
        P[k] = P[k] - lr * G[k]


def sgd_update(P, G, lr: float) -> None:
    """P <- P - lr * G (contiguous arrays of any shape)."""
    p, g = P.ravel(), G.ravel()
    sgd_kernel[_blocks(p.size), BLOCK_1D](p, g, np.float32(lr))
