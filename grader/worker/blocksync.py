"""A cheaper way for numba's CUDA simulator to run one thread block.

The simulator runs an operating-system thread per CUDA thread, and its BlockManager polls
them in a loop, holding the interpreter lock against the very threads it waits for. Each
CUDA thread is then a thread start (~100 us of CPU: far more than the body of an
element-wise kernel; a Part 2 training run started some 70,000 of them), and each thread
passing a barrier costs two hand-overs of the interpreter lock between operating-system
threads (~20 us: a 32x32 block crossing a barrier, 20 ms).

`install()` keeps the simulator's model (a BlockThread object per CUDA thread, which is
what `threading.current_thread()` returns while it runs; a barrier that opens once every
live thread of the block has reached it, threads that have returned no longer counted;
an exception in one thread aborting the others at their next barrier, the first
exception raised to the launcher) and replaces how the threads are run and how they
wait: each CUDA thread is a greenlet (a coroutine with a stack of its own, from the
`greenlet` package), and the launching thread runs a block's greenlets itself, one at a
time, switching between them where they wait (~1 us a switch):

- in order, each to its end or to its first wait (a barrier, or a warp exchange of
  grader/worker/warps.py), which is the order the simulator's own threads mostly kept;
- once none can run, the threads whose warp exchange has completed go on, in the order
  they stopped; else, when every live thread waits at the barrier, all of them, in the
  order they arrived;
- when neither can happen (threads at the barrier while others wait at a warp exchange
  that the first ones will never join), the block has deadlocked: the launch fails with
  an error saying so, where a GPU would hang;
- after each atomic operation a thread lets the block's other threads run first: a
  thread that waits in a loop for a flag another thread of its block sets atomically
  (which a GPU runs, each warp scheduled on its own) would otherwise spin for ever, the
  other never running (red team, round six).

greenlet is a dependency of the kit (pyproject.toml). Without it, install() returns False
and the simulator keeps its own threads, correct but slow, and without warp intrinsics
(warps.install() needs this module).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

try:
    from greenlet import greenlet
except ImportError:  # install() says so by returning False
    greenlet = None


class Deadlock(RuntimeError):
    """Every live thread of a block waits, and no wait can end."""


class _Block:
    """The scheduling state of one running block (kept on its BlockManager)."""

    def __init__(self, threads: list[Any], scheduler: Any) -> None:
        self.threads = threads
        self.scheduler = scheduler  # the launching thread's greenlet, which runs the others
        self.ready = deque(threads)  # to run next: not started yet, or released, in order
        self.live = len(threads)  # threads that have not returned
        self.barrier: list[Any] = []  # live threads waiting at syncthreads, in order
        self.parked: list[tuple[Any, Callable[[], bool]]] = []  # waiting for a condition
        self.failed: Any = None  # the first thread that raised
        self.deadlock: Deadlock | None = None

    def run(self, me: int) -> None:
        """Run the block's threads until every one has returned."""
        active = threading._active  # noqa: SLF001 - see the module docstring
        while True:
            while self.ready:
                cuda_thread = self.ready.popleft()
                task = cuda_thread._blocksync_greenlet
                if task is None:
                    task = cuda_thread._blocksync_greenlet = greenlet(cuda_thread.run)
                active[me] = cuda_thread
                try:
                    task.switch()
                except BaseException:  # noqa: BLE001 - as a thread of its own would end
                    # (BlockThread.run keeps an Exception for the launcher; SystemExit and
                    # the like end only the CUDA thread, reported as a thread reports them)
                    cuda_thread._invoke_excepthook(cuda_thread)  # noqa: SLF001
            if self.live == 0:
                return
            woken = [t for t, done in self.parked if done()]
            if woken:
                self.parked = [(t, done) for t, done in self.parked if t not in woken]
                self.ready.extend(woken)
            elif len(self.barrier) == self.live:
                self.ready.extend(self.barrier)
                self.barrier = []
            else:
                self.deadlock = Deadlock(
                    f"the block deadlocked: {len(self.barrier)} of its threads wait at "
                    f"syncthreads() while {len(self.parked)} wait at a warp intrinsic (a "
                    "shuffle, vote or syncwarp) that the others never reach; a GPU hangs")
                self.abort_all()

    def abort_all(self) -> None:
        """Let every waiting thread go on with its abort flag set: each raises at once."""
        for other in self.threads:
            other.abort = True
        self.ready.extend(self.barrier)
        self.ready.extend(t for t, _ in self.parked)
        self.barrier, self.parked = [], []

    def wait(self, cuda_thread: Any, done: Callable[[], bool] | None) -> None:
        """Stop the running thread until `done()` (or, with None, the barrier opens)."""
        if done is None:
            self.barrier.append(cuda_thread)
        else:
            self.parked.append((cuda_thread, done))
        self.scheduler.switch()


