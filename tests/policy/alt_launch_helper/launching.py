"""Launch helpers shared by the GEMM modules: grid sizes and a generic launcher that takes
the kernel as an argument."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

WARP = 32


def cover(extent: int, block: int) -> int:
    """Blocks of `block` threads needed for `extent` items."""
    return (extent + block - 1) // block


def launch_gemm(kernel: Any, grid: tuple, block: tuple, A: NDArray, B, C, alpha: float,
                beta: float) -> None:
    configured = kernel[grid, block]
    configured(A, B, C, np.float32(alpha), np.float32(beta))
