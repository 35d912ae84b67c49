"""Shared helpers of my three GEMM versions: launch plans as a dataclass, ceil division,
and device functions for guarded loads and the alpha/beta store."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

import numpy as np

from nnkit.backend import cuda

log = logging.getLogger("gemm")

WARP = 32
LOG2_WARP = int(math.log2(WARP))


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass
class LaunchPlan:
    rows: int
    cols: int
    tile_rows: int
    tile_cols: int
    threads: tuple[int, int] = (32, 8)
    notes: list = field(default_factory=list)

    @property
    def grid(self) -> tuple[int, int]:
        return (ceil_div(self.cols, self.tile_cols), ceil_div(self.rows, self.tile_rows))

    def describe(self) -> str:
        return (f"{self.rows}x{self.cols} in tiles of {self.tile_rows}x{self.tile_cols}: "
                f"grid {self.grid}, block {self.threads}")


def as_f32(x: float) -> np.float32:
    return np.float32(x)


@cuda.jit(device=True)
def guarded(X, r, c):
    if r < X.shape[0] and c < X.shape[1]:
        return X[r, c]
    return np.float32(0.0)


@cuda.jit(device=True)
def store(C, i, j, acc, alpha, beta):
    if i < C.shape[0] and j < C.shape[1]:
        if beta == 0:
            C[i, j] = alpha * acc
        else:
            C[i, j] = alpha * acc + beta * C[i, j]
