"""Alternative network: the kernels through a module alias, nnkit.backend as a module,
list slicing over layers and a reversed loop."""

# ruff: noqa: UP006, UP035, UP045, B905 (written as students do: typing's old names, zip)

from typing import List, Sequence

from nnkit import backend

from . import net_1_kernels as kernels


def forward(weights: Sequence, biases: Sequence, X, gemm) -> List:
    acts = [X]
    for W, b in zip(weights[:-1], biases[:-1]):
        Z = backend.empty((X.shape[0], W.shape[0]))
        gemm(acts[-1], W, Z, 1.0, 0.0, trans_b=True)
        kernels.bias_sigmoid(Z, b)
        acts.append(Z)
    logits = backend.empty((X.shape[0], weights[-1].shape[0]))
    gemm(acts[-1], weights[-1], logits, 1.0, 0.0, trans_b=True)
    kernels.add_bias(logits, biases[-1])
    acts.append(logits)
    return acts


def backward(weights, biases, acts, labels, lam: float, gemm) -> tuple:
    n = acts[0].shape[0]
    probs = backend.empty(acts[-1].shape)
    dZ = backend.empty(acts[-1].shape)
    losses = backend.empty((n,))
    kernels.softmax_cross_entropy(acts[-1], labels, probs, dZ, losses)
    layers = len(weights)
    grads_W: list = [None] * layers
    grads_b: list = [None] * layers
    for layer in reversed(range(layers)):
        dW = backend.copy(weights[layer])
        gemm(dZ, acts[layer], dW, 1.0, lam, trans_a=True)
        db = backend.empty(biases[layer].shape)
        kernels.column_sums(dZ, db)
        grads_W[layer], grads_b[layer] = dW, db
        if layer:
            dA = backend.empty(acts[layer].shape)
            gemm(dZ, weights[layer], dA, 1.0, 0.0)
            kernels.sigmoid_backward(dA, acts[layer])
            dZ = dA
    return grads_W, grads_b, losses


def sgd_step(weights, biases, grads_W, grads_b, lr: float) -> None:
    for params, grads in ((weights, grads_W), (biases, grads_b)):
        for P, G in zip(params, grads):
            kernels.sgd_update(P, G, lr)
