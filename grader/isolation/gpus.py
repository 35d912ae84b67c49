"""The GPUs of a grading run, shared by its worker threads.

The grader hands each worker thread a GPU for the whole of one task; the worker process
it starts sees that GPU only (CUDA_VISIBLE_DEVICES). Up to `per_gpu` tasks share a GPU:
most jobs (correctness cases, the network's training, MPI) spend their time starting
Python, importing numba and compiling, and disturb nothing that is measured. A timed job
holds its GPU alone (`exclusive`): it waits until the jobs running there have ended, and
none starts there until it is done, so timings are taken on an idle GPU as before. Where
the jobs have cgroups that can be frozen (v2), a timed job instead asks for the GPU only
around its timed calls (a timing window, grader/isolation/windows.py): the other jobs on
its GPU are frozen where they stand for that while, their time limits stretched by as
much, and go on afterwards; a job that cannot be frozen is waited for as before. Every
GPU times its own references (the solution and cuBLAS), so a submission's speed is
always a ratio to figures measured on the GPU it ran on.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol, TypeVar

from nnkit.backend import device_count

T = TypeVar("T")
_held = threading.local()


def visible_ids(count: int | None = None) -> list[str]:
    """The ids to give workers in CUDA_VISIBLE_DEVICES: those the grader was itself given
    (an instructor's CUDA_VISIBLE_DEVICES, or a scheduler's), else 0 .. count-1."""
    count = device_count()[0] if count is None else count
    given = [i.strip() for i in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
             if i.strip()]
    return given[:count] if given else [str(i) for i in range(count)]


def local_share(ids: list[str], local_rank: int, local_size: int) -> list[str]:
    """The GPUs of one of local_size grading processes on a machine: every local_size-th
    one from local_rank; a GPU of its own, shared with other ranks only when there are
    more ranks than GPUs (their timings then disturb each other: avoid it)."""
    if not ids:
        return []
    mine = ids[local_rank::local_size]
    return mine or [ids[local_rank % len(ids)]]


class Freezable(Protocol):
    """What a timing window needs of a job's cgroup (grader/isolation/cgroups.JobCgroup)."""

    def freeze(self, on: bool) -> bool: ...

    def frozen(self) -> bool: ...


FREEZE_WAIT = 2.0  # seconds for a job's processes to stop once frozen; else it is drained
# The longest a drained window waits for the other jobs to end (or to ask for windows of
# their own): past it, those still running are stopped (displaced: runner.run_worker runs
# each again) and the window opens; once a timed job has had others stopped, they are
# frozen instead and the timed job is marked disturbed (Gate._stop). A job that hangs must
# not stop its whole GPU until its time limit, nor may one left running with its kernels
# queued go unnoticed under a timing.
DRAIN_SECONDS = 30.0


@dataclass(eq=False)
class RunningJob:
    """A job running on a shared GPU, as a timing window sees it."""

    cgroup: Freezable | None  # None: it cannot be frozen, and a window waits for its end
    paused: float = 0.0  # seconds not counted against its time limit (frozen, or waiting
    # for its own window)
    frozen_at: float | None = None  # when the window it is frozen for began
    freezes: int = 0  # how often another job's window froze it
    stop: Callable[[], None] | None = None  # kills every process of the job (its runner's)
    displaced: bool = False  # stopped for another job's window: to be run again
    stops_used: bool = False  # its windows have stopped other jobs once: the most they may
    # (each stopped job runs again, and a submission can say "busy" at will)
    disturbed: bool = False  # a window of its own opened on a GPU that may still have been
    # busy (others frozen with work queued, once its stop was used): to be run again, alone
    asking: bool = False  # waiting for a window of its own: its worker is blocked on the
    # grant, so a drained window need not wait for its end (it would wait for ever)
    waiting_since: float | None = None  # when its window server began waiting for the
    # GPU (its own window, or the others to be stopped), until that wait is credited

    def paused_now(self) -> float:
        """paused, the current freeze or wait included (read by the thread timing the
        job). A freeze within a wait is counted twice until the wait is credited
        (windows.WindowServer._credited), which leaves only the job's own limit longer."""
        since = self.waiting_since if self.waiting_since is not None else self.frozen_at
        return self.paused + (time.monotonic() - since if since is not None else 0.0)


