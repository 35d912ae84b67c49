"""Alternative network: the layers as small objects (a NamedTuple of each layer's arrays),
the bias gradient as a GEMM with a vector of ones, and the L2 term added by a kernel of
its own after the weight-gradient GEMM."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from nnkit.backend import cuda, empty

from .net_1_kernels import (
    BLOCK_1D,
    add_bias,
    bias_sigmoid,
    sgd_update,
    sigmoid_backward,
    softmax_cross_entropy,
)


class Layer(NamedTuple):
    W: object
    b: object

    @property
    def units(self) -> int:
        return self.W.shape[0]


@cuda.jit
def fill_kernel(X, value):
    k = cuda.grid(1)
    if k < X.shape[0]:
        X[k, 0] = value


@cuda.jit
def add_scaled_kernel(D, W, lam):
    """D <- D + lam * W, elementwise."""
    k = cuda.grid(1)
    if k < D.shape[0] * D.shape[1]:
        i = k // D.shape[1]
        j = k % D.shape[1]
        D[i, j] = D[i, j] + lam * W[i, j]


def _ones(n: int):
    ones = empty((n, 1))
    fill_kernel[(n + BLOCK_1D - 1) // BLOCK_1D, BLOCK_1D](ones, np.float32(1.0))
    return ones


class Network:
    def __init__(self, weights, biases, gemm):
        self.layers = [Layer(W, b) for W, b in zip(weights, biases, strict=True)]
        self.gemm = gemm

    def forward(self, X) -> list:
        outputs = [X]
        for depth, layer in enumerate(self.layers):
            Z = empty((X.shape[0], layer.units))
            self.gemm(outputs[-1], layer.W, Z, alpha=1.0, beta=0.0, trans_b=True)
            if depth + 1 < len(self.layers):
                bias_sigmoid(Z, layer.b)
            else:
                add_bias(Z, layer.b)
            outputs.append(Z)
        return outputs

    def backward(self, acts, labels, lam: float) -> tuple:
        n = acts[0].shape[0]
        logits = acts[-1]
        P, dZ, losses = empty(logits.shape), empty(logits.shape), empty((n,))
        softmax_cross_entropy(logits, labels, P, dZ, losses)
        ones = _ones(n)
        grads_W, grads_b = [], []
        for depth in reversed(range(len(self.layers))):
            layer, below = self.layers[depth], acts[depth]
            dW = empty(layer.W.shape)
            self.gemm(dZ, below, dW, trans_a=True)
            count = dW.shape[0] * dW.shape[1]
            add_scaled_kernel[(count + BLOCK_1D - 1) // BLOCK_1D, BLOCK_1D](
                dW, layer.W, np.float32(lam))
            db_row = empty((1, layer.units))
            self.gemm(ones, dZ, db_row, trans_a=True)  # 1 x n times n x out: column sums
            grads_W.insert(0, dW)
            grads_b.insert(0, db_row.reshape(layer.units))
            if depth:
                dA = empty(below.shape)
                self.gemm(dZ, layer.W, dA)
                sigmoid_backward(dA, below)
                dZ = dA
        return grads_W, grads_b, losses


def forward(weights, biases, X, gemm):
    return Network(weights, biases, gemm).forward(X)


def backward(weights, biases, acts, labels, lam, gemm):
    return Network(weights, biases, gemm).backward(acts, labels, lam)


def sgd_step(weights, biases, grads_W, grads_b, lr):
    for params, grads in ((weights, grads_W), (biases, grads_b)):
        for p, g in zip(params, grads, strict=True):
            sgd_update(p, g, lr)
