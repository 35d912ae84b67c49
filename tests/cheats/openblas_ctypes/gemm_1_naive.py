"""Cheat: NumPy's bundled OpenBLAS SGEMM, loaded and called through ctypes."""

import ctypes
import glob
import os

import numpy as np

LIBS = glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "*blas*"))


def gemm_naive(A, B, C, alpha, beta):
    blas = ctypes.CDLL(LIBS[0]) if LIBS else ctypes.CDLL(None)
    raise RuntimeError(f"loaded {blas}")
