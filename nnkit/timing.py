"""Timing device work from the host: every sample ends with a full device synchronisation.

Synchronising the whole device (not one stream or one event) means work queued on any
stream is inside the measured interval, however the timed code launches it.
"""

from __future__ import annotations

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


def best(samples: list[float]) -> float:
    """The fastest sample: the least disturbed by the host, the clock or other processes.

    Kernel time has a floor and noise only adds to it, so the minimum of several calls is
    the steadiest estimate (UIUC ECE408's staff likewise keep the fastest of several runs).
    """
    return min(samples)


def spin_up(seconds: float = 0.3) -> None:
    """Keep the GPU busy for a moment so that it reaches its working clock before timing:
    an idle GPU starts slow, and whoever is timed first would pay for it."""
    from nnkit.backend import select

    if not select().on_gpu:
        return
    import cupy

    x = cupy.ones((2048, 2048), dtype=cupy.float32)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        x @ x
        synchronize()


def gemm_gflops(M: int, N: int, K: int, seconds: float) -> float:
    """GFLOP/s of a GEMM counted as 2*M*N*K floating-point operations."""
    return 2.0 * M * N * K / seconds / 1e9
