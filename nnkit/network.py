"""The CPU reference network: the oracle every GPU implementation is compared with.

A fully connected net with any list of hidden sizes. Conventions (the handout's, with
samples as rows because NumPy is row-major):

    A_0 = X                                  (n, d)
    Z_l = A_{l-1} W_l^T + b_l                W_l is (out, in), b_l is (out,)
    A_l = sigmoid(Z_l)                       hidden layers
    output: softmax(Z_L) with cross-entropy (loss "ce"), or sigmoid(Z_L) with squared error
    (loss "mse", the variant of the USC paper)

    J = mean_i loss_i + 0.5 * lam * sum_l ||W_l||^2        (biases are not penalised)
    ce:  loss_i = -log softmax(z_i)[y_i]
    mse: loss_i = 0.5 * ||sigmoid(z_i) - onehot(y_i)||^2

Backpropagation, with dZ_L = (P - Y) / n for ce and (P - Y) * P * (1 - P) / n for mse:

    dW_l = dZ_l^T A_{l-1} + lam * W_l,   db_l = sum_i dZ_l[i],
    dZ_{l-1} = (dZ_l W_l) * A_{l-1} * (1 - A_{l-1})

and SGD: W_l -= lr * dW_l, b_l -= lr * db_l. Everything runs in the dtype of the
parameters (float32 or float64).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LOSSES = ("ce", "mse")


@dataclass
class Params:
    weights: list[np.ndarray]  # W_l, (out, in)
    biases: list[np.ndarray]  # b_l, (out,)

    @property
    def sizes(self) -> list[int]:
        return [self.weights[0].shape[1]] + [W.shape[0] for W in self.weights]

    @property
    def dtype(self) -> np.dtype:
        return self.weights[0].dtype

    def copy(self, dtype: np.dtype | type | None = None) -> Params:
        dtype = dtype or self.dtype
        return Params([W.astype(dtype, copy=True) for W in self.weights],
                      [b.astype(dtype, copy=True) for b in self.biases])

    def named(self) -> dict[str, np.ndarray]:
        """{'W1': ..., 'b1': ..., 'W2': ...}: the names used in reports and saved files."""
        out = {}
        for layer, (W, b) in enumerate(zip(self.weights, self.biases, strict=True), start=1):
            out[f"W{layer}"], out[f"b{layer}"] = W, b
        return out

    @classmethod
    def from_named(cls, arrays: dict[str, np.ndarray]) -> Params:
        layers = len([k for k in arrays if k.startswith("W")])
        return cls([np.asarray(arrays[f"W{i}"]) for i in range(1, layers + 1)],
                   [np.asarray(arrays[f"b{i}"]) for i in range(1, layers + 1)])


def check_sizes(sizes: list[int]) -> None:
    if len(sizes) < 2 or any(int(s) != s or s < 1 for s in sizes):
        raise ValueError(f"layer sizes must be at least two positive integers, got {sizes}")


def glorot_uniform(sizes: list[int], seed: int, dtype: type = np.float32) -> Params:
    """Weights uniform in +-sqrt(6 / (fan_in + fan_out)), biases zero (the paper's choice)."""
    check_sizes(sizes)
    rng = np.random.default_rng(seed)
    weights, biases = [], []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        weights.append(rng.uniform(-limit, limit, size=(fan_out, fan_in)).astype(dtype))
        biases.append(np.zeros(fan_out, dtype=dtype))
    return Params(weights, biases)


def sigmoid(z: np.ndarray) -> np.ndarray:
    # exp(-z) overflows harmlessly to inf for very negative z, giving exactly 0.
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-z))


def log_softmax(z: np.ndarray) -> np.ndarray:
    """Row-wise log of softmax, stable for any finite logits (shifted by the row maximum)."""
    shifted = z - z.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def forward(params: Params, X: np.ndarray) -> list[np.ndarray]:
    """[A_0 = X, A_1, ..., A_{L-1}, Z_L]: the activations backward() needs, then the logits."""
    acts = [X]
    last = len(params.weights) - 1
    for layer, (W, b) in enumerate(zip(params.weights, params.biases, strict=True)):
        Z = acts[-1] @ W.T + b
        acts.append(Z if layer == last else sigmoid(Z))
    return acts


def one_hot(labels: np.ndarray, classes: int, dtype: np.dtype) -> np.ndarray:
    Y = np.zeros((len(labels), classes), dtype=dtype)
    Y[np.arange(len(labels)), labels] = 1
    return Y


def output_loss_and_delta(Z: np.ndarray, labels: np.ndarray,
                          loss: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-sample losses (n,) and dZ_L = dJ/dZ_L of the mean loss (n, classes)."""
    n, classes = Z.shape
    Y = one_hot(labels, classes, Z.dtype)
    if loss == "ce":
        logp = log_softmax(Z)
        return -logp[np.arange(n), labels], (np.exp(logp) - Y) / n
    if loss == "mse":
        P = sigmoid(Z)
        return 0.5 * ((P - Y) ** 2).sum(axis=1), (P - Y) * P * (1 - P) / n
    raise ValueError(f"loss must be one of {LOSSES}, not {loss!r}")


def l2_term(params: Params, lam: float) -> float:
    return 0.5 * lam * float(sum((W.astype(np.float64) ** 2).sum() for W in params.weights))


def loss_value(params: Params, X: np.ndarray, labels: np.ndarray, lam: float,
               loss: str = "ce") -> float:
    """J on one batch: the mean loss plus the L2 term."""
    per_sample, _ = output_loss_and_delta(forward(params, X)[-1], labels, loss)
    return float(per_sample.mean()) + l2_term(params, lam)


def backward(params: Params, acts: list[np.ndarray], labels: np.ndarray, lam: float,
             loss: str = "ce") -> tuple[Params, float]:
    """Gradients of J for every W and b, and J itself, from forward()'s activations."""
    per_sample, dZ = output_loss_and_delta(acts[-1], labels, loss)
    grads_W, grads_b = [], []
    for layer in range(len(params.weights) - 1, -1, -1):
        W, A_prev = params.weights[layer], acts[layer]
        grads_W.append(dZ.T @ A_prev + lam * W)
        grads_b.append(dZ.sum(axis=0))
        if layer > 0:
            dZ = (dZ @ W) * A_prev * (1 - A_prev)
    grads = Params(grads_W[::-1], grads_b[::-1])
    return grads, float(per_sample.mean()) + l2_term(params, lam)


def sgd_step(params: Params, grads: Params, lr: float) -> None:
    for P, G in zip(params.weights + params.biases, grads.weights + grads.biases, strict=True):
        P -= P.dtype.type(lr) * G


def train_step(params: Params, X: np.ndarray, labels: np.ndarray, lr: float, lam: float,
               loss: str = "ce") -> float:
    """One SGD step on a batch; returns the batch's J before the step."""
    grads, value = backward(params, forward(params, X), labels, lam, loss)
    sgd_step(params, grads, lr)
    return value


def predict(params: Params, X: np.ndarray, chunk: int = 8192) -> np.ndarray:
    """Predicted class of each row (argmax of the logits), in chunks to bound memory."""
    out = [forward(params, X[s:s + chunk])[-1].argmax(axis=1) for s in range(0, len(X), chunk)]
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def accuracy(params: Params, X: np.ndarray, labels: np.ndarray) -> float:
    """Share of rows classified right, in [0, 1]."""
    return float((predict(params, X) == labels).mean()) if len(labels) else 0.0
