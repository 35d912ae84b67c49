"""Forbidden things laundered through the submission's own helper module."""

# ruff: noqa (hostile code, written to be refused)

from . import helpers
from .helpers import cuda as device

strided = helpers.np.lib  # expect: memory


@device.jit
def gemm_naive_kernel(A, B, C, alpha, beta):
    i, j = device.grid(2)
    C[i, j] = helpers.host_sum(A)  # expect: kernel-call


def gemm_naive(A, B, C, alpha, beta):
    gemm_naive_kernel[(1, 1), (1, 1)](A, B, C, alpha, beta)
    helpers.gemm_naive_kernel2[(1, 1), (1, 1)](A, B, C, alpha, beta)  # expect: launch
