"""NumPy's internal C einsum, reached without the public name the traps wrap."""

# ruff: noqa (hostile code, written to be refused)

import numpy as np
from numpy import _core  # expect: private
from numpy._core._multiarray_umath import c_einsum  # expect: private

from nnkit.backend import copy_into

product = np._core._multiarray_umath.c_einsum  # expect: private
core_alias = np.core  # expect: memory


def gemm_naive(A, B, C, alpha, beta):
    copy_into(C, c_einsum("ik,kj->ij", A, B))
