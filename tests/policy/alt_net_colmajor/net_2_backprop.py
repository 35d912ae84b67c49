"""Forward, backward and SGD with column-major (Fortran-order) activations and gradients:
every n x m intermediate is allocated with order="F", so that a column (one unit over the
batch) is contiguous; the elementwise kernels map threadIdx.x to rows to match."""

from __future__ import annotations

import numpy as np

from nnkit.backend import copy, cuda

from .net_1_kernels import (
    add_bias,
    bias_sigmoid,
    column_sums,
    sgd_update,
    sigmoid_backward,
    softmax_cross_entropy,
)


def colmajor(rows: int, cols: int):
    """An uninitialised float32 device array stored by columns."""
    return cuda.device_array((rows, cols), dtype=np.float32, order="F")


def forward(weights, biases, X, gemm) -> list:
    acts = [X]
    for layer, (W, b) in enumerate(zip(weights, biases, strict=True)):
        Z = colmajor(X.shape[0], W.shape[0])
        gemm(acts[-1], W, Z, 1.0, 0.0, trans_b=True)
        if layer < len(weights) - 1:
            bias_sigmoid(Z, b)
        else:
            add_bias(Z, b)
        acts.append(Z)
    return acts


def backward(weights, biases, acts, labels, lam: float, gemm) -> tuple:
    n = acts[0].shape[0]
    logits = acts[-1]
    P = colmajor(*logits.shape)
    dZ = colmajor(*logits.shape)
    losses = cuda.device_array(n, dtype=np.float32)
    softmax_cross_entropy(logits, labels, P, dZ, losses)
    grads_W = []
    grads_b = []
    for layer in range(len(weights) - 1, -1, -1):
        dW = copy(weights[layer])
        gemm(dZ, acts[layer], dW, 1.0, lam, trans_a=True)
        db = cuda.device_array(biases[layer].shape[0], dtype=np.float32)
        column_sums(dZ, db)
        grads_W.append(dW)
        grads_b.append(db)
        if layer > 0:
            dA = colmajor(*acts[layer].shape)
            gemm(dZ, weights[layer], dA, 1.0, 0.0)
            sigmoid_backward(dA, acts[layer])
            dZ = dA
    grads_W.reverse()
    grads_b.reverse()
    return grads_W, grads_b, losses


def sgd_step(weights, biases, grads_W, grads_b, lr: float) -> None:
    for P, G in zip(weights + biases, grads_W + grads_b, strict=True):
        sgd_update(P, G, lr)
