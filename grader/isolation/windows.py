"""Timing windows: a timed job asks for its GPU alone only around its timed calls.

A timed job (Part 1's kernels, Part 2's training speed) spends most of its time starting
Python, importing numba, compiling and checking, none of which needs an idle GPU. So
instead of draining the GPU for the whole job, the grader hands the worker two pipe ends
and serves its requests, one byte each:

    worker -> grader  T   "I am about to time: give me the GPU"
    grader -> worker  G   "the other jobs on it are frozen (or gone)"
    worker -> grader  B   "it is still busy" (a frozen job's kernel still runs):
                          the grader lets the others go on to their end (for at most
                          gpus.DRAIN_SECONDS, then stops those left), then G again
    worker -> grader  B   (a second time) "still busy": the grader stops every other
                          job on the GPU, then G; a stopped job runs again
                          (runner.run_worker). A job's windows stop others once at most
                          (gpus.Gate._stop): past that, the timed job itself is run again
                          alone, so that saying "busy" costs only the job that says it
    worker -> grader  D   "done timing": the others go on

The pipe is the worker's, so submitted code can write to it too: all it can do is ask
for windows it would get anyway, or spoil its own. Each job gets at most `count` windows,
each closed after WINDOW_SECONDS whatever the worker says; past `count` the grader closes
its ends, and the worker's next request fails (its timings are then missing, which costs
only that job). A byte out of turn ends the job's windows too. Frozen jobs' time limits
are stretched by the time they spent frozen (gpus.RunningJob.paused), and the timed job's
by the time it waited for its window.
"""

from __future__ import annotations

import os
import select
import threading
import time

from grader.isolation.gpus import Gate, RunningJob

WINDOW_SECONDS = 60.0  # the longest window: every timed call of a kernel fits many times
ASK, GRANT, BUSY, DONE = b"T", b"G", b"B", b"D"


class WindowServer:
    """The grader's end of one timed job's windows: pass `child_fds` to the worker
    (Popen's pass_fds, and in its job as "window": [read, write]), call start() once it
    runs and close() once it has ended."""

    def __init__(self, gate: Gate, me: RunningJob, count: int) -> None:
        self.gate, self.me, self.count = gate, me, count
        self._asks_r, asks_w = os.pipe()  # worker -> grader
        grants_r, self._grants_w = os.pipe()  # grader -> worker
        self.child_fds = (grants_r, asks_w)  # what the worker reads, what it writes
        self.opened = 0  # windows given
        self.drained = 0  # of which the others had to end first
        self.held = 0.0  # seconds its windows were open, every other job there frozen
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Serve the worker's requests in a thread (after its process started: the
        grader's copies of the child's ends are closed here)."""
        for fd in self.child_fds:
            os.close(fd)
        self._thread = threading.Thread(target=self._serve, daemon=True,
                                        name="timing-window")
        self._thread.start()

    def close(self) -> None:
        """After the job ended (every process of it killed): the thread sees end of file
        and leaves, closing any window still open."""
        if self._thread is not None:
            self._thread.join()
        else:  # never started (the run is stopping): the child's ends are still here
            for fd in self.child_fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
        for fd in (self._asks_r, self._grants_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def _read(self, timeout: float | None) -> bytes | None:
        """One request byte; b"" at end of file (the job ended), None when timeout
        passed first."""
        ready, _, _ = select.select([self._asks_r], [], [], timeout)
        if not ready:
            return None
        try:
            return os.read(self._asks_r, 1)
        except OSError:
            return b""

    def _grant(self) -> bool:
        try:
            os.write(self._grants_w, GRANT)
            return True
        except OSError:  # the worker is gone
            return False

    def _serve(self) -> None:
        try:
            late = False  # a window closed for its length: its DONE is still to come
            while self.opened < self.count:
                request = self._read(None)
                if late and request == DONE:
                    late = False
                    continue
                if request != ASK:
                    return  # end of file (the job ended) or a byte out of turn
                late = not self._window()
        finally:
            # No more windows: the worker's next request reads end of file.
            try:
                os.close(self._grants_w)
            except OSError:
                pass
            self._grants_w = -1

    def _window(self) -> bool:
        """One window, from the grant to the worker's DONE (True), or until it was held
        WINDOW_SECONDS (False: the others go on; so does the slow kernel's timing, which
        scores nothing at that length anyway, and the job's next window is served)."""
        if not self._credited(self.gate.open_window, self.me):
            return True  # the job has ended
        opened = time.monotonic()
        self.opened += 1
        mine = True  # the gate's window is this job's (close it, and only it)
        try:
            if not self._grant():
                return True
            answer = self._read(WINDOW_SECONDS)
            if answer == BUSY:
                self.drained += 1
                self.gate.close_window()
                self.held += time.monotonic() - opened
                got = self._credited(self.gate.open_window, self.me, drain=True)
                opened, mine = time.monotonic(), got
                if not got or not self._grant():
                    return True
                answer = self._read(WINDOW_SECONDS)
                if answer == BUSY:  # still busy once drained: the others are stopped
                    self._credited(self.gate.displace_others, self.me)  # (or it is marked)
                    if not self._grant():
                        return True
                    answer = self._read(WINDOW_SECONDS)
            return answer is not None
        finally:
            if mine:
                self.held += time.monotonic() - opened
                self.gate.close_window()

    def _credited(self, wait, *args, **kwargs):
        """wait(*args, **kwargs), its time not counted against the job's limit: credited
        once, less what a freeze meanwhile was already credited for."""
        me = self.me
        asked, before = time.monotonic(), me.paused
        me.waiting_since = asked
        try:
            return wait(*args, **kwargs)
        finally:
            waited = time.monotonic() - asked
            me.paused += max(0.0, waited - (me.paused - before))
            me.waiting_since = None  # after: paused_now() may overcount a moment, never under
