"""The handouts' formulas against the code, by finite differences in float64 on a tiny
network, and against the handouts' own text: what Part 2 says the output delta and the
L2 gradient are, and what Part 3 says the weighted sum of shard gradients is.

Tolerances. Central differences with step h in float64 have a truncation error of about
h²/6 · |f'''| and a rounding error of about ε·|J|/h (ε = 2⁻⁵² ≈ 2.2e-16). The losses here
are O(1) with bounded third derivatives (softmax, sigmoid and the quadratic L2 term), so
with h = 1e-5 both terms are below 1e-10; TOL = 1e-8 leaves a factor of 100 of margin,
while every wrong variant tried below (a missing 1/n, a missing −Y, λ/2 instead of λ, the
L2 term on the biases) is off by 1e-3 or more.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from nnkit import network
from tests.conftest import KIT_ROOT

PART2 = (KIT_ROOT / "handouts" / "part2-network.md").read_text(encoding="utf-8")
PART3 = (KIT_ROOT / "handouts" / "part3-mpi.md").read_text(encoding="utf-8")
H = 1e-5
TOL = 1e-8
LAM = 0.3  # large, so that a wrong L2 term shows


def _states(text: str, formula: str) -> bool:
    """Whether `text` writes `formula`, spaces aside (the handouts align with spaces)."""
    squash = re.compile(r"\s+")
    return squash.sub(" ", formula) in squash.sub(" ", text)


def _tiny(seed: int = 7, sizes=(5, 4, 3), n: int = 6):
    rng = np.random.default_rng(seed)
    params = network.glorot_uniform(list(sizes), seed, dtype=np.float64)
    for b in params.biases:  # non-zero biases, so that a gradient mixing W and b shows
        b[:] = rng.normal(size=b.shape)
    X = rng.normal(size=(n, sizes[0]))
    labels = rng.integers(0, sizes[-1], size=n)
    return params, X, labels


def _numeric_gradient(f, x: np.ndarray) -> np.ndarray:
    """Central differences of the scalar f() with respect to every entry of x, in place."""
    grad = np.empty_like(x)
    for index in np.ndindex(x.shape):
        saved = x[index]
        x[index] = saved + H
        up = f()
        x[index] = saved - H
        down = f()
        x[index] = saved
        grad[index] = (up - down) / (2 * H)
    return grad


@pytest.mark.parametrize("loss", ["ce", "mse"])
def test_output_delta_is_the_derivative_of_the_mean_loss(loss):
    """δ = ∂J/∂Z_L over the batch: (P − Y)/n for softmax with cross-entropy, and
    (P − Y)∘P∘(1 − P)/n for the sigmoid output with squared error."""
    params, X, labels = _tiny()
    Z = network.forward(params, X)[-1].copy()
    n, classes = Z.shape
    numeric = _numeric_gradient(
        lambda: float(network.output_loss_and_delta(Z, labels, loss)[0].mean()), Z)
    Y = np.eye(classes)[labels]
    if loss == "ce":
        P = np.exp(Z) / np.exp(Z).sum(axis=1, keepdims=True)
        stated = (P - Y) / n
    else:
        P = 1 / (1 + np.exp(-Z))
        stated = (P - Y) * P * (1 - P) / n
    assert np.abs(numeric - stated).max() < TOL
    # the kit's reference computes the same delta
    assert np.abs(network.output_loss_and_delta(Z, labels, loss)[1] - stated).max() < TOL
    # and the variants a student might write are far off
    assert np.abs(numeric - stated * n).max() > 1e-3  # the 1/n forgotten


def test_handout_states_the_output_deltas():
    assert _states(PART2, "dZ_L = ∂J/∂Z_L = (P − Y) / n")
    assert _states(PART2, "dZ_L = (P − Y) ∘ P ∘ (1 − P) / n")
    assert _states(PART2, "`dZ ← (P − Y) / n` with n = `Z.shape[0]`")


def test_gradients_are_the_derivatives_of_the_cost_with_its_l2_term():
    """dW_l = dZ_lᵀ A_(l-1) + λ W_l and db_l = Σ_i dZ_l[i, :], for J = mean CE + (λ/2) Σ ||W||²:
    the whole backward pass of nnkit/network.py against finite differences of J."""
    params, X, labels = _tiny(sizes=(5, 4, 3, 3))  # two hidden layers
    grads, _ = network.backward(params, network.forward(params, X), labels, LAM)
    cost = lambda: network.loss_value(params, X, labels, LAM)  # noqa: E731
    for got, array in zip(grads.weights + grads.biases, params.weights + params.biases,
                          strict=True):
        assert np.abs(got - _numeric_gradient(cost, array)).max() < TOL
    # the L2 part alone: the derivative of (λ/2)||W||² is λW, not (λ/2)W, and b has none
    W = params.weights[0]
    l2 = _numeric_gradient(lambda: network.l2_term(params, LAM), W)
    assert np.abs(l2 - LAM * W).max() < TOL
    assert np.abs(l2 - LAM / 2 * W).max() > 1e-3
    b = params.biases[0]
    assert np.abs(_numeric_gradient(lambda: network.l2_term(params, LAM), b)).max() == 0


def test_handout_states_the_cost_and_its_gradients():
    assert _states(PART2, "J = (1/n) Σ_i CE_i  +  (λ/2) Σ_l ||W_l||²")
    assert _states(PART2, "dW_l     = dZ_lᵀ A_(l-1) + λ W_l")
    assert _states(PART2, "db_l     = Σ_i dZ_l[i, :]")
    assert _states(PART2, "The λ W_l term is the gradient of\n`(λ/2)||W_l||²`")


def test_shard_gradients_weighted_by_rows_give_the_batch_gradient():
    """Part 3: Σ_r (n_r/n) g_r = (1/n) Σ ∇loss_i + λW, for uneven shards; the plain
    average of the g_r does not."""
    params, X, labels = _tiny(n=7)
    full, _ = network.backward(params, network.forward(params, X), labels, LAM)
    shards = [(0, 3), (3, 5), (5, 7)]  # 3, 2 and 2 rows
    weighted = [np.zeros_like(g) for g in full.weights + full.biases]
    plain = [np.zeros_like(g) for g in weighted]
    for start, stop in shards:
        g, _ = network.backward(params, network.forward(params, X[start:stop]),
                                labels[start:stop], LAM)
        share = (stop - start) / len(X)
        for w, p, part in zip(weighted, plain, g.weights + g.biases, strict=True):
            w += share * part
            p += part / len(shards)
    for w, want in zip(weighted, full.weights + full.biases, strict=True):
        assert np.abs(w - want).max() < TOL
    assert max(np.abs(p - want).max()
               for p, want in zip(plain, full.weights + full.biases, strict=True)) > 1e-3


def test_handout_states_the_weighted_sum():
    assert _states(PART3, "Σ_r w_r g_r = Σ_r (n_r/n)(1/n_r) Σ_(rows of r) ∇loss_i + "
                          "(Σ_r n_r/n) λW")
    assert _states(PART3, "= (1/n) Σ_(all rows) ∇loss_i + λW")
