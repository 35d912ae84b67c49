"""The helper module: it is checked like the graded one."""

# ruff: noqa (hostile code, written to be refused)

import ctypes  # expect: import

import numpy as np

from nnkit.backend import cuda


def host_sum(A):
    return A.sum() + ctypes.sizeof(np.float32)  # expect: array-library


def gemm_naive_kernel2(A, B, C, alpha, beta):
    pass
