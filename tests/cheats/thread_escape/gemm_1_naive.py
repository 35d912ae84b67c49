"""Cheat: a library function run in a thread of its own, so that no frame of the
submission is on the stack when it loads a shared library."""

import ctypes
import threading


def gemm_naive(A, B, C, alpha, beta):
    worker = threading.Thread(target=ctypes.CDLL, args=("libc.so.6",))
    worker.start()
    worker.join()
    raise RuntimeError("the thread ran")
