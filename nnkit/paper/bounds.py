"""How far a correct float32 implementation may be from the exact gradients: a running
error bound, carried through the network beside a float64 reference.

Every implementation of the benchmark computes the same float32 arithmetic in a different
order (loops per example, sums split over threads, blocked BLAS, GPU kernels). Each
quantity below gets an elementwise bound e on |computed - exact|, derived from float32's
unit roundoff u = 2^-24 and the bounds of the inputs it was computed from, so a test can
ask of every implementation: |got - float64 reference| <= e, with no tolerance chosen by
hand. The rules used:

- a sum of K products, in any order, with or without fused multiply-adds:
  |error| <= gamma(K) * sum |terms|, gamma(K) = K u / (1 - K u) (Higham, Lemma 3.1);
  a perturbed operand adds its own error times the magnitudes it multiplies (exactly,
  not to first order: (|x| + ex)(|y| + ey) - |x||y|);
- exp and log of float32 in NumPy are documented within 4 ulp (2.52 and 3.83), CUDA's
  within 2, glibc's within 1: a relative error of 8u each (1 ulp <= 2u);
- sigmoid(z) = 1 / (1 + exp(-z)) evaluated: exp 8u, the addition u, the division u:
  at most 11u relative (10u and second-order terms); an error e in z moves it by at
  most s(1 - s) e + 0.05 e^2 (the second derivative of the sigmoid is below 0.0962);
- softmax: an error of at most E in every logit of a row scales each P_k by a factor
  within exp(+-2E); evaluating it through the shifted log-sum-exp costs a relative
  2u |z_k - max z| + 9u ln C + 17u + gamma(C) (rounding of the shift, C exps and their
  sum, the log, the subtraction, the final exp);
- the 1/n of the mean and the L2 term add at most four more roundings per gradient
  entry, wherever an implementation applies them (hence gamma(n + 4) for dW).

The bound is rigorous up to these library accuracies; it is loose (tests see errors some
10-100 times below it) but never loosened: a wrong term or a lost 1/n breaks it by orders
of magnitude.
"""

from __future__ import annotations

import numpy as np

from nnkit import network

U = 2.0 ** -24
TRANSCENDENTAL = 8 * U  # exp or log: 4 ulp
SIGMOID = 11 * U
SIGMOID_CURVE = 0.05  # max |sigmoid''| / 2 = 0.0481


def gamma(k: int) -> float:
    return k * U / (1 - k * U)


def _sigmoid_error(s: np.ndarray, ez: np.ndarray) -> np.ndarray:
    moved = s * (1 - s) * ez + SIGMOID_CURVE * ez ** 2
    return moved + SIGMOID * (s + moved)


def _product_error(A: np.ndarray, eA: np.ndarray, B: np.ndarray, eB: np.ndarray,
                   terms: int, extra: np.ndarray | float = 0.0) -> np.ndarray:
    """Bound on the error of A @ B (+ extra, a term whose magnitude joins the sum) when A
    and B carry errors eA and eB: the inputs' errors, plus the rounding of the sum."""
    mA, mB = np.abs(A) + eA, np.abs(B) + eB
    return mA @ mB - np.abs(A) @ np.abs(B) + gamma(terms) * (mA @ mB + np.abs(extra))


def _output(Z: np.ndarray, eZ: np.ndarray, labels: np.ndarray,
            loss: str) -> tuple[np.ndarray, np.ndarray]:
    """(dZ_L of the mean loss, its bound) from the logits and their bound."""
    n, classes = Z.shape
    Y = network.one_hot(labels, classes, Z.dtype)
    if loss == "ce":
        P = np.exp(network.log_softmax(Z))
        E = eZ.max(axis=1, keepdims=True)
        grow = np.expm1(2 * E)
        shift = np.abs(Z - Z.max(axis=1, keepdims=True))
        evaluation = (2 * U * shift + 9 * U * np.log(classes) + 17 * U + gamma(classes))
        eP = P * grow + P * (1 + grow) * evaluation
        dZ = (P - Y) / n
        return dZ, eP / n + 3 * U * (np.abs(P - Y) + eP) / n
    P = network.sigmoid(Z)
    eP = _sigmoid_error(P, eZ)
    g = (P - Y) * P * (1 - P)
    slope = P * (1 - P) + np.abs(P - Y) * np.abs(1 - 2 * P)
    moved = slope * eP + 3 * eP ** 2  # |g''| <= 6 for P, Y in [0, 1]
    return g / n, (moved + 6 * U * (np.abs(g) + moved)) / n


