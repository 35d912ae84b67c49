"""Which kernel computes a product: a tiled GEMM, or one made for a thin dimension.

    launch = with_thin(tiled_launcher, ThinKernels(rows, columns, outer))
    gemm(launch, A, B, C, alpha, beta, trans_b=True)

A product whose M or N is at most THIN goes to a reduction kernel, one whose K is at most
THIN (and M, N larger) to the outer-product kernel, every other one to the tiled GEMM.
Of the two reduction kernels, `rows` wants A's rows contiguous (a warp reads along K)
and `columns` wants B's rows contiguous (a warp reads along N). Both are correct for any
layout, and C^T = B^T A^T turns a thin-N product into a thin-M one (and back), so the
rule picks the pair (kernel, transposed or not) whose reads are contiguous:

    thin N, A contiguous along K   rows(A, B, C)                  (the network's forward)
    thin N, A contiguous along M   columns(B^T, A^T, C^T)
    thin M, B contiguous along N   columns(A, B, C)               (dW of the output layer)
    thin M, B contiguous along K   rows(B^T, A^T, C^T)
    K thin                         outer(A, B, C)                 (dA below the output layer)

The views are free (.T swaps the strides); the kernels read and write through them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nnkit.gemm import Launcher

THIN = 16  # the kernels' own arrays have this size (sgemm_thin.cu repeats it)

TILED, ROWS, COLUMNS, OUTER = "tiled", "rows", "columns", "outer"


@dataclass(frozen=True)
class ThinKernels:
    """Launchers with the GEMM contract: rows for N <= THIN, columns for M <= THIN, outer
    for K <= THIN."""

    rows: Launcher
    columns: Launcher
    outer: Launcher


def _fast_along_second(X: Any) -> bool:
    """Consecutive elements of a row of X are at least as close as those of a column."""
    s_rows, s_cols = (abs(int(s)) for s in X.strides)
    return s_cols <= s_rows


def plan(A: Any, B: Any, C: Any) -> tuple[str, bool]:
    """(kernel, transposed): which kernel computes C <- alpha A B + beta C, and whether it
    is handed the transposed problem (B^T, A^T, C^T)."""
    M, N = C.shape
    K = A.shape[1]
    if N <= THIN:
        return (ROWS, False) if _fast_along_second(A) else (COLUMNS, True)
    if M <= THIN:
        return (COLUMNS, False) if _fast_along_second(B) else (ROWS, True)
    if K <= THIN:
        return OUTER, False
    return TILED, False


def with_thin(tiled: Launcher, thin: ThinKernels) -> Launcher:
    """A launcher that sends thin products to `thin` and the others to `tiled`."""

    def launch(A: Any, B: Any, C: Any, alpha: float, beta: float) -> None:
        kernel, transposed = plan(A, B, C)
        run = tiled if kernel == TILED else getattr(thin, kernel)
        if transposed:
            run(B.T, A.T, C.T, alpha, beta)
        else:
            run(A, B, C, alpha, beta)

    launch.__name__ = f"{getattr(tiled, '__name__', 'tiled')}_with_thin"
    return launch
