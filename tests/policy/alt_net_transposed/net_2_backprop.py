"""Alternative network with transposed intermediates: each layer's product is computed as
Z^T = W A^T (units x samples) and a kernel of this module transposes it while adding the
bias (and applying the sigmoid); the back-propagated gradient is computed as
dA^T = W^T dZ^T and transposed by the kernel that applies the sigmoid's derivative."""

import math

from net_1_kernels import BLOCK_2D, column_sums, sgd_update, softmax_cross_entropy

from nnkit.backend import copy, cuda, empty


@cuda.jit
def transpose_bias_kernel(ZT, b, Z, hidden):
    i, j = cuda.grid(2)  # i: sample, j: unit
    if i < Z.shape[0] and j < Z.shape[1]:
        z = ZT[j, i] + b[j]
        if hidden:
            z = 1 / (1 + math.exp(-z))
        Z[i, j] = z


@cuda.jit
def transpose_sigmoid_grad_kernel(dAT, A, dZ):
    i, j = cuda.grid(2)
    if i < dZ.shape[0] and j < dZ.shape[1]:
        a = A[i, j]
        dZ[i, j] = dAT[j, i] * a * (1 - a)


def _grid(rows, cols):
    return (math.ceil(rows / BLOCK_2D[0]), math.ceil(cols / BLOCK_2D[1]))


def forward(weights, biases, X, gemm):
    acts = [X]
    for index, W in enumerate(weights):
        n, units = X.shape[0], W.shape[0]
        ZT = empty((units, n))
        gemm(W, acts[-1], ZT, trans_b=True)  # (units x in) (in x n)
        Z = empty((n, units))
        hidden = index < len(weights) - 1
        transpose_bias_kernel[_grid(n, units), BLOCK_2D](ZT, biases[index], Z, hidden)
        acts.append(Z)
    return acts


def backward(weights, biases, acts, labels, lam, gemm):
    logits = acts[-1]
    n = logits.shape[0]
    P, dZ, losses = empty(logits.shape), empty(logits.shape), empty(n)
    softmax_cross_entropy(logits, labels, P, dZ, losses)
    grads_W = [None for _ in weights]
    grads_b = [None for _ in biases]
    layer = len(weights)
    while layer > 0:
        layer -= 1
        W, below = weights[layer], acts[layer]
        dW = copy(W)
        gemm(dZ, below, dW, alpha=1.0, beta=lam, trans_a=True)
        db = empty(biases[layer].shape)
        column_sums(dZ, db, 1.0)
        grads_W[layer], grads_b[layer] = dW, db
        if layer == 0:
            break
        dAT = empty((W.shape[1], n))
        gemm(W, dZ, dAT, trans_a=True, trans_b=True)  # (in x units) (units x n)
        dZ_below = empty(below.shape)
        transpose_sigmoid_grad_kernel[_grid(*below.shape), BLOCK_2D](dAT, below, dZ_below)
        dZ = dZ_below
    return grads_W, grads_b, losses


def sgd_step(weights, biases, grads_W, grads_b, lr):
    for i in range(len(weights)):
        sgd_update(weights[i], grads_W[i], lr)
        sgd_update(biases[i], grads_b[i], lr)
