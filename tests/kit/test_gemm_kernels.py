"""The solution's kernels on awkward shapes (CPU simulator here, the GPU where there is one)."""

import numpy as np
import pytest

from nnkit.backend import select, to_device, to_host
from nnkit.gemm import KERNELS, OperandError, cublas_gemm, gemm
from nnkit.gemm_reference import error_bound, random_operands, reference
from nnkit.submission import NAMED, load_function

# (M, N, K, trans_a, trans_b, beta): edges of tiles, 1s, transposed forms, beta = 0.
SMALL_CASES = [
    (1, 1, 1, False, False, 0.0),
    (17, 5, 3, False, False, 5.0),
    (3, 33, 17, True, False, 0.0),
    (18, 9, 35, False, True, -2.0),
    (5, 65, 4, True, True, 5.0),
]


def _check(launch, M, N, K, trans_a, trans_b, beta, alpha=2.0):
    A, B, C = random_operands(M, N, K, seed=M * N + K, trans_a=trans_a, trans_b=trans_b)
    if beta == 0.0:
        C[:] = np.nan  # output only: no NaN may survive
    opA, opB = (A.T if trans_a else A), (B.T if trans_b else B)
    expected, bound = reference(opA, opB, C, alpha, beta), error_bound(opA, opB, C, alpha, beta)
    dA, dB, dC = to_device(A), to_device(B), to_device(C)
    gemm(launch, dA, dB, dC, alpha, beta, trans_a=trans_a, trans_b=trans_b)
    got = to_host(dC)
    assert np.all(np.abs(got - expected) <= bound), np.max(np.abs(got - expected) / bound)
    assert np.array_equal(to_host(dA), A) and np.array_equal(to_host(dB), B)


@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("case", SMALL_CASES, ids=lambda c: "x".join(map(str, c[:3])))
def test_solution_kernel_small(kernel, case):
    _check(load_function(NAMED["solution"], *KERNELS[kernel]), *case)


def test_operand_errors_are_clear():
    launch = load_function(NAMED["solution"], *KERNELS["naive"])
    A = np.zeros((3, 4), np.float32)
    with pytest.raises(OperandError, match="inner dimensions"):
        gemm(launch, A, np.zeros((5, 2), np.float32), np.zeros((3, 2), np.float32))
    with pytest.raises(OperandError, match="C is"):
        gemm(launch, A, np.zeros((4, 2), np.float32), np.zeros((2, 3), np.float32))
    with pytest.raises(OperandError, match="float32"):
        gemm(launch, A.astype(np.float64), np.zeros((4, 2), np.float32),
             np.zeros((3, 2), np.float32))
    with pytest.raises(OperandError, match="2-D"):
        gemm(launch, A, np.zeros(4, np.float32), np.zeros((3, 2), np.float32))


def test_transposition_flags_may_be_positional():
    """The handout's signature gemm(A, B, C, alpha=1.0, beta=0.0, trans_a=False,
    trans_b=False) lets a network pass the flags by position (tests/policy/
    alt_net_workspace); a host launcher stands in for a kernel."""
    def host(A, B, C, alpha, beta):
        C[...] = alpha * (np.asarray(A, np.float64) @ np.asarray(B, np.float64))

    rng = np.random.default_rng(0)
    A, B = rng.random((4, 3), np.float32), rng.random((5, 4), np.float32)
    by_position, by_name = np.empty((3, 5), np.float32), np.empty((3, 5), np.float32)
    gemm(host, A, B, by_position, 2.0, 0.0, True, True)
    gemm(host, A, B, by_name, 2.0, 0.0, trans_a=True, trans_b=True)
    assert np.array_equal(by_position, by_name)
    assert np.allclose(by_position, 2.0 * A.T.astype(np.float64) @ B.T, rtol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", [*KERNELS, "cublas"])
@pytest.mark.parametrize(
    "case",
    [(800, 1000, 784, False, False, 5.0), (800, 10, 1000, False, False, 5.0),
     (1013, 67, 1013, True, False, 0.0), (67, 1013, 1013, False, True, 5.0),
     (1, 1013, 1, False, False, 5.0)],
    ids=lambda c: "x".join(map(str, c[:3])),
)
def test_gpu_kernel_large(kernel, case):
    assert select().on_gpu
    launch = cublas_gemm if kernel == "cublas" else load_function(NAMED["solution"],
                                                                   *KERNELS[kernel])
    _check(launch, *case)
