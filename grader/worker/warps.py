"""Warp-level intrinsics for numba's CUDA simulator, which has none.

numba compiles `cuda.shfl_down_sync`, `cuda.syncwarp`, `cuda.ballot_sync` and the other
warp intrinsics for a GPU, but its simulator's `cuda` module lacks them: a correct kernel
that reduces with warp shuffles (a common way to write column sums or a softmax) raised
AttributeError in the simulator and lost the points a GPU would give it.

`install()` adds them. The lanes of a warp (threads whose linear index in the block
shares index // 32) meet at an exchange: each posts its value, and once every lane named
by the mask that is still running has posted, all of them read the values posted. A lane
that has returned from the kernel no longer counts, as on a GPU where it has left the
warp. What a lane reads from a lane that took no part (outside the mask, returned, or
past the end of a partial warp) is its own value, as CUDA leaves it undefined. Requires
grader/worker/blocksync.py (installed first), whose block state lists the block's threads
and lets a lane wait while the others run.
"""

from __future__ import annotations

import threading
from typing import Any

from grader.worker import blocksync

WARP = 32
FULL = 0xFFFFFFFF


class _Exchange:
    """One warp's meeting point for one mask, in one running block."""

    def __init__(self, lanes: list[Any], mask: int):
        self.lanes = [t for t in lanes if mask >> (t.thread_id % WARP) & 1]
        self.posted: dict[int, Any] = {}
        self.generation = 0
        self.results: dict[int, dict[int, Any]] = {}

    def running(self) -> int:
        return sum(1 for t in self.lanes if not getattr(t, "_warps_done", False))

    def complete_if_all_posted(self) -> None:
        """Publish this generation once every running lane has posted (a block's threads
        run one at a time: no lock)."""
        if self.posted and len(self.posted) >= self.running():
            # Every lane has read the previous generation before posting to this one.
            self.results.pop(self.generation - 1, None)
            self.results[self.generation] = self.posted
            self.posted = {}
            self.generation += 1


_registry_lock = threading.Lock()
_originals: list[tuple[type, str, Any]] = []  # what install() replaced, for uninstall()


def _exchange(thread: Any, mask: int) -> _Exchange:
    block = thread._manager._blocksync
    warp = thread.thread_id // WARP
    with _registry_lock:
        table = block.__dict__.setdefault("_warps", {})
        key = (warp, mask & FULL)
        if key not in table:
            lanes = [t for t in block.threads if t.thread_id // WARP == warp]
            table[key] = _Exchange(lanes, mask & FULL)
        return table[key]


def _meet(mask: int, value: Any) -> dict[int, Any]:
    """Post this lane's value; return every participating lane's value, by lane."""
    thread = threading.current_thread()
    point = _exchange(thread, mask)
    generation = point.generation
    point.posted[thread.thread_id % WARP] = value
    point.complete_if_all_posted()
    while point.generation == generation:
        # The other lanes run meanwhile (blocksync); one that returns from the kernel
        # leaves the warp, which may complete the exchange (see install()).
        blocksync.wait_until(thread, lambda: point.generation != generation)
        if thread.abort:
            raise RuntimeError("abort flag set at a warp intrinsic")
    return point.results[generation]


def _lane() -> int:
    return threading.current_thread().thread_id % WARP


def _from(mask: int, value: Any, source: int) -> Any:
    values = _meet(mask, value)
    return values.get(source, value) if 0 <= source < WARP else value


def shfl_sync(self: Any, mask: int, value: Any, src_lane: int) -> Any:
    return _from(mask, value, int(src_lane) % WARP)


def shfl_up_sync(self: Any, mask: int, value: Any, delta: int) -> Any:
    return _from(mask, value, _lane() - int(delta))


def shfl_down_sync(self: Any, mask: int, value: Any, delta: int) -> Any:
    return _from(mask, value, _lane() + int(delta))


def shfl_xor_sync(self: Any, mask: int, value: Any, lane_mask: int) -> Any:
    return _from(mask, value, _lane() ^ int(lane_mask))


def syncwarp(self: Any, mask: int = FULL) -> None:
    _meet(mask, None)


def all_sync(self: Any, mask: int, predicate: Any) -> bool:
    return all(bool(p) for p in _meet(mask, predicate).values())


def any_sync(self: Any, mask: int, predicate: Any) -> bool:
    return any(bool(p) for p in _meet(mask, predicate).values())


def eq_sync(self: Any, mask: int, value: Any) -> bool:
    return len(set(_meet(mask, value).values())) == 1


def ballot_sync(self: Any, mask: int, predicate: Any) -> int:
    return sum(1 << lane for lane, p in _meet(mask, predicate).items() if p)


def activemask(self: Any) -> int:
    thread = threading.current_thread()
    point = _exchange(thread, FULL)
    return sum(1 << (t.thread_id % WARP) for t in point.lanes
               if not getattr(t, "_warps_done", False))


def lanemask_lt(self: Any) -> int:
    return (1 << _lane()) - 1


INTRINSICS = {f.__name__: f for f in (shfl_sync, shfl_up_sync, shfl_down_sync, shfl_xor_sync,
                                      syncwarp, all_sync, any_sync, eq_sync, ballot_sync,
                                      activemask, lanemask_lt)}


def install() -> bool:
    """Give the simulator's `cuda` module the warp intrinsics (simulator only, after
    blocksync.install(); False, changing nothing, without it or if the classes are not as
    expected)."""
    if not blocksync.installed():
        return False
    try:
        from numba.cuda.simulator import kernel, kernelapi
    except ImportError:
        return False
    module, thread = getattr(kernelapi, "FakeCUDAModule", None), getattr(kernel,
                                                                         "BlockThread", None)
    if module is None or thread is None or getattr(thread.run, "_warps", False):
        return module is not None and thread is not None
    previous_run = thread.run

    def run(self: Any) -> None:
        try:
            previous_run(self)
        finally:
            # The lane has left its warp: exchanges no longer wait for it.
            self._warps_done = True
            block = getattr(self._manager, "_blocksync", None)
            for point in list(getattr(block, "_warps", {}).values()):
                point.complete_if_all_posted()

    run._warps = True  # type: ignore[attr-defined]
    _originals.append((thread, "run", thread.__dict__.get("run", previous_run)))
    thread.run = run
    for name, function in INTRINSICS.items():
        if not hasattr(module, name):
            _originals.append((module, name, None))
            setattr(module, name, function)
    return True


def uninstall() -> None:
    """Take the intrinsics away again (for tests; the worker never does)."""
    while _originals:
        owner, name, original = _originals.pop()
        if original is None:
            delattr(owner, name)
        else:
            setattr(owner, name, original)
