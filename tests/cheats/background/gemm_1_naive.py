"""Cheat: leave a process behind. At import, a double fork with setsid detaches a
grandchild from the worker's session and process group; it names itself so that it can
be found, and lives on (it could keep using the GPU, or wait for the next submission)."""

import ctypes
import os
import time

NAME = b"nnkit-cheat-bg"

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        ctypes.CDLL(None).prctl(15, ctypes.c_char_p(NAME), 0, 0, 0)  # PR_SET_NAME
        end = time.time() + 90
        while time.time() < end:
            time.sleep(0.2)
    os._exit(0)
time.sleep(0.5)  # the daemon is on its own by now


def gemm_naive(A, B, C, alpha, beta):
    pass
