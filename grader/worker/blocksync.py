"""A cheaper way for numba's CUDA simulator to run one thread block.

The simulator runs a Python thread per CUDA thread. Its BlockManager then polls them in a
loop: it walks every live thread (`is_alive()`, `syncthreads_blocked`) again and again,
holding the interpreter lock against the very threads it waits for, and releases a
barrier by setting one Event per thread. With 1,024 threads a block (a 32x32 tile), that
loop was most of the CPU time of grading a shared-memory GEMM in the simulator. And each
CUDA thread was a new operating-system thread: starting one costs ~100 us of CPU (its
stack, and two hand-overs of the interpreter lock), far more than the body of an
element-wise kernel; a Part 2 training run started some 70,000 of them.

`install()` keeps the simulator's model (a BlockThread object per CUDA thread, which is
what `threading.current_thread()` returns while it runs; a barrier that opens once every
live thread of the block has reached it, threads that have returned no longer counted;
an exception in one thread aborting the others at their next barrier, the first
exception raised to the launcher) and replaces how the threads are run and how they
wait:

- the CUDA threads of a block run on a pool of operating-system threads kept for the
  whole process. A pool thread takes the block's CUDA threads one after another, in
  order, each to its end; only when one stops at a barrier does another pool thread take
  over the rest. A kernel without barriers runs on one pool thread, and a block of 1,024
  threads with barriers uses 1,024 pool threads, started once, not once per block;
- the CUDA threads count themselves in and out under one lock, each waits at the barrier
  on a lock of its own, the last to arrive lets them through (each woken thread waking
  the next), and the launching thread sleeps on one lock until the block's last thread
  returns.

The order is the one the simulator's own threads mostly kept: each new thread ran to its
end or its first barrier before the next one started.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any


class _Block:
    """The barrier state of one running block (kept on its BlockManager)."""

    def __init__(self, threads: list[Any]) -> None:
        self.lock = threading.Lock()
        self.threads = threads
        self.queue = deque(threads)  # not started yet, in order
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


class _PoolThread(threading.Thread):
    """An operating-system thread that runs CUDA threads of the blocks it is given, one
    after another, standing in for each while it runs (`threading.current_thread()` is
    the CUDA thread's BlockThread, as when it had a thread of its own)."""

    def __init__(self, pool: _Pool) -> None:
        super().__init__(name="blocksync-pool", daemon=True)
        self.pool = pool
        self.work = threading.Lock()  # held while there is no block to work on
        self.work.acquire()
        self.block: _Block | None = None

    def give(self, block: _Block) -> None:
        self.block = block
        self.work.release()

    def run(self) -> None:
        while True:
            self.work.acquire()
            block, self.block = self.block, None
            if block is not None:
                self.drain(block)
            self.pool.rest(self)

    def drain(self, block: _Block) -> None:
        """Run the block's waiting CUDA threads, in order, until none is left."""
        me = threading.get_ident()
        while True:
            with block.lock:
                if not block.queue:
                    return
                cuda_thread = block.queue.popleft()
            with threading._active_limbo_lock:  # noqa: SLF001 - see the class docstring
                threading._active[me] = cuda_thread  # noqa: SLF001
            try:
                cuda_thread.run()
            except BaseException:  # noqa: BLE001 - as a thread of its own would end
                cuda_thread._invoke_excepthook(cuda_thread)  # noqa: SLF001
            finally:
                with threading._active_limbo_lock:  # noqa: SLF001
                    threading._active[me] = self  # noqa: SLF001


class _Pool:
    """The pool threads that have no block to work on (kept for the whole process)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[_PoolThread] = []

    def dispatch(self, block: _Block) -> None:
        """Have a pool thread run the block's waiting CUDA threads: an idle one, else a
        new one (raises when none can be started: the job's thread limit, say)."""
        with self.lock:
            worker = self.idle.pop() if self.idle else None
        if worker is None:
            worker = _PoolThread(self)
            worker.start()
        worker.give(block)

    def rest(self, worker: _PoolThread) -> None:
        with self.lock:
            self.idle.append(worker)


_pool = _Pool()


def hand_over(block: Any) -> None:
    """A CUDA thread of `block` is about to wait for others of its block elsewhere than at
    the barrier (a warp exchange, grader/worker/warps.py): its pool thread waits with it,
    so another pool thread runs the block's threads not started yet."""
    if block.queue:
        _pool.dispatch(block)

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
    Dim3 = getattr(kernel, "Dim3", None)  # noqa: N806 - the simulator's class
    if manager is None or thread is None or Dim3 is None or not hasattr(thread, "syncthreads"):
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
        if self.abort:
            raise RuntimeError("abort flag set on syncthreads call")
        if block.queue:
            # This thread's pool thread waits here: another runs the threads not
            # started yet (the barrier cannot open before they arrive: they are live).
            _pool.dispatch(block)
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

    def cuda_threads(thread: type, target: Any, manager: Any, grid_point: tuple[int, ...],
                     np: Any) -> list[Any]:
        """The block's BlockThreads. One is built as the simulator builds it; the others
        are copies of it with their own thread index: a BlockThread here is never started
        as a thread of its own, so the start-up state that threading.Thread.__init__
        builds (an Event, a Condition, locks: ~20 us a thread) may as well be shared."""
        first = thread(target, manager, grid_point, (0, 0, 0), manager._debug)
        state = first.__dict__
        bx, by, _ = manager._block_dim
        threads = []
        for point in np.ndindex(*manager._block_dim):
            t = thread.__new__(thread)
            t.__dict__.update(state)
            t.threadIdx = Dim3(*point)
            t.thread_id = point[0] + bx * (point[1] + by * point[2])
            t._blocksync_gate = gate = threading.Lock()
            gate.acquire()
            t._blocksync_next = None
            threads.append(t)
        return threads

    def run(self: Any, grid_point: tuple[int, ...], *args: Any) -> None:
        import numpy as np

        def target() -> None:
            self._f(*args)

        threads = cuda_threads(thread, target, self, grid_point, np)
        block = self._blocksync = _Block(threads)
        _pool.dispatch(block)  # (raises, with nothing started, at the job's thread limit)
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
