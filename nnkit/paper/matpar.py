"""Parallel matrix products (the paper's second kind of parallelism, with its own loops).

Here the whole batch goes through the network as matrix products (nnkit.paper.arraynet),
and each product is split over the threads by the rows or columns of its result, never by
examples: even a batch of one example keeps every thread busy. This is what the paper's
"Fast Parallel" gets from BLAS, written as plain loops compiled by numba so that it can be
set against the thread-parallel version, which uses the same kind of loops.

The loops are the textbook ones, without cache blocking; BLAS (nnkit.paper.blas) shows
what blocking and vector kernels add on the same cores.
"""

from __future__ import annotations

import numpy as np

from nnkit import network
from nnkit.paper.arraynet import ArrayRunner, Ops
from nnkit.paper.jit import njit, numba, prange
from nnkit.paper.loops import FASTMATH
from nnkit.training import TrainConfig


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _abt(A: np.ndarray, B: np.ndarray, out: np.ndarray) -> None:
    """out = A @ B.T; A (n, k), B (m, k): thread by thread over the m columns of out."""
    n, k = A.shape
    for j in prange(B.shape[0]):
        for i in range(n):
            s = np.float32(0.0)
            for q in range(k):
                s += A[i, q] * B[j, q]
            out[i, j] = s


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _atb(A: np.ndarray, B: np.ndarray, out: np.ndarray) -> None:
    """out = A.T @ B; A (n, m), B (n, k): thread by thread over the m rows of out."""
    n, k = B.shape
    for j in prange(A.shape[1]):
        row = out[j]
        row[:] = 0.0
        for i in range(n):
            a = A[i, j]
            for q in range(k):
                row[q] += a * B[i, q]


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _ab(A: np.ndarray, B: np.ndarray, out: np.ndarray, chunk: int) -> None:
    """out = A @ B; A (n, m), B (m, k): thread by thread over chunks of out's k columns
    (so that the innermost loop runs along rows of B and out)."""
    n, m = A.shape
    k = B.shape[1]
    for c in prange((k + chunk - 1) // chunk):
        lo, hi = c * chunk, min(k, (c + 1) * chunk)
        for i in range(n):
            for q in range(lo, hi):
                out[i, q] = 0.0
            for j in range(m):
                a = A[i, j]
                for q in range(lo, hi):
                    out[i, q] += a * B[j, q]


def abt(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    out = np.empty((A.shape[0], B.shape[0]), dtype=np.float32)
    _abt(np.ascontiguousarray(A), np.ascontiguousarray(B), out)
    return out


def atb(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    out = np.empty((A.shape[1], B.shape[1]), dtype=np.float32)
    _atb(np.ascontiguousarray(A), np.ascontiguousarray(B), out)
    return out


def ab(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    out = np.empty((A.shape[0], B.shape[1]), dtype=np.float32)
    k = B.shape[1]
    # Enough chunks for every thread, each at least 64 columns long for vector loads.
    chunk = max(64, -(-k // (4 * numba.get_num_threads())))
    _ab(np.ascontiguousarray(A), np.ascontiguousarray(B), out, chunk)
    return out


OPS = Ops(np, abt, atb, ab)


def runner(params: network.Params, config: TrainConfig) -> ArrayRunner:
    return ArrayRunner(OPS, params, config)
