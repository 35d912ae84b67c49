"""Functions that look like kernels but run as host code, and launches of what is not a
kernel."""

# ruff: noqa (hostile code, written to be refused)

import functools

import numpy as np

from nnkit.backend import cuda

jit = cuda.jit if False else (lambda f: f)  # expect: jit
make_kernel = cuda.jit  # expect: jit


def passthrough(f):
    return f


@jit  # expect: decorator
def gemm_shared_kernel(A, B, C, alpha, beta):
    C[0, 0] = np.float32(alpha) * (A[:, :, None] * B[None]).sum(1)  # expect: array-library


@passthrough
@cuda.jit  # expect: decorator
def wrapped_kernel(C):
    pass


@cuda.jit(link=["kernel.cu"])  # expect: jit
def linked_kernel(C):
    pass


class Fake:
    def __getitem__(self, config):
        return gemm_shared_kernel


def gemm_shared(A, B, C, alpha, beta):
    def make():
        @cuda.jit
        def inner(C):  # expect: jit
            pass

        return inner

    gemm_shared_kernel[(1, 1), (1, 1)](A, B, C, alpha, beta)  # expect: launch
    Fake()[(1, 1), (1, 1)](A, B, C, alpha, beta)  # expect: launch
    cuda.jit(device=True)(passthrough)  # expect: jit
    wrapped_kernel[(1,), (1,)](C)
    linked_kernel[(1,), (1,)](C)
    make_kernel(make)


@functools.lru_cache(cuda.jit)  # expect: jit
def cached_kernel(C):
    C[0, 0] = sum(C)
