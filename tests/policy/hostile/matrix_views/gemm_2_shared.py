"""`@` on np.matrix views and other library products in disguise."""

# ruff: noqa (hostile code, written to be refused)

import numpy as np
from numpy import einsum  # expect: product

from nnkit.backend import copy_into, to_device


def gemm_shared(A, B, C, alpha, beta):
    a = np.asmatrix(A)  # expect: product
    b = np.matrix(B)  # expect: product
    d = a @ b  # expect: product
    d @= b  # expect: product
    e = np.outer(a, b) + np.kron(a, b)  # expect: product
    f = np.multiply.outer(a, b)  # expect: array-library
    g = np.linalg.multi_dot([a, b])  # expect: product
    h = np.convolve(a, b) + np.tensordot(a, b)  # expect: product
    copy_into(C, to_device(np.float32(alpha) * (d + e + f + g + h) + einsum("ij", a)))
