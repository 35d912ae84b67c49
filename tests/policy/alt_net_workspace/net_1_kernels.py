"""Alternative network kernels compiled eagerly from signature strings, the elementwise
ones sharing device functions, and column sums in two passes: per-block partial sums of
row stripes into a scratch array, then one thread per column adds the stripes."""

import math

import numpy as np

from nnkit.backend import cuda, empty

BLOCK_2D = (32, 4)
BLOCK_1D = 128
STRIPE = 64  # rows summed by one thread in the first pass of column_sums
F2, F1 = "float32[:, :]", "float32[:]"


def _grid(rows, cols):
    return (-(-cols // BLOCK_2D[0]), -(-rows // BLOCK_2D[1]))


@cuda.jit("float32(float32)", device=True)
def logistic(x):
    return np.float32(1.0) / (np.float32(1.0) + math.exp(-x))


@cuda.jit(f"void({F2}, {F1})")
def bias_sigmoid_kernel(Z, b):
    j, i = cuda.grid(2)
    if i < Z.shape[0] and j < Z.shape[1]:
        Z[i, j] = logistic(Z[i, j] + b[j])


def bias_sigmoid(Z, b):
    bias_sigmoid_kernel[_grid(*Z.shape), BLOCK_2D](Z, b)


@cuda.jit(f"void({F2}, {F1})")
def add_bias_kernel(Z, b):
    j, i = cuda.grid(2)
    if i < Z.shape[0] and j < Z.shape[1]:
        Z[i, j] += b[j]


def add_bias(Z, b):
    add_bias_kernel[_grid(*Z.shape), BLOCK_2D](Z, b)


@cuda.jit(f"void({F2}, {F2})")
def sigmoid_backward_kernel(dA, A):
    j, i = cuda.grid(2)
    if i < dA.shape[0] and j < dA.shape[1]:
        a = A[i, j]
        dA[i, j] = dA[i, j] * (a * (np.float32(1.0) - a))


def sigmoid_backward(dA, A):
    sigmoid_backward_kernel[_grid(*dA.shape), BLOCK_2D](dA, A)


@cuda.jit(f"void({F2}, int64[:], {F2}, {F2}, {F1}, float32)")
def softmax_kernel(Z, labels, P, dZ, losses, inv_n):
    i = cuda.grid(1)
    if i >= Z.shape[0]:
        return
    m = Z[i, 0]
    for j in range(Z.shape[1]):
        m = max(m, Z[i, j])
    total = np.float32(0.0)
    for j in range(Z.shape[1]):
        total += math.exp(Z[i, j] - m)
    lse = m + math.log(total)
    losses[i] = lse - Z[i, labels[i]]
    for j in range(Z.shape[1]):
        p = math.exp(Z[i, j] - lse)
        P[i, j] = p
        dZ[i, j] = (p - np.float32(j == labels[i])) * inv_n


def softmax_cross_entropy(Z, labels, P, dZ, losses):
    n = Z.shape[0]
    softmax_kernel[-(-n // BLOCK_1D), BLOCK_1D](Z, labels, P, dZ, losses, np.float32(1.0 / n))


@cuda.jit(f"void({F2}, {F2})")
def stripe_sums_kernel(X, partial):
    j, s = cuda.grid(2)  # column, stripe
    if j < X.shape[1] and s < partial.shape[0]:
        acc = np.float32(0.0)
        for i in range(s * STRIPE, min((s + 1) * STRIPE, X.shape[0])):
            acc += X[i, j]
        partial[s, j] = acc


@cuda.jit(f"void({F2}, {F1}, float32)")
def add_stripes_kernel(partial, out, scale):
    j = cuda.grid(1)
    if j < out.shape[0]:
        acc = np.float32(0.0)
        for s in range(partial.shape[0]):
            acc += partial[s, j]
        out[j] = scale * acc


def column_sums(X, out, scale=1.0):
    n, m = X.shape
    stripes = -(-n // STRIPE)
    partial = empty((stripes, m))
    stripe_sums_kernel[_grid(stripes, m), BLOCK_2D](X, partial)
    add_stripes_kernel[-(-m // BLOCK_1D), BLOCK_1D](partial, out, np.float32(scale))


@cuda.jit(f"void({F1}, {F1}, float32)")
def sgd_kernel(P, G, lr):
    k = cuda.grid(1)
    if k < P.shape[0]:
        P[k] -= lr * G[k]


def sgd_update(P, G, lr):
    size = P.size
    sgd_kernel[-(-size // BLOCK_1D), BLOCK_1D](P.reshape(size), G.reshape(size), np.float32(lr))
