"""Forward, backward and SGD with the weight gradient accumulated over chunks of the
batch: dW = sum over chunks of dZ[c]^T A[c] (+ lam W folded into the first chunk's GEMM)."""

from __future__ import annotations

from nnkit.backend import copy, empty

from .net_1_kernels import (
    add_bias,
    bias_sigmoid,
    column_sums,
    sgd_update,
    sigmoid_backward,
    softmax_cross_entropy,
)

CHUNK = 4  # rows of the batch per weight-gradient GEMM


def forward(weights, biases, X, gemm) -> list:
    acts = [X]
    for depth, (W, b) in enumerate(zip(weights, biases, strict=True)):
        A_prev = acts[-1]
        Z = empty((A_prev.shape[0], W.shape[0]))
        gemm(A_prev, W, Z, 1.0, 0.0, trans_b=True)
        if depth + 1 < len(weights):
            bias_sigmoid(Z, b)
        else:
            add_bias(Z, b)
        acts.append(Z)
    return acts


def weight_gradient(dZ, A_prev, W, lam: float, gemm):
    """dZ^T A_prev + lam W, the batch taken CHUNK rows at a time."""
    n = dZ.shape[0]
    dW = copy(W)
    beta = lam
    for r0 in range(0, n, CHUNK):
        r1 = min(n, r0 + CHUNK)
        gemm(dZ[r0:r1], A_prev[r0:r1], dW, 1.0, beta, trans_a=True)
        beta = 1.0
    return dW


def backward(weights, biases, acts, labels, lam: float, gemm) -> tuple:
    n = acts[0].shape[0]
    Z_out = acts[-1]
    P = empty(Z_out.shape)
    dZ = empty(Z_out.shape)
    losses = empty((n,))
    softmax_cross_entropy(Z_out, labels, P, dZ, losses)
    L = len(weights)
    grads_W = [None] * L
    grads_b = [None] * L
    for layer in reversed(range(L)):
        grads_W[layer] = weight_gradient(dZ, acts[layer], weights[layer], lam, gemm)
        db = empty((weights[layer].shape[0],))
        column_sums(dZ, db, 1.0)
        grads_b[layer] = db
        if layer:
            dA = empty(acts[layer].shape)
            gemm(dZ, weights[layer], dA, 1.0, 0.0)
            sigmoid_backward(dA, acts[layer])
            dZ = dA
    return grads_W, grads_b, losses


def sgd_step(weights, biases, grads_W, grads_b, lr: float) -> None:
    for params, grads in ((weights, grads_W), (biases, grads_b)):
        for P, G in zip(params, grads, strict=True):
            sgd_update(P, G, lr)
