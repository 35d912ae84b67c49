"""The tolerance must pass every correct float32 GEMM and fail realistic bugs."""

import numpy as np
import pytest

from nnkit.gemm_reference import error_bound, gamma, random_operands, reference


def _float32_dot_orders(A, B):
    """C = A @ B in float32 summed three ways: numpy's, left-to-right, pairwise blocks."""
    yield (A @ B).astype(np.float32)
    acc = np.zeros((A.shape[0], B.shape[1]), np.float32)
    for k in range(A.shape[1]):
        acc += A[:, k : k + 1] * B[k : k + 1, :]
    yield acc
    acc = np.zeros_like(acc)
    for k0 in range(0, A.shape[1], 32):
        acc += (A[:, k0 : k0 + 32] @ B[k0 : k0 + 32, :]).astype(np.float32)
    yield acc


@pytest.mark.parametrize(("M", "N", "K"), [(1, 1, 1), (17, 5, 3), (40, 30, 784), (8, 8, 1013)])
@pytest.mark.parametrize(("alpha", "beta"), [(1.0, 0.0), (2.0, 5.0), (-0.3, 0.7)])
def test_correct_float32_results_are_within_the_bound(M, N, K, alpha, beta):
    A, B, C = random_operands(M, N, K, seed=M + N + K)
    expected = reference(A, B, C, alpha, beta)
    bound = error_bound(A, B, C, alpha, beta)
    a32, b32 = np.float32(alpha), np.float32(beta)
    for product in _float32_dot_orders(A, B):
        got = a32 * product + (b32 * C if beta else 0)
        assert np.all(np.abs(got - expected) <= bound)


@pytest.mark.parametrize("K", [3, 17, 67, 784, 1013])
def test_one_missing_term_is_caught(K):
    A, B, C = random_operands(16, 16, K, seed=K)
    expected = reference(A, B, C, 2.0, 5.0)
    bound = error_bound(A, B, C, 2.0, 5.0)
    wrong = reference(A[:, 1:], B[1:, :], C, 2.0, 5.0)  # the first k dropped
    assert np.any(np.abs(wrong - expected) > bound)


def test_beta_zero_ignores_c_even_if_nan():
    A, B, C = random_operands(3, 4, 5, seed=1)
    C[:] = np.nan
    assert np.all(np.isfinite(reference(A, B, C, 1.0, 0.0)))
    assert np.all(np.isfinite(error_bound(A, B, C, 1.0, 0.0)))


def test_gamma_grows_linearly():
    assert gamma(1) == pytest.approx(2.0**-24)
    assert gamma(1000) == pytest.approx(1000 * 2.0**-24, rel=1e-4)
