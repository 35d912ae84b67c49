"""The check every GEMM kernel test shares: one launch on random operands, its result
within the float32 bound of nnkit.gemm_reference, its inputs untouched, and (in the
simulator) nothing found by the race and index checker."""

from __future__ import annotations

import numpy as np

from nnkit.backend import select, to_device, to_host
from nnkit.gemm import gemm
from nnkit.gemm_reference import error_bound, random_operands, reference


def check_clean(launch, M: int, N: int, K: int, trans_a: bool = False, trans_b: bool = False,
                alpha: float = 2.0, beta: float = 5.0, seed: int | None = None) -> None:
    A, B, C = random_operands(M, N, K, seed=M * 131 + N * 17 + K if seed is None else seed,
                              trans_a=trans_a, trans_b=trans_b)
    if beta == 0.0:
        C[:] = np.nan  # output only: an element never written stays NaN and fails
    opA, opB = (A.T if trans_a else A), (B.T if trans_b else B)
    expected, bound = reference(opA, opB, C, alpha, beta), error_bound(opA, opB, C, alpha, beta)
    dA, dB, dC = to_device(A), to_device(B), to_device(C)
    if select().on_gpu:
        gemm(launch, dA, dB, dC, alpha, beta, trans_a=trans_a, trans_b=trans_b)
    else:
        from grader.worker import simcheck

        with simcheck.instrument() as findings:
            gemm(launch, dA, dB, dC, alpha, beta, trans_a=trans_a, trans_b=trans_b)
        assert list(findings) == [], [f.describe() for f in findings]
    got = to_host(dC)
    assert np.all(np.abs(got - expected) <= bound), np.nanmax(np.abs(got - expected) / bound)
    assert np.array_equal(to_host(dA), A) and np.array_equal(to_host(dB), B)
