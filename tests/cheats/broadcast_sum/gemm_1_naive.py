"""Cheat: no library product at all, only broadcasting and a sum on the host."""

import numpy as np

from nnkit.backend import to_device, to_host


def gemm_naive(A, B, C, alpha, beta):
    a, b, c = to_host(A), to_host(B), to_host(C)
    d = np.float32(alpha) * (a[:, :, None] * b[None, :, :]).sum(axis=1, dtype=np.float32)
    if beta != 0:
        d += np.float32(beta) * c
    C[:, :] = to_device(np.ascontiguousarray(d, dtype=np.float32))
