"""Part 2, kernels of the network: elementwise work, softmax with cross-entropy, reductions.

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
    return ((cols + BLOCK_2D[0] - 1) // BLOCK_2D[0], (rows + BLOCK_2D[1] - 1) // BLOCK_2D[1])


@cuda.jit
def bias_sigmoid_kernel(Z, b):
    """Check: `make check FUNCTION=bias_sigmoid` (a few lines)."""
    raise NotImplementedError("write bias_sigmoid_kernel()")


def bias_sigmoid(Z, b) -> None:
    """Z[i, j] <- sigmoid(Z[i, j] + b[j]): a hidden layer's activation, in place.

    Check: `make check FUNCTION=bias_sigmoid` (a few lines)."""
    raise NotImplementedError("write bias_sigmoid()")


@cuda.jit
def add_bias_kernel(Z, b):
    """Check: `make check FUNCTION=add_bias` (a few lines)."""
    raise NotImplementedError("write add_bias_kernel()")


def add_bias(Z, b) -> None:
    """Z[i, j] <- Z[i, j] + b[j]: the output layer's logits, in place.

    Check: `make check FUNCTION=add_bias` (a few lines)."""
    raise NotImplementedError("write add_bias()")


@cuda.jit
def sigmoid_backward_kernel(dA, A):
    """Check: `make check FUNCTION=sigmoid_backward` (a few lines)."""
    raise NotImplementedError("write sigmoid_backward_kernel()")


def sigmoid_backward(dA, A) -> None:
    """dA <- dA * A * (1 - A): from dJ/dA to dJ/dZ through A = sigmoid(Z), in place.

    A is the layer's output (the sigmoid already applied), not its input Z.

    Check: `make check FUNCTION=sigmoid_backward` (a few lines)."""
    raise NotImplementedError("write sigmoid_backward()")


@cuda.jit
def softmax_cross_entropy_kernel(Z, labels, P, dZ, losses, inv_n):
    """Check: `make check FUNCTION=softmax_cross_entropy` (about 20 lines)."""
    raise NotImplementedError("write softmax_cross_entropy_kernel()")


def softmax_cross_entropy(Z, labels, P, dZ, losses) -> None:
    """Row by row: P = softmax(Z), the cross-entropy losses[i] = -log P[i, labels[i]], and
    dZ = (P - onehot(labels)) / n, the gradient of the *mean* loss over the n rows.

    Must be exact for any finite logits, e.g. rows like [100, -100, 0, ...]: compute the
    loss in its stable form, losses[i] = m + log(sum_j exp(Z[i, j] - m)) - Z[i, labels[i]]
    with m = max_j Z[i, j] (log-sum-exp), never as -log of P, which underflows to 0 (and
    the loss to inf) for a row like [95, -95] labelled 1.

    Check: `make check FUNCTION=softmax_cross_entropy` (a few lines)."""
    raise NotImplementedError("write softmax_cross_entropy()")


SUM_COLS = 32  # columns per block of column_sums
SUM_ROWS = 8  # threads per column, each summing every 8th row


@cuda.jit
def column_sums_kernel(X, out, scale):
    """Check: `make check FUNCTION=column_sums` (about 20 lines)."""
    raise NotImplementedError("write column_sums_kernel()")


def column_sums(X, out, scale: float = 1.0) -> None:
    """out[j] <- scale * sum_i X[i, j] (the bias gradient is the column sums of dZ).

    Check: `make check FUNCTION=column_sums` (a few lines)."""
    raise NotImplementedError("write column_sums()")


@cuda.jit
def sgd_update_kernel(P, G, lr):
    """Check: `make check FUNCTION=sgd_update` (a few lines)."""
    raise NotImplementedError("write sgd_update_kernel()")


def sgd_update(P, G, lr: float) -> None:
    """P <- P - lr * G, for parameter arrays of any shape (contiguous).

    Check: `make check FUNCTION=sgd_update` (a few lines)."""
    raise NotImplementedError("write sgd_update()")