class Gate:
    """A readers-writer lock for one GPU: shared holders (at most `limit`) or one
    exclusive holder. Exclusive holders go before new shared ones once `batch` of them
    wait (or when no shared holder is left): each turn costs the GPU the time its running
    jobs take to end, so timed jobs are let through several at a time."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.batch = max(1, limit // 2)
        self.shared = 0
        self.exclusive = False
        self.waiting = 0  # exclusive holders waiting
        self.turn = False  # the waiting exclusive holders' turn: shared ones wait
        self.cond = threading.Condition()
        self.running: set[RunningJob] = set()  # the jobs started on this GPU, not yet ended
        self.window = False  # a timed job's window is open: no job starts until it closes

    def load(self) -> int:
        return self.shared + self.waiting + (self.limit if self.exclusive or self.turn else 0)

    def acquire_shared(self) -> None:
        with self.cond:
            self.cond.wait_for(lambda: not self.exclusive and not self.turn
                               and self.shared < self.limit)
            self.shared += 1

    def release_shared(self) -> None:
        with self.cond:
            self.shared -= 1
            self.cond.notify_all()

    def acquire_exclusive(self) -> None:
        with self.cond:
            self.waiting += 1
            if self.waiting >= self.batch:
                self.turn = True
            self.cond.wait_for(lambda: not self.exclusive and not self.window
                               and self.shared == 0)
            self.waiting -= 1
            self.exclusive = True

    def release_exclusive(self) -> None:
        with self.cond:
            self.exclusive = False
            if not self.waiting:
                self.turn = False  # the batch is through: shared holders again
            self.cond.notify_all()

    # timing windows ----------------------------------------------------------------------

    def start(self, job: RunningJob) -> None:
        """A job is about to start on this GPU (never while a window is open)."""
        with self.cond:
            self.cond.wait_for(lambda: not self.window)
            self.running.add(job)

    def end(self, job: RunningJob) -> None:
        with self.cond:
            self.running.discard(job)
            self.cond.notify_all()

    def open_window(self, me: RunningJob, drain: bool = False) -> bool:
        """Give `me` the GPU to itself: every other job on it frozen where it stands, or,
        for a job that cannot be (or with drain), ended first. No job starts meanwhile.
        False, with no window opened, when `me` has ended while it waited."""
        with self.cond:
            me.asking = True
            self.cond.notify_all()  # a drained window waits for the others to end or ask
            self.cond.wait_for(lambda: not self.window and not self.exclusive)
            me.asking = False
            if me not in self.running:  # stopped or killed while it waited
                self.cond.notify_all()
                return False
            self.window = True
            others = [j for j in self.running if j is not me]
        now = time.monotonic()
        stuck = not self._freeze([] if drain else others, now) or drain
        deadline = now + FREEZE_WAIT
        while not stuck and not all(j.cgroup.frozen() for j in others):
            if time.monotonic() > deadline:
                stuck = True
                break
            time.sleep(0.002)
        if stuck:  # let them go on to their end: the GPU is mine once they are gone
            self._thaw(others)
            # A timed job that asks for its own window meanwhile never ends: its worker
            # waits for the grant, which waits for this window. Once only such jobs are
            # left they are frozen where they wait (blocked, launching nothing) instead;
            # jobs still running after DRAIN_SECONDS (one hung would stop the GPU) are
            # stopped, once per job whose windows ask it, and frozen after that.
            with self.cond:
                self.cond.wait_for(lambda: all(j is me or j.asking for j in self.running),
                                   timeout=DRAIN_SECONDS)
                left = [j for j in self.running if j is not me]
                running = [j for j in left if not j.asking]
            if running:
                self._stop(me, running)
            # (asking, or not stopped)
            self._freeze([j for j in left if not j.displaced], time.monotonic())
        return True

    @staticmethod
    def _freeze(jobs: list[RunningJob], now: float) -> bool:
        """Freeze `jobs` for a window that began `now`; False if one of them cannot be."""
        every = True
        for job in jobs:
            job.frozen_at = now
            job.freezes += 1
            if job.cgroup is None or not job.cgroup.freeze(True):
                every = False
        return every

    def displace_others(self, me: RunningJob) -> None:
        """Stop every other job on the GPU (frozen ones included) and wait for their end:
        the last resort of a window whose GPU stays busy once drained."""
        with self.cond:
            others = [j for j in self.running if j is not me]
        self._stop(me, others)

    def _stop(self, me: RunningJob, jobs: list[RunningJob]) -> None:
        """Stop `jobs` for `me`'s window (each runs again), if `me` has not already had
        others stopped; else leave them as they are and mark `me` disturbed: its timing
        may have met their queued work, and it runs again alone."""
        if me.stops_used:
            me.disturbed = True
            return
        me.stops_used = True
        with self.cond:  # (a job that has just ended is left alone)
            targets = [j for j in jobs if j in self.running and j.stop is not None]
            for job in targets:
                job.displaced = True
        for job in targets:
            job.stop()
        with self.cond:
            self.cond.wait_for(lambda: not any(j in self.running for j in targets),
                               timeout=DRAIN_SECONDS)

    def close_window(self) -> None:
        with self.cond:
            others = list(self.running)
        self._thaw(others)
        with self.cond:
            self.window = False
            self.cond.notify_all()

    @staticmethod
    def _thaw(jobs: list[RunningJob]) -> None:
        now = time.monotonic()
        for job in jobs:
            if job.frozen_at is not None:
                if job.cgroup is not None:
                    job.cgroup.freeze(False)
                job.paused += now - job.frozen_at
                job.frozen_at = None


class GpuSlots:
    """A pool of GPU ids, each shared by up to per_gpu threads at a time; a thread holds
    one while it runs a task."""

    def __init__(self, ids: list[str], per_gpu: int = 1) -> None:
        if not ids:
            raise ValueError("GpuSlots needs at least one GPU id")
        if per_gpu < 1:
            raise ValueError("per_gpu must be at least 1")
        self.ids = list(ids)
        self.per_gpu = per_gpu
        self._gates = {gpu: Gate(per_gpu) for gpu in self.ids}
        self._choose = threading.Lock()

    @property
    def threads(self) -> int:
        """How many tasks can run at once."""
        return len(self.ids) * self.per_gpu

    @contextmanager
    def hold(self) -> Iterator[str]:
        with self._choose:  # the least busy GPU; then wait for room on it
            gpu = min(self.ids, key=lambda g: self._gates[g].load())
        gate = self._gates[gpu]
        gate.acquire_shared()
        try:
            with pinned(gpu, self if self.per_gpu > 1 else None):
                yield gpu
        finally:
            gate.release_shared()

    def gate(self, gpu: str) -> Gate:
        return self._gates[gpu]

    @contextmanager
    def alone(self, gpu: str) -> Iterator[None]:
        """Trade this thread's shared hold of `gpu` for the only hold, and back."""
        gate = self._gates[gpu]
        gate.release_shared()
        try:
            gate.acquire_exclusive()
            try:
                yield
            finally:
                gate.release_exclusive()
        finally:
            gate.acquire_shared()


