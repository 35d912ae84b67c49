"""Replacing what judges or times the run: the kit's functions, numpy's, the clock."""

# ruff: noqa (hostile code, written to be refused)

import time

import nnkit.backend
import nnkit.timing  # expect: import
import numpy as np

from nnkit import backend
from nnkit.backend import cuda

nnkit.backend.to_device = lambda a: a  # expect: module-assign
backend.copy_into = None  # expect: module-assign
time.perf_counter = lambda: 0.0  # expect: module-assign
np.savez = None  # expect: module-assign
del np.load  # expect: module-assign
cuda.event = None  # expect: module-assign
nnkit.timing._clock = None  # expect: import
np.__dict__["dot"] = None  # expect: private, module-assign


def bias_sigmoid(Z, b):
    nnkit.backend.synchronize()


@cuda.jit
def kernel(x):
    x[0] = 1.0


kernel.extra = None  # expect: module-assign (a kernel's attributes are numba's)


class Counter:
    """A class of the module's own: its attributes are its own state, not refused."""

    launches = 0


def _cache():
    return _cache.table


_cache.table = {}  # a plain function's attribute: the "static variable" idiom
Counter.launches += 1
