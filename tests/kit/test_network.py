"""The CPU reference network: gradients against central finite differences (float64)."""

import numpy as np
import pytest

from nnkit import network


def _problem(sizes, n, seed):
    rng = np.random.default_rng(seed)
    params = network.glorot_uniform(sizes, seed, np.float64)
    for b in params.biases:
        b += rng.normal(0, 0.3, b.shape)  # non-zero biases exercise their gradients
    X = rng.uniform(0, 1, (n, sizes[0]))
    labels = rng.integers(0, sizes[-1], n)
    return params, X, labels


@pytest.mark.parametrize("loss", network.LOSSES)
@pytest.mark.parametrize("sizes", [[5, 4, 3], [6, 5, 4, 3]], ids=["1 hidden", "2 hidden"])
def test_gradients_match_finite_differences(loss, sizes):
    params, X, labels = _problem(sizes, n=7, seed=len(sizes))
    lam, h = 0.3, 1e-6
    grads, value = network.backward(params, network.forward(params, X), labels, lam, loss)
    assert value == pytest.approx(network.loss_value(params, X, labels, lam, loss))
    for P, G in zip(params.weights + params.biases, grads.weights + grads.biases, strict=True):
        numeric = np.zeros_like(P)
        for idx in np.ndindex(P.shape):
            saved = P[idx]
            P[idx] = saved + h
            up = network.loss_value(params, X, labels, lam, loss)
            P[idx] = saved - h
            down = network.loss_value(params, X, labels, lam, loss)
            P[idx] = saved
            numeric[idx] = (up - down) / (2 * h)
        # Central differences are exact to O(h^2) ~ 1e-12 plus rounding ~ 1e-16 / h.
        assert np.allclose(G, numeric, rtol=1e-6, atol=1e-8)


def test_l2_term_penalises_weights_only():
    params, X, labels = _problem([4, 3, 2], n=5, seed=1)
    with_l2 = network.loss_value(params, X, labels, lam=2.0)
    without = network.loss_value(params, X, labels, lam=0.0)
    expected = 0.5 * 2.0 * sum((W ** 2).sum() for W in params.weights)
    assert with_l2 - without == pytest.approx(expected)


def test_softmax_is_stable_for_huge_logits():
    Z = np.array([[1000.0, -1000.0, 0.0], [-800.0, -801.0, -802.0]], dtype=np.float32)
    losses, dZ = network.output_loss_and_delta(Z, np.array([1, 0]), "ce")
    assert np.all(np.isfinite(losses)) and np.all(np.isfinite(dZ))
    assert losses[0] == pytest.approx(2000.0)


def test_glorot_uniform_range_and_zero_biases():
    params = network.glorot_uniform([784, 1024, 10], seed=3)
    limit = np.sqrt(6 / (784 + 1024))
    assert params.weights[0].shape == (1024, 784) and params.weights[0].dtype == np.float32
    assert np.abs(params.weights[0]).max() <= limit
    assert np.abs(params.weights[0]).max() > 0.99 * limit
    assert all(not b.any() for b in params.biases)
    again = network.glorot_uniform([784, 1024, 10], seed=3)
    assert np.array_equal(params.weights[1], again.weights[1])


def test_sgd_steps_lower_the_loss():
    params, X, _ = _problem([6, 8, 3], n=30, seed=4)
    labels = (X[:, 0] > 0.5).astype(int) + (X[:, 1] > 0.5)  # learnable from X
    before = network.loss_value(params, X, labels, 1e-3)
    for _ in range(200):
        network.train_step(params, X, labels, lr=1.0, lam=1e-3)
    assert network.loss_value(params, X, labels, 1e-3) < 0.75 * before


@pytest.mark.parametrize("sizes", [[3], [3, 0, 2], [3, 2.5, 1]])
def test_bad_sizes_are_rejected(sizes):
    with pytest.raises(ValueError, match="layer sizes"):
        network.glorot_uniform(sizes, 0)
