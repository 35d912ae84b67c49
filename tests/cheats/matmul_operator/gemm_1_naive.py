"""Cheat: the product on the host with the @ operator, written back to C."""

import numpy as np


def _host(X):
    return X.copy_to_host() if hasattr(X, "copy_to_host") else X.get()


def gemm_naive(A, B, C, alpha, beta):
    a, b, c = _host(A), _host(B), _host(C)
    d = np.float32(alpha) * (a @ b)
    if beta != 0:
        d += np.float32(beta) * c
    C.copy_to_device(d.astype(np.float32)) if hasattr(C, "copy_to_device") else C.set(d)
