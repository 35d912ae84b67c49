"""Timing device work: CUDA events for the GPU's time, the host clock as a cross-check.

Each call is bracketed by events on the legacy default stream, which waits for all
earlier work of the ordinary streams and holds back later work until it is done: the
interval is the GPU's own time for the call, free of the host's launch overhead, whose
jitter would otherwise swamp short kernels (a little GPU work is queued in front of the
start event, so that the GPU is not idle waiting for the launch when it reaches it). Each
sample also ends with a whole-device synchronisation timed on the host clock; work that
ran outside the events (on a stream that does not synchronise with the default one) shows
up as host time far above the event time, and `escaped_events` says so. In the simulator
only the host clock exists.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnkit.backend import select, synchronize


@dataclass(frozen=True)
class Clock:
    """The functions timing relies on, taken once."""

    now: Callable[[], float]
    sync: Callable[[], None]
    event: Any = None  # cupy.cuda.Event, on a GPU
    elapsed: Any = None  # cupy.cuda.get_elapsed_time
    stream: Any = None  # the legacy default stream
    queue_ahead: Any = None  # GPU work queued before a timed call's start event (time_calls)


_clock: Clock | None = None


def capture() -> Clock:
    """Take the clock, the synchronisation and CUDA's events now, once per process.

    The grading worker calls this before it imports submitted code: a submission that
    later replaces time.perf_counter, cupy.cuda.Event or get_elapsed_time changes the
    modules, not the references kept here."""
    global _clock
    if _clock is None:
        if select().on_gpu:
            import cupy

            _clock = Clock(time.perf_counter, cupy.cuda.runtime.deviceSynchronize,
                           cupy.cuda.Event, cupy.cuda.get_elapsed_time, cupy.cuda.Stream.null,
                           _busy_work())
        else:
            _clock = Clock(time.perf_counter, synchronize)
    return _clock


BUSY_GEMMS = 6  # about 45 us each on an H100 (2.1 GFLOP)


def _busy_work() -> Callable[[], None] | None:
    """A function that queues ~0.3 ms of GPU work (BUSY_GEMMS 1024^3 SGEMMs through
    cuBLAS's own binding, taken now, before anything submitted could replace it; their
    12 MB of buffers made at the first call). time_calls queues it in front of each timed
    call's start event: while the GPU does it, the host records the event and launches
    the call, so the interval holds the call's kernels and not the host's time to launch
    them, which on an idle GPU it otherwise does (tens of microseconds: a fifth of a small
    benchmark shape's kernel), and the GPU meets the call busy, at its working clock, not
    after the host's milliseconds between calls. None where the binding is missing: the
    call is then timed from an idle GPU."""
    try:
        import cupy
        from cupy_backends.cuda.libs import cublas
    except ImportError:
        return None
    # Every function it calls taken now: looked up at each call, a module attribute the
    # submission replaced would run inside the timed stretch.
    sgemm, zeros, handle_of, float32 = (cublas.sgemm, cupy.zeros,
                                        cupy.cuda.device.get_cublas_handle, cupy.float32)
    n, held = 1024, []

    def queue() -> None:
        if not held:
            scalars = np.ones(2, dtype=np.float32)
            held.extend([zeros((n, n), dtype=float32) for _ in range(3)] + [scalars])
        a, b, c, scalars = held
        # alpha and beta as host addresses (older CuPy) or numbers (newer): either way
        # the product of zeros, whose value nothing reads.
        handle = handle_of()
        for _ in range(BUSY_GEMMS):
            sgemm(handle, 0, 0, n, n, n, scalars.ctypes.data, a.data.ptr, n, b.data.ptr, n,
                  scalars.ctypes.data + 4, c.data.ptr, n)

    return queue


@dataclass
class Timings:
    host: list[float]  # seconds per call, host clock, ending with a device synchronisation
    device: list[float] | None  # seconds per call between CUDA events; None in the simulator

    @property
    def counted(self) -> list[float]:
        """The samples that count: the GPU's time where there is a GPU."""
        return self.device if self.device is not None else self.host

    def escaped_events(self) -> bool:
        """True when the host saw much more time than the events did: work was launched
        where the events could not see it. The allowance covers launch overhead."""
        if self.device is None:
            return False
        host, device = min(self.host), min(self.device)
        return host > 4.0 * device + 2e-3


def time_calls(
    run: Callable[[], None],
    *,
    repeats: int = 10,
    warmup: int = 2,
    before_each: Callable[[], None] | None = None,
    after_each: Callable[[], None] | None = None,
    clock: Clock | None = None,
    budget: float | None = None,
    least: int = 3,
) -> Timings:
    """Time `repeats` calls of run(), after `warmup` untimed calls.

    before_each (for example restoring an operand) and after_each (checking the result)
    run around every call, warm-up calls included, outside the timed interval. The grading
    worker passes the clock it captured before the submission was imported. With a
    `budget` (seconds), the timing stops early once at least `least` calls have taken
    that long together: a slow kernel's fastest call is known well enough after a few,
    and every call of it holds the GPU that other jobs wait for.
    """
    clock = clock or capture()
    events = (clock.event(), clock.event()) if clock.event is not None else None
    ahead = clock.queue_ahead if events else None
    ahead_start = clock.event() if ahead is not None else None  # where the queued work starts
    if ahead is not None:
        ahead()  # its buffers and cuBLAS's handle made now, not in a timed stretch
    for _ in range(warmup):
        if before_each:
            before_each()
        run()
        clock.sync()
        if after_each:
            after_each()
    clock.sync()
    host, device = [], []
    for _ in range(repeats):
        if before_each:
            before_each()
        clock.sync()
        start = clock.now()
        if events:
            if ahead is not None:
                ahead_start.record(clock.stream)
                ahead()
            events[0].record(clock.stream)
        run()
        if events:
            events[1].record(clock.stream)
        clock.sync()
        seconds = clock.now() - start
        if ahead is not None:  # the queued work is not the call's (escaped_events)
            seconds -= clock.elapsed(ahead_start, events[0]) / 1e3
        host.append(seconds)
        if events:
            device.append(clock.elapsed(*events) / 1e3)
        if after_each:
            after_each()
        if budget is not None and len(host) >= least and sum(host) >= budget:
            break
    return Timings(host, device if events else None)


def best(samples: list[float]) -> float:
    """The fastest sample: the least disturbed by the host, the clock or other processes.

    Kernel time has a floor and noise only adds to it, so the minimum of several calls is
    the steadiest estimate (UIUC ECE408's staff likewise keep the fastest of several runs).
    """
    return min(samples)


def spin_up(seconds: float = 0.3) -> None:
    """Keep the GPU busy for a moment so that it reaches its working clock before timing:
    an idle GPU starts slow, and whoever is timed first would pay for it."""
    if not select().on_gpu:
        return
    import cupy

    clock = capture()
    # Copied from the host: cupy.ones would compile a fill kernel (NVRTC, ~1 s in a fresh
    # process), inside a timing window where every other job waits.
    x = cupy.asarray(np.ones((2048, 2048), dtype=np.float32))
    end = clock.now() + seconds
    while clock.now() < end:
        x @ x
        clock.sync()


def gemm_gflops(M: int, N: int, K: int, seconds: float) -> float:
    """GFLOP/s of a GEMM counted as 2*M*N*K floating-point operations."""
    return 2.0 * M * N * K / seconds / 1e9
