"""Cheat: NumPy's internal C einsum (trapped since a red team reached it through
numpy.lib.mixins.um), on host copies of the operands; the result is copied back into C
and no kernel runs."""

import numpy as np

from nnkit.backend import to_device, to_host

c_einsum = np._core._multiarray_umath.c_einsum


def gemm_naive(A, B, C, alpha, beta):
    a, b, c = (np.ascontiguousarray(to_host(x), dtype=np.float32) for x in (A, B, C))
    d = np.float32(alpha) * c_einsum("ik,kj->ij", a, b)
    if beta != 0:
        d += np.float32(beta) * c
    C[:, :] = to_device(np.ascontiguousarray(d, dtype=np.float32))
