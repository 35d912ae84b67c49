"""Calling a GEMM: operand checks, the transposed forms, and cuBLAS as the yardstick.

Every GEMM launcher in this kit, the students' and cuBLAS alike, has one signature:

    launch(A, B, C, alpha, beta)    # C <- alpha * A @ B + beta * C, all float32, C is M x N

`gemm()` validates the operands, turns A^T B and A B^T into transposed *views* (no copy:
the kernel reads them through their strides) and calls the launcher.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Launcher = Callable[[Any, Any, Any, float, float], None]

# kernel name -> (module in starter/ and solution/, launcher function in it)
KERNELS: dict[str, tuple[str, str]] = {
    "naive": ("gemm_1_naive", "gemm_naive"),
    "shared": ("gemm_2_shared", "gemm_shared"),
    "register": ("gemm_3_register", "gemm_register"),
    "hierarchical": ("gemm_4_hierarchical", "gemm_hierarchical"),
}
# Kernels beyond the assignment proper: graded only where the grading config turns the
# bonus on ([bonus] in grader/config.toml), but trained on and benchmarked like the others.
BONUS_KERNELS: tuple[str, ...] = ("hierarchical",)


class OperandError(ValueError):
    """Operands of the wrong rank, shape or dtype."""


def operand_shapes(A: Any, B: Any, C: Any) -> tuple[int, int, int]:
    """(M, N, K) of C = A @ B after transposition; raise OperandError on mismatch."""
    for name, X in (("A", A), ("B", B), ("C", C)):
        if getattr(X, "ndim", None) != 2:
            raise OperandError(f"{name} must be a 2-D array, got {getattr(X, 'shape', X)!r}")
        if X.dtype != np.float32:
            raise OperandError(f"{name} must be float32, got {X.dtype}")
    (M, K), (K2, N) = A.shape, B.shape
    if K != K2:
        raise OperandError(f"inner dimensions differ: A is {A.shape}, B is {B.shape}")
    if C.shape != (M, N):
        raise OperandError(f"C is {C.shape}, expected {(M, N)} for A {A.shape} @ B {B.shape}")
    return M, N, K


def gemm(
    launch: Launcher,
    A: Any,
    B: Any,
    C: Any,
    alpha: float = 1.0,
    beta: float = 0.0,
    trans_a: bool = False,
    trans_b: bool = False,
) -> Any:
    """C <- alpha * op(A) @ op(B) + beta * C, where op transposes when asked; returns C.
    The flags may be passed by position too, as the signature in the handout allows."""
    opA = A.T if trans_a else A
    opB = B.T if trans_b else B
    operand_shapes(opA, opB, C)
    launch(opA, opB, C, float(alpha), float(beta))
    return C


def cublas_gemm(A: Any, B: Any, C: Any, alpha: float, beta: float) -> None:
    """The same contract through cuBLAS SGEMM (CuPy arrays; GPU only)."""
    import cupy.cublas

    from nnkit.backend import as_cupy

    # One SGEMM call with alpha and beta, as a hand-written kernel does it. CuPy's gemm
    # takes its operands in any layout; transposed views arrive as F-ordered arrays.
    cupy.cublas.gemm("N", "N", as_cupy(A), as_cupy(B), out=as_cupy(C), alpha=alpha, beta=beta)
