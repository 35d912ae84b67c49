"""Kernels and imports replaced after they were checked."""

# ruff: noqa (hostile code, written to be refused)

import numpy as np

from nnkit.backend import cuda, to_device


@cuda.jit
def gemm_register_kernel(A, B, C, alpha, beta):
    pass


def host_version(A, B, C, alpha, beta):
    C[0, 0] = alpha


@cuda.jit
def other_kernel(C):
    pass


gemm_register_kernel = host_version  # expect: rebind
other_kernel.fn = host_version  # expect: module-assign
body = other_kernel.py_func  # expect: private
kernels = [other_kernel]  # expect: launch
cuda.to_device = lambda x: x  # expect: module-assign
np = None  # expect: rebind


def swap():
    global to_device
    to_device = None  # expect: rebind


def gemm_register(A, B, C, alpha, beta):
    other_kernel.configure(1, 1)  # expect: launch
    gemm_register_kernel[(1, 1), (16, 4)](A, B, C, alpha, beta)
