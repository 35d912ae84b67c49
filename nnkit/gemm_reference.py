"""The float64 oracle for D = alpha*A@B + beta*C and the float32 error bound it is held to.

Tolerance (per element, documented in handouts/part1-gemm.md):

    |D32[i,j] - D64[i,j]| <= gamma(K + 2) * (|alpha| * (|A| @ |B|)[i,j] + |beta| * |C[i,j]|)
                             + (K + 2) * FLT_MIN
    gamma(n) = n*u / (1 - n*u),  u = 2**-24 (float32 unit roundoff)

A float32 dot product of length K, summed in any order, with or without fused multiply-add,
is within gamma(K) * sum|a_k b_k| of the exact value (Higham, Accuracy and Stability of
Numerical Algorithms, 2nd ed., eq. 3.5). Scaling by alpha and adding beta*C costs at most two
more roundings, hence K + 2. The last term covers products that underflow. Every correct
float32 kernel meets this bound whatever its loop order, so a failure is a real bug. The
reference uses alpha and beta already rounded to float32, as the kernel receives them.
"""

from __future__ import annotations

import numpy as np

UNIT_ROUNDOFF = 2.0**-24
FLT_MIN = float(np.finfo(np.float32).tiny)


def gamma(n: int) -> float:
    nu = n * UNIT_ROUNDOFF
    return nu / (1.0 - nu)


def as_float32_scalar(x: float) -> float:
    return float(np.float32(x))


def reference(A: np.ndarray, B: np.ndarray, C: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    """alpha*A@B + beta*C in float64; with beta == 0, C is not read (cuBLAS convention)."""
    alpha, beta = as_float32_scalar(alpha), as_float32_scalar(beta)
    D = alpha * (A.astype(np.float64) @ B.astype(np.float64))
    if beta != 0.0:
        D += beta * C.astype(np.float64)
    return D


def error_bound(
    A: np.ndarray, B: np.ndarray, C: np.ndarray, alpha: float, beta: float
) -> np.ndarray:
    """The largest error a correct float32 kernel can make, element by element."""
    alpha, beta = as_float32_scalar(alpha), as_float32_scalar(beta)
    K = A.shape[1]
    magnitude = abs(alpha) * (np.abs(A.astype(np.float64)) @ np.abs(B.astype(np.float64)))
    if beta != 0.0:
        magnitude += abs(beta) * np.abs(C.astype(np.float64))
    return gamma(K + 2) * magnitude + (K + 2) * FLT_MIN


def random_operands(
    M: int, N: int, K: int, seed: int, trans_a: bool = False, trans_b: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Float32 A, B, C uniform in [-1, 1]; A is stored K x M when trans_a (B likewise)."""
    rng = np.random.default_rng(seed)

    def uniform(shape: tuple[int, int]) -> np.ndarray:
        return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)

    A = uniform((K, M) if trans_a else (M, K))
    B = uniform((N, K) if trans_b else (K, N))
    C = uniform((M, N))
    return A, B, C
