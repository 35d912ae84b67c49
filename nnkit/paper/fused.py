"""BLAS products with the element-wise work fused and threaded ("blas-fused").

On 16 cores the plain reference on BLAS (nnkit.paper.blas) is held back by what BLAS
does not do: the bias and sigmoid after each forward product, the sigmoid's derivative
after each backward product, the L2 term and the SGD update are NumPy passes, one thread
each, and every one of them allocates a fresh array. BLAS gets 12x faster on 16 cores;
those passes do not, so by Amdahl the step stays near 3x.

Here each such pass is one numba loop over rows, split over the threads (prange) and
done in place, and every product writes into a buffer kept from the step before. The
matrix products are the same BLAS calls. With one BLAS thread and one numba thread this
is the serial twin ("blas-fused-1"): the speedup between the two is the machine's, not a
change of algorithm.
"""

from __future__ import annotations

import math

import numpy as np

from nnkit import network
from nnkit.paper.arraynet import ArrayRunner, numpy_ops, output_delta
from nnkit.paper.jit import njit, prange
from nnkit.paper.loops import FASTMATH
from nnkit.training import TrainConfig

ONE = np.float32(1.0)


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def bias_sigmoid(Z: np.ndarray, b: np.ndarray) -> None:
    """Z = sigmoid(Z + b), in place, row by row over the threads."""
    n, m = Z.shape
    for i in prange(n):
        for j in range(m):
            Z[i, j] = ONE / (ONE + math.exp(-(Z[i, j] + b[j])))


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def add_bias(Z: np.ndarray, b: np.ndarray) -> None:
    n, m = Z.shape
    for i in prange(n):
        for j in range(m):
            Z[i, j] += b[j]


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def through_sigmoid(D: np.ndarray, A: np.ndarray) -> None:
    """D *= A (1 - A): the delta of a sigmoid layer from its output A, in place."""
    n, m = D.shape
    for i in prange(n):
        for j in range(m):
            a = A[i, j]
            D[i, j] *= a * (ONE - a)


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def add_l2(G: np.ndarray, W: np.ndarray, lam: np.float32) -> None:
    """G += lam W: the L2 term's gradient, in place."""
    n, m = G.shape
    for i in prange(n):
        for j in range(m):
            G[i, j] += lam * W[i, j]


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def sgd_update(W: np.ndarray, G: np.ndarray, lr: np.float32) -> None:
    """W -= lr G, in place."""
    n, m = W.shape
    for i in prange(n):
        for j in range(m):
            W[i, j] -= lr * G[i, j]


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def column_sums(D: np.ndarray, out: np.ndarray, chunk: int) -> None:
    """out = D.sum(axis=0), threads over chunks of columns (rows read in order)."""
    n, m = D.shape
    for c in prange((m + chunk - 1) // chunk):
        lo, hi = c * chunk, min(m, (c + 1) * chunk)
        for j in range(lo, hi):
            out[j] = 0.0
        for i in range(n):
            for j in range(lo, hi):
                out[j] += D[i, j]


class FusedRunner(ArrayRunner):
    """The reference's formulas (nnkit.paper.arraynet) with fused, threaded passes."""

    def __init__(self, params: network.Params, config: TrainConfig):
        super().__init__(numpy_ops(np), params, config)
        self._buffers: dict[tuple, np.ndarray] = {}

    def _buffer(self, key: tuple, shape: tuple[int, ...]) -> np.ndarray:
        """A float32 array kept for the next step of the same batch size."""
        found = self._buffers.get((key, shape))
        if found is None:
            found = self._buffers[(key, shape)] = np.empty(shape, dtype=np.float32)
        return found

    def _forward(self, X: np.ndarray) -> list[np.ndarray]:
        acts = [np.ascontiguousarray(X, dtype=np.float32)]
        last = len(self.weights) - 1
        for layer, (W, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            Z = self._buffer(("z", layer), (acts[-1].shape[0], W.shape[0]))
            np.matmul(acts[-1], W.T, out=Z)
            (add_bias if layer == last else bias_sigmoid)(Z, b)
            acts.append(Z)
        return acts

    def _backward(self, acts: list[np.ndarray], labels: np.ndarray):
        """(weight gradients with the L2 term, bias gradients, per-sample losses)."""
        losses, dZ = output_delta(np, acts[-1], labels, self.config.loss)
        dZ = np.ascontiguousarray(dZ, dtype=np.float32)
        lam = np.float32(self.config.lam)
        grads_W, grads_b = [], []
        for layer in reversed(range(len(self.weights))):
            W, below = self.weights[layer], acts[layer]
            dW = self._buffer(("dw", layer), W.shape)
            np.matmul(dZ.T, below, out=dW)
            add_l2(dW, W, lam)
            db = self._buffer(("db", layer), (W.shape[0],))
            column_sums(dZ, db, 64)
            grads_W.append(dW)
            grads_b.append(db)
            if layer > 0:  # the delta below, before W changes
                down = self._buffer(("dz", layer - 1), below.shape)
                np.matmul(dZ, W, out=down)
                through_sigmoid(down, below)
                dZ = down
        return grads_W[::-1], grads_b[::-1], losses

    def gradient(self, X: np.ndarray, labels: np.ndarray) -> tuple[network.Params, float]:
        gW, gb, losses = self._backward(self._forward(X), labels)
        return network.Params([g.copy() for g in gW], [g.copy() for g in gb]), \
            float(losses.mean())

    def step(self, X: np.ndarray, labels: np.ndarray) -> None:
        gW, gb, losses = self._backward(self._forward(X), labels)
        lr = np.float32(self.config.lr)
        for W, G in zip(self.weights, gW, strict=True):
            sgd_update(W, G, lr)
        for b, g in zip(self.biases, gb, strict=True):
            b -= lr * g  # a few hundred floats: not worth a thread
        self._losses.append(float(losses.sum()))


def runner(params: network.Params, config: TrainConfig) -> FusedRunner:
    return FusedRunner(params, config)
