"""Version 5's thin products: nnkit/cuda_src/sgemm_thin.cu through CuPy, with the kit's
contract (C <- alpha * A @ B + beta * C, float32, any strides, in place).

    rows_gemm     N <= THIN      columns_gemm  M <= THIN      outer_gemm  K <= THIN

nnkit.thin_dispatch decides which one a product gets; nnkit.gemm_thin holds the same
kernels in numba-cuda and says why each is shaped as it is. GPU with CuPy only.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from nnkit.gemm import operand_shapes
from nnkit.gemm_cuda import _cupy, element_strides
from nnkit.thin_dispatch import THIN

SOURCE = Path(__file__).with_name("cuda_src") / "sgemm_thin.cu"
KERNELS = ("thin_rows", "thin_columns", "thin_finish", "thin_outer")
# As in the .cu file (THIN too; a test compares them).
ROW_WARPS = 8
COL_X, COL_Y = 32, 8
OUTER_X, OUTER_ROWS = 128, 16
FINISH_THREADS = 256
K_PER_BLOCK = 256  # thin_columns: about this much of K per block (32 k per thread)
MAX_SPLITS = 64  # at most this many shares of K
GRID_Y_MAX = 65535


@cache
def module() -> Any:
    """The compiled RawModule (compiled on first use; CuPy caches the binary on disk)."""
    return _cupy().RawModule(code=SOURCE.read_text(), options=("-std=c++17",))


def kernel(name: str) -> Any:
    return module().get_function(name)


def _operands(A: Any, B: Any, C: Any) -> tuple[Any, tuple[int, int, int], tuple[Any, ...]]:
    """(cupy, (M, N, K), the kernels' leading arguments after alpha: A and its strides,
    B and its strides) with C's element strides appended."""
    cupy = _cupy()
    A, B, C = (cupy.asarray(X) for X in (A, B, C))
    shape = operand_shapes(A, B, C)
    (sAm, sAk), (sBk, sBn), (sCm, sCn) = (
        element_strides(X.shape, X.strides, label) for X, label in ((A, "A"), (B, "B"), (C, "C")))
    i32 = np.int32
    return cupy, shape, (A, i32(sAm), i32(sAk), B, i32(sBk), i32(sBn), C, i32(sCm), i32(sCn))


def _check(value: int, limit: int, what: str) -> None:
    if value > limit:
        raise ValueError(f"{what} is {value}; this kernel computes at most {limit}")


def rows_gemm(A: Any, B: Any, C: Any, alpha: float, beta: float) -> None:
    """The contract for N <= THIN: a warp per row of C."""
    _, (M, N, K), (dA, sAm, sAk, dB, sBk, sBn, dC, sCm, sCn) = _operands(A, B, C)
    _check(N, THIN, "N")
    if M == 0 or N == 0:
        return
    i32, f32 = np.int32, np.float32
    kernel("thin_rows")((-(-M // ROW_WARPS),), (32, ROW_WARPS),
                        (i32(M), i32(N), i32(K), f32(alpha), dA, sAm, sAk, dB, sBk, sBn,
                         f32(beta), dC, sCm, sCn))


def splits(K: int) -> int:
    """How many shares of K columns_gemm makes: about K_PER_BLOCK each, at most MAX_SPLITS."""
    return max(1, min(MAX_SPLITS, -(-K // K_PER_BLOCK)))


def columns_gemm(A: Any, B: Any, C: Any, alpha: float, beta: float) -> None:
    """The contract for M <= THIN: a thread per column of C, K split across blocks."""
    cupy, (M, N, K), (dA, sAm, sAk, dB, sBk, sBn, dC, sCm, sCn) = _operands(A, B, C)
    _check(M, THIN, "M")
    if M == 0 or N == 0:
        return
    chunk = max(1, -(-K // splits(K)))
    shares = max(1, -(-K // chunk))
    work = cupy.empty((shares, M, N) if shares > 1 else (1,), dtype=cupy.float32)
    i32, f32 = np.int32, np.float32
    kernel("thin_columns")((-(-N // COL_X), shares), (COL_X, COL_Y),
                           (i32(M), i32(N), i32(K), f32(alpha), dA, sAm, sAk, dB, sBk, sBn,
                            f32(beta), dC, sCm, sCn, work, i32(chunk)))
    if shares > 1:
        kernel("thin_finish")((-(-(M * N) // FINISH_THREADS),), (FINISH_THREADS,),
                              (i32(M), i32(N), i32(shares), work, f32(alpha), f32(beta), dC,
                               sCm, sCn))


def outer_gemm(A: Any, B: Any, C: Any, alpha: float, beta: float) -> None:
    """The contract for K <= THIN: a thread per column of C, OUTER_ROWS rows each."""
    _, (M, N, K), (dA, sAm, sAk, dB, sBk, sBn, dC, sCm, sCn) = _operands(A, B, C)
    _check(K, THIN, "K")
    if M == 0 or N == 0:
        return
    grid_y = -(-M // OUTER_ROWS)
    _check(grid_y, GRID_Y_MAX, f"the number of blocks of {OUTER_ROWS} rows")
    i32, f32 = np.int32, np.float32
    kernel("thin_outer")((-(-N // OUTER_X), grid_y), (OUTER_X,),
                         (i32(M), i32(N), i32(K), f32(alpha), dA, sAm, sAk, dB, sBk, sBn,
                          f32(beta), dC, sCm, sCn))


def rowmajor_gemm_cuda(A: Any, B: Any, C: Any, alpha: float, beta: float) -> None:
    """Version 5 on row-major copies of A and B where they are views along columns.

    The network hands version 5 transposed views (W1^T forward, dZ1^T for dW1), which its
    float4 loads cannot read: each lane would fetch four scalars from four rows. A copy
    costs one pass over the operand (W1: 3 MB; dZ1 at batch 3200: 13 MB), the product
    some hundred times as many operations; C is written in place as before."""
    from nnkit.gemm_cuda import gemm_cuda

    cupy = _cupy()
    A, B = (cupy.asarray(X) for X in (A, B))
    A, B = (X if X.strides[1] == X.itemsize else cupy.ascontiguousarray(X) for X in (A, B))
    gemm_cuda(A, B, C, alpha, beta)


def resources() -> list[dict]:
    """Registers, shared and local memory of each kernel, in the rows of
    nnkit.kernel_resources.format_resources."""
    rows = []
    for name in KERNELS:
        attributes = kernel(name).attributes
        rows.append({"version": "cuda-c", "kernel": name, "layouts": "any",
                     "registers": int(attributes["num_regs"]),
                     "shared_bytes": int(attributes["shared_size_bytes"]),
                     "local_bytes": int(attributes["local_size_bytes"])})
    return rows
