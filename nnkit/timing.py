"""Timing device work from the host: every sample ends with a full device synchronisation.

Synchronising the whole device (not one stream or one event) means work queued on any
stream is inside the measured interval, however the timed code launches it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from nnkit.backend import synchronize


def time_calls(
    run: Callable[[], None],
    *,
    repeats: int = 10,
    warmup: int = 2,
    before_each: Callable[[], None] | None = None,
) -> list[float]:
    """Seconds taken by each of `repeats` calls of run(), after `warmup` untimed calls.

    before_each (for example restoring an operand) runs outside the timed interval.
    """
    for _ in range(warmup):
        if before_each:
            before_each()
        run()
    synchronize()
    samples = []
    for _ in range(repeats):
        if before_each:
            before_each()
        synchronize()
        start = time.perf_counter()
        run()
        synchronize()
        samples.append(time.perf_counter() - start)
    return samples


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def gemm_gflops(M: int, N: int, K: int, seconds: float) -> float:
    """GFLOP/s of a GEMM counted as 2*M*N*K floating-point operations."""
    return 2.0 * M * N * K / seconds / 1e9
