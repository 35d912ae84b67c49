"""The worker's end of the timing windows (grader/isolation/windows.py explains them).

A timed job wraps its timed calls in `Window.alone()`: it asks the grader for the GPU,
waits for the grant, checks that the GPU is idle (a frozen job's kernel may still be
running: its process stopped, the GPU did not), brings the GPU to its working clock,
and says when it is done. Without a window (the simulator, a GPU of its own, or a grader
that gives the whole job the GPU alone) only the clock is brought up.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from nnkit.timing import Clock, spin_up

ASK, GRANT, BUSY, DONE = b"T", b"G", b"B", b"D"  # as grader/isolation/windows.py
# A tiny kernel on an idle GPU returns in tens of microseconds; behind another process's
# kernel it waits for that kernel or the next time slice. A frozen job may have left many
# short kernels queued (a network's training runs ahead of the host by up to an epoch),
# which the GPU interleaves with the probes: each probe then waits for one of them only.
# So a probe counts as idle only within IDLE_SLACK times the fastest probe seen plus
# IDLE_MARGIN (a queue of 30-us kernels breaks the run), and never past
# IDLE_PROBE_SECONDS; the GPU is idle after IDLE_PROBES such probes in a row.
IDLE_PROBE_SECONDS = 2e-4
IDLE_SLACK, IDLE_MARGIN = 2.5, 2.5e-5
IDLE_PROBES = 10  # in a row
IDLE_WAIT = 1.0  # seconds of probing before the grader is told the GPU is busy
# After a drained grant (the others ended, or froze waiting for windows of their own),
# what they left queued may still run: probed for up to this long, after which the
# grader is told again and stops every other job on the GPU.
DRAINED_WAIT = 10.0
# A launch-bound timing (the network's epochs) runs at the pace of the CPU that launches.
# The GPU hosts may be virtual machines, where a CPU is as fast as what shares its physical
# core at the moment: on an H100 host a numba launch took 18 to 95 us depending on the CPU
# and the second, and one worker timed the solution's network 1.5x slower than others, in
# every epoch. So before each such timing the thread moves to the CPU on which
# CPU_PROBE_LAUNCHES tiny kernels and a sync return soonest (about 1 ms a CPU).
CPU_PROBE_LAUNCHES = 24


class NoWindow(RuntimeError):
    """The grader gave no window (too many asked for, or one held too long)."""


class Window:
    def __init__(self, fds: list[int] | None, clock: Clock) -> None:
        self.fds = tuple(fds) if fds else None  # (grants to read, requests to write)
        self.clock = clock
        self._probe: Any = None  # the probes' array while a launch-bound window is open
        self._cpus: set[int] = set()  # the thread's CPUs as the window opened

    @contextmanager
    def alone(self, quiet: Callable[[], AbstractContextManager] = nullcontext,
              launch_bound: bool = False) -> Iterator[None]:
        """The block runs with the GPU to this job (see the module's docstring); the
        window's own GPU work runs under quiet() (the library traps paused: it is not the
        submission's). `launch_bound` (on a GPU only): the block may call fastest_cpu()
        before each of its timings; the thread's CPUs are restored after it."""
        cpus = _cpus() if launch_bound else set()
        with _no_cycle_collection():
            with quiet():
                if self.fds is not None or launch_bound:
                    probe = probe_array()  # compiled before the window: the others wait
                if self.fds is not None:
                    self._say(ASK)
                    if not gpu_idle(self.clock, probe):
                        self._say(BUSY)  # the grader lets the other jobs end, then grants
                        if not gpu_idle(self.clock, probe, DRAINED_WAIT):
                            self._say(BUSY)  # it stops them all, then grants
                spin_up()
            self._probe, self._cpus = (probe if launch_bound else None), cpus
            try:
                yield
            finally:
                self._probe = None
                _pin(cpus)
                if self.fds is not None:
                    try:
                        os.write(self.fds[1], DONE)
                    except OSError:
                        pass

    def fastest_cpu(self) -> None:
        """Move this thread to the CPU that launches fastest now (CPU_PROBE_LAUNCHES); in
        a launch-bound window only, else nothing. The kit's choice, made the same way for
        the solution and a submission: it lets no one's timing pay for a slow CPU."""
        if self._probe is None or not self._cpus:
            return
        best, best_cpu = float("inf"), None
        for cpu in sorted(self._cpus):
            if not _pin({cpu}):
                return
            start = self.clock.now()
            for _ in range(CPU_PROBE_LAUNCHES):
                self._probe += 1
            self.clock.sync()
            took = self.clock.now() - start
            if took < best:
                best, best_cpu = took, cpu
        _pin({best_cpu})

    def _say(self, what: bytes) -> None:
        try:
            os.write(self.fds[1], what)
            answer = os.read(self.fds[0], 1)
        except OSError as err:
            raise NoWindow(f"the grader gave no timing window: {err}") from None
        if answer != GRANT:
            raise NoWindow("the grader gave no timing window (each timed job has a few, "
                           "each for a limited time)")


def _cpus() -> set[int]:
    """The CPUs this thread may run on; none where the system does not say (macOS)."""
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set()


def _pin(cpus: set[int]) -> bool:
    """Run this thread on `cpus` (nothing to do for none); False where it cannot."""
    if not cpus:
        return True
    try:
        os.sched_setaffinity(0, cpus)
    except (AttributeError, OSError):
        return False
    return True


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """No collection of Python's cycles in the block: a full one over numba's and CuPy's
    objects takes tens of milliseconds, a third of a timed epoch of the network, and would
    land in one job's timing and not in another's. Collected before it, outside the
    library traps' pause (what a collection runs, a dead generator's `finally`, meets
    the traps armed); the collector's state is restored after."""
    collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def probe_array() -> Any:
    """The probes' array, its kernel (CuPy's `+= 1`) compiled and loaded: NVRTC takes about
    a second the first time in a process, which must not be spent inside a window while
    every other job on the GPU stands frozen."""
    import cupy

    x = cupy.zeros(1, dtype=cupy.float32)
    x += 1
    return x


def gpu_idle(clock: Clock, x: Any, wait: float = IDLE_WAIT) -> bool:
    """Whether this process has the GPU to itself: IDLE_PROBES tiny kernels (on `x`, from
    probe_array) in a row each return about as fast as the fastest (see IDLE_SLACK),
    tried for `wait` seconds at most."""
    clock.sync()
    end, in_a_row, fastest = clock.now() + wait, 0, IDLE_PROBE_SECONDS
    while in_a_row < IDLE_PROBES:
        start = clock.now()
        if start > end:
            return False
        x += 1
        clock.sync()
        took = clock.now() - start
        fastest = min(fastest, took)
        idle = took < min(IDLE_PROBE_SECONDS, IDLE_SLACK * fastest + IDLE_MARGIN)
        in_a_row = in_a_row + 1 if idle else 0
    return True
