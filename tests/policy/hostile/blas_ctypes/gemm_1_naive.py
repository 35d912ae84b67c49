"""NumPy's bundled OpenBLAS SGEMM through ctypes, and other ways to raw memory."""

# ruff: noqa (hostile code, written to be refused)

import ctypes  # expect: import
import numpy as np
import numpy.ctypeslib as npct  # expect: memory

from nnkit.backend import cuda  # noqa: F401


def gemm_naive(A, B, C, alpha, beta):
    blas = ctypes.CDLL("libscipy_openblas64_.so")
    pointer = np.ctypeslib.as_ctypes(A)  # expect: memory
    address = A.ctypes.data  # expect: memory
    device_address = C.data.ptr  # expect: memory
    window = np.lib.stride_tricks.as_strided(A, (1 << 20,), (4,))  # expect: memory
    raw = np.frombuffer(bytes(16), dtype=np.float32)  # expect: memory
    alias = np.ndarray((4,), np.float32, buffer=bytes(16))  # expect: memory
    np.save("x.npy", A)  # expect: memory
    C.tofile("c.bin")  # expect: memory
    blas.cblas_sgemm(101, 111, 111, pointer, address, device_address, window, raw, alias, npct)