@contextmanager
def pinned(gpu: str, slots: GpuSlots | None = None) -> Iterator[str]:
    """Hold one given GPU outside any pool (the references, measured on every GPU before
    grading starts), or for a pool that shares it (slots)."""
    _held.gpu, _held.slots = gpu, slots
    try:
        yield gpu
    finally:
        _held.gpu, _held.slots = None, None


@contextmanager
def exclusive() -> Iterator[None]:
    """Run the block with this thread's GPU to itself (a timed job). Without a shared
    pool the GPU is this thread's alone already; without a GPU there is nothing to do."""
    gpu, slots = current(), getattr(_held, "slots", None)
    if gpu is None or slots is None:
        yield
        return
    with slots.alone(gpu):
        yield


@contextmanager
def running(job: RunningJob) -> Iterator[RunningJob]:
    """A job running on this thread's GPU for the length of the block (started once no
    timing window is open): known to timing windows, which freeze it or wait for it."""
    gate = current_gate()
    if gate is None:
        yield job
        return
    gate.start(job)
    try:
        yield job
    finally:
        gate.end(job)


def current_gate() -> Gate | None:
    """The gate of this thread's GPU where it is shared with other jobs, else None."""
    gpu, slots = current(), getattr(_held, "slots", None)
    return None if gpu is None or slots is None else slots.gate(gpu)


def current() -> str | None:
    """The GPU this thread holds, or None (simulator mode, or the grader's own thread)."""
    return getattr(_held, "gpu", None)


def worker_env() -> dict[str, str]:
    """What run_worker adds to a worker's environment: the held GPU, if any."""
    gpu = current()
    return {} if gpu is None else {"CUDA_VISIBLE_DEVICES": gpu}


def for_current(per_gpu: Mapping[str, T] | None) -> T | None:
    """The entry of per_gpu for the GPU this thread holds (the only one, when no GPU is
    held: a single-GPU run)."""
    if not per_gpu:
        return None
    gpu = current()
    if gpu is None:
        return next(iter(per_gpu.values())) if len(per_gpu) == 1 else None
    return per_gpu.get(gpu)
