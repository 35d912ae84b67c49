"""One GPU per grading worker on a machine with several.

The grader hands each worker thread a GPU for the whole of one task; the worker process
it starts sees that GPU only (CUDA_VISIBLE_DEVICES). Tasks on different GPUs run at once
without disturbing each other's timings; tasks never share a GPU. Every GPU times its
own references (the solution and cuBLAS), so a submission's speed is always a ratio to
figures measured on the GPU it ran on.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TypeVar

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


class GpuSlots:
    """A pool of GPU ids; a thread holds one while it runs a task."""

    def __init__(self, ids: list[str]) -> None:
        if not ids:
            raise ValueError("GpuSlots needs at least one GPU id")
        self.ids = list(ids)
        self._free: queue.Queue[str] = queue.Queue()
        for gpu in self.ids:
            self._free.put(gpu)

    @contextmanager
    def hold(self) -> Iterator[str]:
        gpu = self._free.get()
        try:
            with pinned(gpu):
                yield gpu
        finally:
            self._free.put(gpu)


@contextmanager
def pinned(gpu: str) -> Iterator[str]:
    """Hold one given GPU outside any pool (the references, measured on every GPU before
    grading starts)."""
    _held.gpu = gpu
    try:
        yield gpu
    finally:
        _held.gpu = None


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
