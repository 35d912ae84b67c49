"""Cheat: the dot() method of NumPy arrays."""

import numpy as np


def gemm_naive(A, B, C, alpha, beta):
    a = np.ascontiguousarray(A.copy_to_host())
    d = np.float32(alpha) * a.dot(B.copy_to_host())
    if beta != 0:
        d = d + np.float32(beta) * C.copy_to_host()
    C.copy_to_device(np.asarray(d, dtype=np.float32))