def gradient_bounds(params: network.Params, X: np.ndarray, labels: np.ndarray, lam: float,
                    loss: str = "ce") -> tuple[network.Params, network.Params]:
    """(exact gradients, computed in float64; elementwise bounds on a float32
    implementation's error) for parameters and inputs that are float32 values."""
    p64 = params.copy(np.float64)
    X = np.asarray(X, dtype=np.float64)
    n = len(X)
    acts, errors = [X], [np.zeros_like(X)]
    last = len(p64.weights) - 1
    for layer, (W, b) in enumerate(zip(p64.weights, p64.biases, strict=True)):
        A, eA = acts[-1], errors[-1]
        Z = A @ W.T + b
        eZ = _product_error(A, eA, W.T, np.zeros_like(W.T), W.shape[1] + 1, b)
        if layer == last:
            acts.append(Z)
            errors.append(eZ)
        else:
            S = network.sigmoid(Z)
            acts.append(S)
            errors.append(_sigmoid_error(S, eZ))
    dZ, edZ = _output(acts[-1], errors[-1], labels, loss)
    grads_W, grads_b, bounds_W, bounds_b = [], [], [], []
    for layer in range(last, -1, -1):
        W, A, eA = p64.weights[layer], acts[layer], errors[layer]
        grads_W.append(dZ.T @ A + lam * W)
        bounds_W.append(_product_error(dZ.T, edZ.T, A, eA, n + 4, lam * W))
        grads_b.append(dZ.sum(axis=0))
        bounds_b.append(edZ.sum(axis=0) + gamma(n + 3) * (np.abs(dZ) + edZ).sum(axis=0))
        if layer > 0:
            dA = dZ @ W
            edA = _product_error(dZ, edZ, W, np.zeros_like(W), W.shape[0])
            h = A * (1 - A)
            eh_moved = np.abs(1 - 2 * A) * eA + eA ** 2
            eh = eh_moved + 2 * U * (np.abs(h) + eh_moved)
            mdA, mh = np.abs(dA) + edA, np.abs(h) + eh
            dZ = dA * h
            edZ = mdA * mh - np.abs(dA) * np.abs(h) + 3 * U * mdA * mh
    return (network.Params(grads_W[::-1], grads_b[::-1]),
            network.Params(bounds_W[::-1], bounds_b[::-1]))


def step_bounds(params: network.Params, grads: network.Params, bounds: network.Params,
                lr: float) -> tuple[network.Params, network.Params]:
    """(exact parameters after p <- p - lr * g, bounds) from gradient_bounds' output:
    the gradient's bound times lr, and two roundings (lr * g, the subtraction)."""
    after, error = [], []
    for P, G, E in zip(params.weights + params.biases, grads.weights + grads.biases,
                       bounds.weights + bounds.biases, strict=True):
        P = P.astype(np.float64)
        after.append(P - lr * G)
        error.append(lr * E + 2 * U * (np.abs(P) + lr * (np.abs(G) + E)))
    k = len(params.weights)
    return (network.Params(after[:k], after[k:]), network.Params(error[:k], error[k:]))


def worst_ratio(got: network.Params, exact: network.Params, bound: network.Params) -> float:
    """max over every entry of |got - exact| / bound: at most 1 for a correct implementation."""
    worst = 0.0
    for G, R, B in zip(got.weights + got.biases, exact.weights + exact.biases,
                       bound.weights + bound.biases, strict=True):
        worst = max(worst, float((np.abs(G.astype(np.float64) - R) / B).max()))
    return worst
