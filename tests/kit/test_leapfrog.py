"""Leapfrogging (nnkit.paper.leapfrog) gives exactly the gradients of plain backprop.

Each thread computes its products with the same NumPy expressions as
nnkit.network.backward, and one-thread BLAS is deterministic, so the gradients must be
equal bit for bit, not merely close: for k = 1..4 threads, both variants, nets of one to
five weight layers (so also nets shallower than k, where some threads have no layer).
"""

from __future__ import annotations

import numpy as np
import pytest

from nnkit import network
from nnkit.paper.blas import blas_threads
from nnkit.paper.leapfrog import (
    VARIANTS,
    HostStreams,
    Leapfrog,
    StreamLeapfrog,
    depths_of,
    plain_backward,
)

SIZES = {1: [7, 3], 2: [7, 6, 3], 3: [7, 6, 5, 3], 5: [9, 8, 7, 6, 5, 3]}


def problem(sizes, n=6, seed=0):
    rng = np.random.default_rng(seed)
    params = network.glorot_uniform(sizes, seed)
    for b in params.biases:
        b += rng.normal(0, 0.3, b.shape).astype(np.float32)
    X = rng.random((n, sizes[0]), dtype=np.float32)
    labels = rng.integers(0, sizes[-1], n)
    return params, network.forward(params, X), labels


def same(a: network.Params, b: network.Params) -> bool:
    return all(x.dtype == y.dtype and np.array_equal(x, y)
               for x, y in zip(a.weights + a.biases, b.weights + b.biases, strict=True))


def test_every_depth_has_exactly_one_thread():
    for layers in range(1, 8):
        for k in range(1, 6):
            owned = sorted(d for j in range(k) for d in depths_of(j, k, layers))
            assert owned == list(range(layers))


@pytest.mark.parametrize("loss", network.LOSSES)
@pytest.mark.parametrize("layers", sorted(SIZES))
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_leapfrog_equals_plain_backprop(k, variant, layers, loss):
    params, acts, labels = problem(SIZES[layers])
    with blas_threads(1):
        plain, _ = network.backward(params, acts, labels, 0.3, loss)
        with Leapfrog(k, variant) as leap:
            for _ in range(3):  # the pool is reused from pass to pass
                assert same(leap.backward(params, acts, labels, 0.3, loss), plain)


@pytest.mark.parametrize("loss", network.LOSSES)
@pytest.mark.parametrize("layers", sorted(SIZES))
def test_timed_baseline_is_the_reference_backward(layers, loss):
    params, acts, labels = problem(SIZES[layers])
    with blas_threads(1):
        plain, _ = network.backward(params, acts, labels, 0.3, loss)
        assert same(plain_backward(params, acts, labels, 0.3, loss), plain)


@pytest.mark.parametrize("layers", sorted(SIZES))
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_stream_version_data_flow(k, layers):
    """The CUDA-streams version, run in order on the host: the same gradients."""
    params, acts, labels = problem(SIZES[layers])
    with blas_threads(1):
        plain, _ = network.backward(params, acts, labels, 0.3)
        gW, gb = StreamLeapfrog(k, np, HostStreams()).backward(params.weights, acts, labels,
                                                              0.3)
    assert same(network.Params(gW, gb), plain)


def test_an_error_in_a_thread_is_raised_not_hung():
    params, acts, labels = problem(SIZES[3])
    broken = network.Params([params.weights[0], params.weights[1][:, :2], params.weights[2]],
                            params.biases)
    for variant in VARIANTS:
        with Leapfrog(3, variant) as leap, pytest.raises(ValueError):
            leap.backward(broken, acts, labels, 0.3)