def _yield_after(atomic: Callable[..., Any]) -> Callable[..., Any]:
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        old = atomic(self, *args, **kwargs)
        cuda_thread = threading.current_thread()
        block = getattr(getattr(cuda_thread, "_manager", None), "_blocksync", None)
        if isinstance(block, _Block):
            block.ready.append(cuda_thread)
            block.scheduler.switch()
        return old
    return run


# The simulator's atomics (FakeCUDAAtomic's methods).
ATOMICS = ("add", "sub", "and_", "or_", "xor", "inc", "dec", "exch", "max", "min", "nanmax",
           "nanmin", "compare_and_swap", "cas")


def wait_until(cuda_thread: Any, done: Callable[[], bool]) -> None:
    """Stop the running CUDA thread until `done()` holds; other threads of its block run
    meanwhile (a warp exchange waiting for its other lanes, grader/worker/warps.py)."""
    cuda_thread._manager._blocksync.wait(cuda_thread, done)


# (class, attribute, the simulator's own function) for uninstall(), once installed.
_originals: list[tuple[type, str, Any]] = []


def install() -> bool:
    """Give the simulator's BlockManager and BlockThread the scheduling above (simulator
    only; False, leaving it unchanged, without greenlet or if the simulator's classes are
    not the ones this expects)."""
    if greenlet is None:
        return False
    try:
        from numba.cuda.simulator import kernel, kernelapi
    except ImportError:
        return False
    manager, thread = getattr(kernel, "BlockManager", None), getattr(kernel, "BlockThread", None)
    Dim3 = getattr(kernel, "Dim3", None)  # noqa: N806 - the simulator's class
    if manager is None or thread is None or Dim3 is None or not hasattr(thread, "syncthreads"):
        return False
    if _originals:
        return True
    original_thread_run = thread.run

    def thread_run(self: Any) -> None:
        block: _Block = self._manager._blocksync
        try:
            original_thread_run(self)  # sets self.exception when the kernel raised
        finally:
            block.live -= 1
            if self.exception is not None and block.failed is None:
                block.failed = self
                block.abort_all()

    def syncthreads(self: Any) -> None:
        if self.abort:
            raise RuntimeError("abort flag set on syncthreads call")
        self._manager._blocksync.wait(self, None)
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
            t._blocksync_greenlet = None
            threads.append(t)
        return threads

    def run(self: Any, grid_point: tuple[int, ...], *args: Any) -> None:
        import numpy as np

        def target() -> None:
            self._f(*args)

        threads = cuda_threads(thread, target, self, grid_point, np)
        block = self._blocksync = _Block(threads, greenlet.getcurrent())
        me = threading.get_ident()
        active = threading._active  # noqa: SLF001 - see the module docstring
        launcher = active.get(me)
        try:
            block.run(me)
        finally:
            if launcher is not None:
                active[me] = launcher
        failed = block.failed
        if block.deadlock is not None:
            raise block.deadlock
        if failed is not None:
            raise failed.exception[0].with_traceback(failed.exception[1])

    replaced = [(thread, "run", thread_run), (thread, "syncthreads", syncthreads),
                (manager, "run", run)]
    atomics = getattr(kernelapi, "FakeCUDAAtomic", None)
    replaced += [(atomics, name, _yield_after(atomics.__dict__[name])) for name in ATOMICS
                 if atomics is not None and name in atomics.__dict__]
    for owner, name, new in replaced:
        _originals.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, new)
    return True


def installed() -> bool:
    return bool(_originals)


def uninstall() -> None:
    """Give the simulator its own functions back (for tests; the worker never does)."""
    while _originals:
        owner, name, original = _originals.pop()
        setattr(owner, name, original)
