"""Part 2 (column-major activations: elementwise kernels map threadIdx.x to rows),
kernels of the network: elementwise work, softmax with cross-entropy, reductions.

Conventions (as in nnkit/network.py, the CPU reference you are compared with): samples are
rows. Z is n x m (n samples of a layer with m units), b has m entries, labels has n
integer entries in [0, classes). All arrays are float32 device arrays except labels; every
function writes its results in place and returns nothing.
"""

import math

import numpy as np

from nnkit.backend import cuda

BLOCK_2D = (32, 4)  # x along the columns (coalesced), y along the rows
BLOCK_1D = 128


def _grid_2d(rows: int, cols: int) -> tuple[int, int]:
    # x along the rows: neighbouring threads touch neighbouring elements of a column,
    # which are neighbours in memory for the column-major (Fortran-order) activations.
    return ((rows + BLOCK_2D[0] - 1) // BLOCK_2D[0], (cols + BLOCK_2D[1] - 1) // BLOCK_2D[1])


@cuda.jit
def bias_sigmoid_kernel(Z, b):
    i, j = cuda.grid(2)
    if i < Z.shape[0] and j < Z.shape[1]:
        z = Z[i, j] + b[j]
        # For very negative z, exp(-z) overflows to inf and the result is exactly 0.
        Z[i, j] = np.float32(1.0) / (np.float32(1.0) + math.exp(-z))


def bias_sigmoid(Z, b) -> None:
    """Z[i, j] <- sigmoid(Z[i, j] + b[j]): a hidden layer's activation, in place."""
    bias_sigmoid_kernel[_grid_2d(*Z.shape), BLOCK_2D](Z, b)


@cuda.jit
def add_bias_kernel(Z, b):
    i, j = cuda.grid(2)
    if i < Z.shape[0] and j < Z.shape[1]:
        Z[i, j] += b[j]


def add_bias(Z, b) -> None:
    """Z[i, j] <- Z[i, j] + b[j]: the output layer's logits, in place."""
    add_bias_kernel[_grid_2d(*Z.shape), BLOCK_2D](Z, b)


@cuda.jit
def sigmoid_backward_kernel(dA, A):
    i, j = cuda.grid(2)
    if i < dA.shape[0] and j < dA.shape[1]:
        a = A[i, j]
        dA[i, j] *= a * (np.float32(1.0) - a)


def sigmoid_backward(dA, A) -> None:
    """dA <- dA * A * (1 - A): from dJ/dA to dJ/dZ through A = sigmoid(Z), in place.

    A is the layer's output (the sigmoid already applied), not its input Z."""
    sigmoid_backward_kernel[_grid_2d(*dA.shape), BLOCK_2D](dA, A)


@cuda.jit
def softmax_cross_entropy_kernel(Z, labels, P, dZ, losses, inv_n):
    i = cuda.grid(1)
    if i < Z.shape[0]:
        classes = Z.shape[1]
        # Shift by the row maximum: exp never overflows, and the largest term is exp(0) = 1.
        top = Z[i, 0]
        for j in range(1, classes):
            top = max(top, Z[i, j])
        total = np.float32(0.0)
        for j in range(classes):
            total += math.exp(Z[i, j] - top)
        log_norm = top + math.log(total)  # log sum_j exp(Z[i, j])
        y = labels[i]
        # -log p_y = log_norm - Z[i, y]: exact even when p_y underflows to 0.
        losses[i] = log_norm - Z[i, y]
        for j in range(classes):
            p = math.exp(Z[i, j] - log_norm)
            P[i, j] = p
            if j == y:
                p -= np.float32(1.0)
            dZ[i, j] = p * inv_n


def softmax_cross_entropy(Z, labels, P, dZ, losses) -> None:
    """Row by row: P = softmax(Z), the cross-entropy losses[i] = -log P[i, labels[i]], and
    dZ = (P - onehot(labels)) / n, the gradient of the *mean* loss over the n rows.

    Must be exact for any finite logits, e.g. rows like [100, -100, 0, ...]: compute the
    loss in its stable form, losses[i] = m + log(sum_j exp(Z[i, j] - m)) - Z[i, labels[i]]
    with m = max_j Z[i, j] (log-sum-exp), never as -log of P, which underflows to 0 (and
    the loss to inf) for a row like [95, -95] labelled 1."""
    n = Z.shape[0]
    grid = (n + BLOCK_1D - 1) // BLOCK_1D
    softmax_cross_entropy_kernel[grid, BLOCK_1D](Z, labels, P, dZ, losses, np.float32(1.0 / n))


SUM_COLS = 32  # columns per block of column_sums
SUM_ROWS = 8  # threads per column, each summing every 8th row


@cuda.jit
def column_sums_kernel(X, out, scale):
    partial = cuda.shared.array((SUM_ROWS, SUM_COLS), np.float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    j = cuda.blockIdx.x * SUM_COLS + tx
    acc = np.float32(0.0)
    if j < X.shape[1]:
        for i in range(ty, X.shape[0], SUM_ROWS):  # neighbouring tx read neighbouring columns
            acc += X[i, j]
    partial[ty, tx] = acc
    cuda.syncthreads()
    # Tree reduction over the SUM_ROWS partial sums of each column.
    step = SUM_ROWS // 2
    while step > 0:
        if ty < step:
            partial[ty, tx] += partial[ty + step, tx]
        cuda.syncthreads()
        step //= 2
    if ty == 0 and j < X.shape[1]:
        out[j] = scale * partial[0, tx]


def column_sums(X, out, scale: float = 1.0) -> None:
    """out[j] <- scale * sum_i X[i, j] (the bias gradient is the column sums of dZ)."""
    grid = (X.shape[1] + SUM_COLS - 1) // SUM_COLS
    column_sums_kernel[grid, (SUM_COLS, SUM_ROWS)](X, out, np.float32(scale))


@cuda.jit
def sgd_update_kernel(P, G, lr):
    k = cuda.grid(1)
    if k < P.shape[0]:
        P[k] -= lr * G[k]


def sgd_update(P, G, lr: float) -> None:
    """P <- P - lr * G, for parameter arrays of any shape (contiguous)."""
    flat_p, flat_g = P.reshape(-1), G.reshape(-1)
    grid = (flat_p.shape[0] + BLOCK_1D - 1) // BLOCK_1D
    sgd_update_kernel[grid, BLOCK_1D](flat_p, flat_g, np.float32(lr))
