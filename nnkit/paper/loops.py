"""Backpropagation one example at a time, as explicit loops compiled by numba.

This is the paper's "naive" arithmetic (its own linear-algebra library, LINALGLIB): for
each example, matrix-vector products layer by layer, then the deltas back down, the
gradient of every weight added into an accumulator. The serial and the thread-parallel
implementations share these functions, so their difference is only how the examples of a
batch are spread over threads.

Arithmetic is float32, as in the reference. `fastmath` allows reassociating and fusing
sums (the compiler may then vectorise the dot products); the float32 error bounds of the
tests hold for any summation order, so this changes no guarantee. Infinities are kept:
the sigmoid of a very negative z relies on exp overflowing to inf.
"""

from __future__ import annotations

import math

import numpy as np

from nnkit.paper.jit import njit

CE, MSE = 0, 1
LOSS_CODES = {"ce": CE, "mse": MSE}
FASTMATH = {"reassoc", "contract"}
ONE = np.float32(1.0)
HALF = np.float32(0.5)


@njit(fastmath=FASTMATH, cache=True)
def _sigmoid(z: float) -> float:
    return ONE / (ONE + math.exp(-z))


@njit(fastmath=FASTMATH, cache=True)
def _output_delta(z: np.ndarray, label: int, loss: int, delta: np.ndarray) -> float:
    """delta <- dloss/dz for one example's logits z (no 1/n); returns the example's loss."""
    classes = z.shape[0]
    if loss == CE:
        top = z[0]
        for j in range(1, classes):
            top = max(top, z[j])
        total = np.float32(0.0)
        for j in range(classes):
            total += math.exp(z[j] - top)
        lse = top + math.log(total)
        for j in range(classes):
            delta[j] = math.exp(z[j] - lse) - (ONE if j == label else np.float32(0.0))
        return lse - z[label]
    value = np.float32(0.0)
    for j in range(classes):
        p = _sigmoid(z[j])
        diff = p - (ONE if j == label else np.float32(0.0))
        value += HALF * diff * diff
        delta[j] = diff * p * (ONE - p)
    return value


@njit(fastmath=FASTMATH, cache=True)
def example_gradient(theta: np.ndarray, layers: np.ndarray, aoff: np.ndarray, x: np.ndarray,
                     label: int, loss: int, acts: np.ndarray, deltas: np.ndarray,
                     grad: np.ndarray) -> float:
    """Add one example's gradient (without 1/n and without the L2 term) to grad.

    acts and deltas are scratch buffers of Layout.act_size floats. Returns the loss."""
    nl = layers.shape[0]
    for layer in range(nl):  # forward: z = W a + b, then the sigmoid (not at the output)
        w, b, n_in, n_out = layers[layer]
        a_prev = x if layer == 0 else acts[aoff[layer - 1]:aoff[layer - 1] + n_in]
        out = acts[aoff[layer]:aoff[layer] + n_out]
        for j in range(n_out):
            s = theta[b + j]
            row = w + j * n_in
            for k in range(n_in):
                s += theta[row + k] * a_prev[k]
            out[j] = s if layer == nl - 1 else _sigmoid(s)
    last = aoff[nl - 1]
    value = _output_delta(acts[last:last + layers[nl - 1, 3]], label, loss,
                          deltas[last:last + layers[nl - 1, 3]])
    for layer in range(nl - 1, -1, -1):  # backward
        w, b, n_in, n_out = layers[layer]
        a_prev = x if layer == 0 else acts[aoff[layer - 1]:aoff[layer - 1] + n_in]
        d = deltas[aoff[layer]:aoff[layer] + n_out]
        if layer == 0:
            for j in range(n_out):
                dj = d[j]
                grad[b + j] += dj
                row = w + j * n_in
                for k in range(n_in):
                    grad[row + k] += dj * a_prev[k]
        else:
            # One sweep over W_l's rows gives both its gradient and the delta below.
            below = deltas[aoff[layer - 1]:aoff[layer - 1] + n_in]
            below[:] = 0.0
            for j in range(n_out):
                dj = d[j]
                grad[b + j] += dj
                row = w + j * n_in
                for k in range(n_in):
                    grad[row + k] += dj * a_prev[k]
                    below[k] += theta[row + k] * dj
            for k in range(n_in):
                below[k] *= a_prev[k] * (ONE - a_prev[k])
    return value


@njit(fastmath=FASTMATH, cache=True)
def share_gradient(theta: np.ndarray, layers: np.ndarray, aoff: np.ndarray, X: np.ndarray,
                   labels: np.ndarray, start: int, stop: int, loss: int, acts: np.ndarray,
                   deltas: np.ndarray, grad: np.ndarray) -> float:
    """grad <- the summed gradients of examples start..stop-1; returns their summed loss."""
    grad[:] = 0.0
    total = 0.0
    for i in range(start, stop):
        total += example_gradient(theta, layers, aoff, X[i], labels[i], loss, acts, deltas,
                                  grad)
    return total


@njit(fastmath=FASTMATH, cache=True)
def apply_step(theta: np.ndarray, grad: np.ndarray, is_weight: np.ndarray, inv_n: float,
               lam: float, lr: float) -> None:
    """grad <- grad / n (+ lam * W on weights); then theta <- theta - lr * grad."""
    for p in range(theta.shape[0]):
        g = grad[p] * inv_n
        if is_weight[p]:
            g += lam * theta[p]
        grad[p] = g
        theta[p] -= lr * g
