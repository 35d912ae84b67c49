"""Part 2 network computed with array code on the host."""

# ruff: noqa (hostile code, written to be refused)

import numpy as np

from nnkit.backend import empty

from .net_1_kernels import add_bias, bias_sigmoid


def forward(weights, biases, X, gemm):
    acts = [X]
    for W, b in zip(weights, biases):
        Z = np.asarray(X)  # expect: host-copy
        z = Z.get()  # expect: host-copy
        e = np.exp(z)  # expect: array-library
        s = e / e.sum(axis=1)[:, None]  # expect: array-library
        top = np.maximum(s, 0)  # expect: array-library
        acts.append(top.tolist())  # expect: host-copy
        bias_sigmoid(empty(W.shape), b)
        add_bias(Z, b)
    return acts
