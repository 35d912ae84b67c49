"""Alternative network kernels: device functions, a grid-stride loop, column sums with
atomics (a zeroing kernel first), launch shapes in a small dataclass."""

import math
from dataclasses import dataclass

import numpy as np

from nnkit.backend import cuda

BLOCK_2D = (32, 4)
BLOCK_1D = 128
ONE = np.float32(1.0)


@dataclass(frozen=True)
class Launch:
    rows: int
    cols: int

    @property
    def grid(self) -> tuple:
        return math.ceil(self.cols / BLOCK_2D[0]), math.ceil(self.rows / BLOCK_2D[1])


def _blocks_1d(n: int) -> int:
    return max(1, math.ceil(n / BLOCK_1D))


@cuda.jit(device=True, inline=True)
def sigmoid(z):
    return ONE / (ONE + math.exp(-z))


@cuda.jit
def bias_sigmoid_kernel(Z, b):
    j, i = cuda.grid(2)
    if i < Z.shape[0] and j < Z.shape[1]:
        Z[i, j] = sigmoid(Z[i, j] + b[j])


def bias_sigmoid(Z, b) -> None:
    bias_sigmoid_kernel[Launch(*Z.shape).grid, BLOCK_2D](Z, b)


@cuda.jit
def add_bias_kernel(Z, b):
    j, i = cuda.grid(2)
    if i < Z.shape[0] and j < Z.shape[1]:
        Z[i, j] = Z[i, j] + b[j]


def add_bias(Z, b) -> None:
    add_bias_kernel[Launch(*Z.shape).grid, BLOCK_2D](Z, b)


@cuda.jit
def sigmoid_backward_kernel(dA, A):
    j, i = cuda.grid(2)
    if i < dA.shape[0] and j < dA.shape[1]:
        dA[i, j] = dA[i, j] * A[i, j] * (ONE - A[i, j])


def sigmoid_backward(dA, A) -> None:
    sigmoid_backward_kernel[Launch(*dA.shape).grid, BLOCK_2D](dA, A)


@cuda.jit
def softmax_cross_entropy_kernel(Z, labels, P, dZ, losses, inv_n):
    i = cuda.grid(1)
    if i >= Z.shape[0]:
        return
    top = Z[i, 0]
    for j in range(Z.shape[1]):
        top = max(top, Z[i, j])
    total = np.float32(0.0)
    for j in range(Z.shape[1]):
        total += math.exp(Z[i, j] - top)
    log_norm = top + math.log(total)
    label = labels[i]
    losses[i] = log_norm - Z[i, label]
    for j in range(Z.shape[1]):
        p = math.exp(Z[i, j] - log_norm)
        P[i, j] = p
        dZ[i, j] = (p - ONE if j == label else p) * inv_n


def softmax_cross_entropy(Z, labels, P, dZ, losses) -> None:
    n = Z.shape[0]
    softmax_cross_entropy_kernel[_blocks_1d(n), BLOCK_1D](Z, labels, P, dZ, losses,
                                                          np.float32(1.0 / n))


@cuda.jit
def fill_kernel(out, value):
    k = cuda.grid(1)
    if k < out.shape[0]:
        out[k] = value


@cuda.jit
def column_sums_kernel(X, out, scale):
    j, i = cuda.grid(2)
    if i < X.shape[0] and j < X.shape[1]:
        cuda.atomic.add(out, j, scale * X[i, j])


def column_sums(X, out, scale: float = 1.0) -> None:
    fill_kernel[_blocks_1d(out.shape[0]), BLOCK_1D](out, np.float32(0.0))
    column_sums_kernel[Launch(*X.shape).grid, BLOCK_2D](X, out, np.float32(scale))


@cuda.jit
def sgd_update_kernel(P, G, lr):
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for k in range(start, P.shape[0], stride):
        P[k] -= lr * G[k]


def sgd_update(P, G, lr: float) -> None:
    flat_p, flat_g = P.reshape(-1), G.reshape(-1)
    blocks = min(_blocks_1d(flat_p.shape[0]), 64)
    sgd_update_kernel[blocks, BLOCK_1D](flat_p, flat_g, np.float32(lr))
