"""The reference network's formulas over any array module and any matrix products.

nnkit/network.py is written for NumPy. The same formulas are written here against an
`Ops` bundle: the array module (NumPy or CuPy) and the three matrix products the network
needs. With NumPy's products this is the reference again; with numba loops it is the
"parallel matrix products" implementation (nnkit.paper.matpar); with CuPy it is the
network on cuBLAS (nnkit.paper.gpu).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnkit import network
from nnkit.training import TrainConfig

Product = Callable[[Any, Any], Any]


@dataclass(frozen=True)
class Ops:
    xp: Any  # numpy or cupy
    abt: Product  # A @ B.T   (forward: activations times weights)
    atb: Product  # A.T @ B   (weight gradients: deltas times activations)
    ab: Product  # A @ B     (deltas flowing down)


def numpy_ops(xp: Any = np) -> Ops:
    """The array module's own products (BLAS for NumPy, cuBLAS for CuPy)."""
    return Ops(xp, lambda a, b: a @ b.T, lambda a, b: a.T @ b, lambda a, b: a @ b)


def sigmoid(xp: Any, z: Any) -> Any:
    with np.errstate(over="ignore"):  # exp overflows to inf for very negative z: s = 0
        return 1.0 / (1.0 + xp.exp(-z))


def forward(ops: Ops, weights: list, biases: list, X: Any) -> list:
    """[A_0 = X, A_1, ..., A_{L-1}, Z_L], as network.forward."""
    acts = [X]
    last = len(weights) - 1
    for layer, (W, b) in enumerate(zip(weights, biases, strict=True)):
        Z = ops.abt(acts[-1], W) + b
        acts.append(Z if layer == last else sigmoid(ops.xp, Z))
    return acts


def output_delta(xp: Any, Z: Any, labels: Any, loss: str) -> tuple[Any, Any]:
    """Per-sample losses and dZ_L of the mean loss, as network.output_loss_and_delta."""
    n, classes = Z.shape
    Y = xp.zeros((n, classes), dtype=Z.dtype)
    rows = xp.arange(n)
    Y[rows, labels] = 1
    if loss == "ce":
        shifted = Z - Z.max(axis=1, keepdims=True)
        logp = shifted - xp.log(xp.exp(shifted).sum(axis=1, keepdims=True))
        return -logp[rows, labels], (xp.exp(logp) - Y) / n
    if loss == "mse":
        P = sigmoid(xp, Z)
        return 0.5 * ((P - Y) ** 2).sum(axis=1), (P - Y) * P * (1 - P) / n
    raise ValueError(f"loss must be one of {network.LOSSES}, not {loss!r}")


def weight_gradient(ops: Ops, dZ: Any, A_prev: Any, W: Any, lam: float) -> tuple[Any, Any]:
    """(dW, db) of one layer from its delta: the paper's equations 6 and 7."""
    return ops.atb(dZ, A_prev) + lam * W, dZ.sum(axis=0)


def delta_down(ops: Ops, dZ: Any, W: Any, A_prev: Any) -> Any:
    """The delta of the layer below: the paper's equation 5, through the sigmoid."""
    return ops.ab(dZ, W) * A_prev * (1 - A_prev)


def backward(ops: Ops, weights: list, acts: list, labels: Any, lam: float,
             loss: str) -> tuple[list, list, Any]:
    """(grads_W, grads_b, per-sample losses), as network.backward (without the L2 value)."""
    losses, dZ = output_delta(ops.xp, acts[-1], labels, loss)
    weight_grads, bias_grads = [], []
    for layer in reversed(range(len(weights))):  # output layer first; reversed at the end
        dW, db = weight_gradient(ops, dZ, acts[layer], weights[layer], lam)
        weight_grads.append(dW)
        bias_grads.append(db)
        if layer > 0:
            dZ = delta_down(ops, dZ, weights[layer], acts[layer])
    return weight_grads[::-1], bias_grads[::-1], losses


class ArrayRunner:
    """A Runner of nnkit.training over an Ops bundle (parameters in its array module)."""

    def __init__(self, ops: Ops, params: network.Params, config: TrainConfig):
        config.validate()
        self.ops, self.config = ops, config
        xp = ops.xp
        self.weights = [xp.asarray(W.astype(np.float32)) for W in params.weights]
        self.biases = [xp.asarray(b.astype(np.float32)) for b in params.biases]
        self._losses: list = []

    def gradient(self, X: Any, labels: Any) -> tuple[network.Params, float]:
        """Host copies of the batch's gradients and its mean loss (no L2 term)."""
        acts = forward(self.ops, self.weights, self.biases, X)
        gW, gb, losses = backward(self.ops, self.weights, acts, labels, self.config.lam,
                                  self.config.loss)
        return network.Params([_host(g) for g in gW], [_host(g) for g in gb]), \
            float(_host(losses).mean())

    def epoch_data(self, X: np.ndarray, labels: np.ndarray, order: np.ndarray) -> tuple:
        xp = self.ops.xp
        return xp.asarray(np.ascontiguousarray(X[order], dtype=np.float32)), \
            xp.asarray(labels[order].astype(np.int64))

    def step(self, X: Any, labels: Any) -> None:
        acts = forward(self.ops, self.weights, self.biases, X)
        gW, gb, losses = backward(self.ops, self.weights, acts, labels, self.config.lam,
                                  self.config.loss)
        lr = np.float32(self.config.lr)
        for P, G in zip(self.weights + self.biases, gW + gb, strict=True):
            P -= lr * G
        self._losses.append(losses.sum())  # fetched once an epoch: no per-step wait

    def finish_epoch(self) -> float:
        total = float(sum(float(_host(s)) for s in self._losses))
        self._losses = []
        return total

    def params(self) -> network.Params:
        return network.Params([_host(W) for W in self.weights], [_host(b) for b in self.biases])

    def predict(self, X: np.ndarray) -> np.ndarray:
        return network.predict(self.params(), X.astype(np.float32))


def _host(array: Any) -> np.ndarray:
    return array.get() if hasattr(array, "get") else np.asarray(array)
