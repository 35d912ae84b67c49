"""Cheat: cuBLAS through cupy.matmul on a GPU, numpy.einsum without one."""

import numpy as np

from nnkit.backend import copy_into, select, to_device, to_host


def _product(a, b):
    if select().on_gpu:
        import cupy

        return cupy.matmul(a, b).get()
    return np.einsum("ik,kj->ij", to_host(a), to_host(b))


def gemm_naive(A, B, C, alpha, beta):
    d = np.float32(alpha) * _product(A, B)
    if beta != 0:
        d += np.float32(beta) * to_host(C)
    copy_into(C, to_device(d.astype(np.float32)))
