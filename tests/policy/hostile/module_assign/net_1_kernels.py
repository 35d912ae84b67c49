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
