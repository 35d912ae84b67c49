"""A cheaper way for numba's CUDA simulator to run one thread block.

The simulator runs a Python thread per CUDA thread. Its BlockManager then polls them in a
loop: it walks every live thread (`is_alive()`, `syncthreads_blocked`) again and again,
holding the interpreter lock against the very threads it waits for, and releases a
barrier by setting one Event per thread. With 1,024 threads a block (a 32x32 tile), that
loop was most of the CPU time of grading a shared-memory GEMM in the simulator.

`install()` keeps the simulator's model (a fresh thread per CUDA thread, a barrier that
opens once every live thread of the block has reached it, threads that have returned no
longer counted, an exception in one thread aborting the others at their next barrier,
the first exception raised to the launcher) and replaces only the waiting: the threads
count themselves in and out under one lock, each waits at the barrier on a lock of its
own, the last to arrive lets them through (each woken thread waking the next), and the
launching thread sleeps on one lock until the block's last thread returns.
"""

from __future__ import annotations

import threading
from typing import Any


class _Block:
    """The barrier state of one running block (kept on its BlockManager)."""

    def __init__(self, threads: list[Any]) -> None:
        self.lock = threading.Lock()
        self.threads = threads
        self.live = len(threads)  # threads that have not returned
        self.waiting: list[Any] = []  # of those, the ones held at the barrier
        self.failed: Any = None  # the first thread that raised
        self.done = threading.Lock()  # held until the last thread has returned
        self.done.acquire()

    def release_if_all_wait(self) -> list[Any]:
        """With lock held: the threads to let through when every live thread waits."""
        if self.waiting and len(self.waiting) == self.live:
            released, self.waiting = self.waiting, []
            return released
        return []


# (class, attribute, the simulator's own function) for uninstall(), once installed.
_originals: list[tuple[type, str, Any]] = []


def install() -> bool:
    """Give the simulator's BlockManager and BlockThread the waiting above (simulator
    only; False, leaving it unchanged, if its classes are not the ones this expects)."""
    try:
        from numba.cuda.simulator import kernel
    except ImportError:
        return False
    manager, thread = getattr(kernel, "BlockManager", None), getattr(kernel, "BlockThread", None)
    if manager is None or thread is None or not hasattr(thread, "syncthreads"):
        return False
    if _originals:
        return True
    original_thread_run = thread.run

    # Each thread waits at a barrier on a lock of its own (held while it runs). The thread
    # that completes the barrier wakes the first waiter, and each woken thread wakes the
    # next before it goes on: a thousand wake-ups are spread over the threads instead of
    # queueing behind one thread that holds the interpreter lock.
    def wake_chain(released: list[Any], exclude: Any = None) -> None:
        chain = [t for t in released if t is not exclude]
        if not chain:
            return
        for this, following in zip(chain, chain[1:] + [None], strict=True):
            this._blocksync_next = following
        chain[0]._blocksync_gate.release()

    def thread_run(self: Any) -> None:
        block: _Block = self._manager._blocksync
        try:
            original_thread_run(self)  # sets self.exception when the kernel raised
        finally:
            with block.lock:
                block.live -= 1
                if self.exception is not None and block.failed is None:
                    block.failed = self
                    for other in block.threads:
                        other.abort = True
                    released, block.waiting = block.waiting, []
                else:
                    released = block.release_if_all_wait()
                last = block.live == 0
            if last:
                block.done.release()
            wake_chain(released)

    def syncthreads(self: Any) -> None:
        block: _Block = self._manager._blocksync
        with block.lock:
            if self.abort:
                raise RuntimeError("abort flag set on syncthreads call")
            block.waiting.append(self)
            released = block.release_if_all_wait()
        if released:
            wake_chain(released, exclude=self)
        else:
            self._blocksync_gate.acquire()
            following, self._blocksync_next = self._blocksync_next, None
            if following is not None:
                following._blocksync_gate.release()
        if self.abort:
            raise RuntimeError("abort flag set on syncthreads clear")

    def run(self: Any, grid_point: tuple[int, ...], *args: Any) -> None:
        import numpy as np

        def target() -> None:
            self._f(*args)

        threads = [thread(target, self, grid_point, point, self._debug)
                   for point in np.ndindex(*self._block_dim)]
        for t in threads:
            t._blocksync_gate = threading.Lock()
            t._blocksync_gate.acquire()
            t._blocksync_next = None
        block = self._blocksync = _Block(threads)
        started = []
        try:
            for t in threads:
                t.start()
                started.append(t)
        except BaseException:
            # (the job's thread limit, say): stop the started ones at their next barrier
            with block.lock:
                for t in threads:
                    t.abort = True
                released, block.waiting = block.waiting, []
            wake_chain(released)
            raise
        block.done.acquire()  # one wait for the whole block, not a join per thread
        failed = block.failed
        if failed is not None:
            raise failed.exception[0].with_traceback(failed.exception[1])

    for owner, name, new in ((thread, "run", thread_run), (thread, "syncthreads", syncthreads),
                             (manager, "run", run)):
        _originals.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, new)
    return True


def uninstall() -> None:
    """Give the simulator its own functions back (for tests; the worker never does)."""
    while _originals:
        owner, name, original = _originals.pop()
        setattr(owner, name, original)
