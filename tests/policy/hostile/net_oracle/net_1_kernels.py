"""Part 2 "kernels" that copy to the host and call the grader's oracle."""

# ruff: noqa (hostile code, written to be refused)

import numpy as np

import nnkit.network as reference  # expect: import
from nnkit import network  # expect: import
from nnkit.backend import cuda, to_device, to_host, xp  # expect: host-copy, backend
from nnkit.backend import select as which  # expect: backend

BLOCK = (32, 4)


@cuda.jit
def unused_kernel(Z):
    pass


def bias_sigmoid(Z, b):
    out = network.sigmoid(to_host(Z) + b.copy_to_host())  # expect: host-copy
    Z.copy_to_device(out)


def add_bias(Z, b):
    xp().add(Z, b, out=Z)
    reference.add_bias(Z, b)
    which()


def column_sums(X, out, scale=1.0):
    host = np.array(X)  # expect: host-copy
    out.copy_to_device(to_device(host.sum(axis=0) * scale))  # expect: array-library
