"""Cheat: the dot() method of NumPy arrays."""

import numpy as np

from nnkit.backend import copy_into, to_device, to_host


def gemm_naive(A, B, C, alpha, beta):
    a = np.ascontiguousarray(to_host(A))
    d = np.float32(alpha) * a.dot(to_host(B))
    if beta != 0:
        d = d + np.float32(beta) * to_host(C)
    copy_into(C, to_device(np.asarray(d, dtype=np.float32)))
