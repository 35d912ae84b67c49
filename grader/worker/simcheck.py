"""Race and memory-error detector for kernels running in numba's CUDA simulator.

(A module over 400 lines: the instrumented array, the per-block epochs and the report
are one mechanism patched into numba's simulator at one point; apart they would each
need the others' internals.)

A shared-memory kernel that misses a syncthreads() often still computes the right result in
the simulator, whose threads take turns on one interpreter lock, so a check of results
alone lets it pass. While `instrument()` is active, every array access of the simulated
threads is watched and these are reported:

- races on shared memory. Per block and per element, the detector keeps the last thread
  that wrote it and the threads that read it, with the block's barrier epoch (how many
  syncthreads the block has passed). Reading an element another thread wrote in the
  current epoch (read-after-write), writing one another thread read (write-after-read)
  or wrote (write-after-write) in the current epoch is a race;
- reads of shared elements that no thread of the block has written: the simulator's
  shared arrays then hold whatever the previous block left;
- negative integer indices on kernel arguments and on shared and local arrays. NumPy,
  and numba's compiled code too, wrap them around to the far end of the dimension, so a
  kernel that computes one (``x[i - 1]`` at ``i == 0``) silently reads the wrong element.
  Indices past the end already raise IndexError in the simulator and are left to it.

    with simcheck.instrument() as findings:
        launch(A, B, C, 1.0, 0.0)
    for finding in findings:
        print(finding.describe())

Findings are deduplicated, one per (kind, source line) with a count, and capped.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from types import FrameType
from typing import Any

import numpy as np

from grader.worker import memcount
from grader.worker.kernelsim import KernelArray
from nnkit import backend

RAW = "read-after-write"
WAR = "write-after-read"
WAW = "write-after-write"
UNINITIALIZED = "uninitialized-read"
NEGATIVE_INDEX = "negative-index"
GLOBAL_WAW = "global-write-write"
RACES = (RAW, WAR, WAW, GLOBAL_WAW)
MAX_FINDINGS = 50

_WHAT = {
    RAW: "reads an element that thread {other} wrote since the block's last syncthreads",
    WAR: "writes an element that thread {other} read since the block's last syncthreads",
    WAW: "writes an element that thread {other} also wrote since the block's last syncthreads",
    UNINITIALIZED: "reads an element that no thread of its block has written",
    NEGATIVE_INDEX: "uses a negative index (it wraps around to the end of the dimension)",
    GLOBAL_WAW: "writes an element of an argument that another thread of the launch also "
                "wrote, with another value: threads adding partial results to one element "
                "need cuda.atomic.add (a plain += loses the others' additions on a GPU)",
}

Dim = tuple[int, int, int]


class SimcheckError(RuntimeError):
    """instrument() cannot be used here: not in the simulator, or already active."""


@dataclass
class Finding:
    kind: str  # RAW, WAR, WAW, UNINITIALIZED or NEGATIVE_INDEX
    array: str  # "shared float32[16, 16] A_tile", "argument float32[32, 32] A", "local ..."
    index: tuple[int | str, ...]  # the element (races), or the index as written
    thread: Dim  # threadIdx of the thread that made the access
    block: Dim  # its blockIdx
    other_thread: Dim | None  # the thread it races with (same block)
    file: str  # where in the kernel the access happened
    line: int

    def __post_init__(self) -> None:
        # A byte per later access at this site: bytearray.append is atomic in CPython,
        # so threads count without a lock and no access is lost.
        self.more = bytearray()

    @property
    def count(self) -> int:
        """Accesses of this kind at this line (the first is the one described)."""
        return 1 + len(self.more)

    def to_json(self) -> dict:
        return {**asdict(self), "count": self.count}

    def describe(self) -> str:
        what = _WHAT[self.kind].format(other=self.other_thread)
        times = f" ({self.count} times)" if self.count > 1 else ""
        index = ", ".join(map(str, self.index))
        return (f"{os.path.basename(self.file)}:{self.line}: {self.kind} on {self.array} "
                f"[{index}]: thread {self.thread} of block {self.block} {what}{times}")


class Findings(list[Finding]):
    """The findings of one instrument() block, in order of first occurrence."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.dropped = 0  # accesses left out because `limit` findings were already kept
        self._by_site: dict[tuple[str, str, int], Finding] = {}
        self._lock = threading.Lock()


# Set while instrument() is active; the hooks below read them.
_findings: Findings | None = None
_counter: memcount.Counter | None = None  # counting memory traffic too (optional)
_BlockThread: type = type(None)  # the simulator's thread class, once instrument() ran
_SIM_DIR = ""  # the simulator's source folder: frames there are not the kernel's
# Simulated threads inside one of the simulator's atomics. Kept here, not on the thread
# object a kernel could reach and mark to hide its races; submissions cannot import this.
_in_atomic: set[threading.Thread] = set()
_alloc_lock = threading.Lock()
# Plain writes to kernel arguments in the current launch: (array, index) -> ((block,
# thread), the block's barrier epoch, value). Two threads writing one element with
# different values, from two blocks or with no syncthreads between, is a race on a GPU (a
# plain += from several threads, a global column sum without atomics): the simulator
# runs threads one after another, so the result comes out right there.
_global_writes: dict[tuple[int, tuple], tuple[tuple, int, Any]] = {}
_getitem = np.ndarray.__getitem__
_setitem = np.ndarray.__setitem__
# threading.current_thread() without its call: the table it reads (a simulated thread
# may run on a thread of blocksync's pool, which puts the simulated one there).
_active = threading._active  # noqa: SLF001
_get_ident = threading.get_ident
_INTS = (int, np.integer)


def _has_negative(idx: Any) -> bool:
    # Integer indices only: a negative slice bound (x[:-1]) is a deliberate Python idiom.
    if type(idx) is not tuple:
        return isinstance(idx, _INTS) and idx < 0
    for i in idx:
        if isinstance(i, _INTS) and i < 0:
            return True
    return False


def _as_index(idx: Any) -> tuple[int | str, ...]:
    return tuple(int(i) if isinstance(i, _INTS) else repr(i)
                 for i in (idx if type(idx) is tuple else (idx,)))


def _kernel_frame() -> FrameType:
    """The frame of the kernel code that made the access being checked: the first one
    outside this module and the simulator (an atomic indexes arrays there)."""
    frame = sys._getframe(2)
    while frame.f_back is not None and (frame.f_code.co_filename == __file__
                                        or frame.f_code.co_filename.startswith(_SIM_DIR)):
        frame = frame.f_back
    return frame


def _label(memory: str, array: Any, obj: Any, frame: FrameType) -> str:
    """'shared float32[16, 16] A_tile': the kind of memory, the array, and the kernel's
    name for it where one of the kernel's variables holds it."""
    dims = ", ".join(map(str, array.shape))
    name = next((n for n, v in frame.f_locals.items() if v is obj), None)
    return f"{memory} {array.dtype}[{dims}]" + (f" {name}" if name else "")


def _report(kind: str, thread: Any, other: int | None,
            details: Callable[[FrameType], tuple[str, tuple[int | str, ...]]]) -> None:
    """Count a finding at the kernel's source line; `details` (array label, index) is
    only worked out for the first one there."""
    findings = _findings
    if findings is None:
        return
    frame = _kernel_frame()
    site = (kind, frame.f_code.co_filename, frame.f_lineno)
    # A site seen before only adds to its count: no lock there, since a thread waiting on
    # a lock that another of the block's thousand threads holds costs milliseconds in
    # the simulator (a racing kernel made some 10^5 such reports: 163 s for one small case,
    # 5 s without the lock).
    found = findings._by_site.get(site)
    if found is not None:
        found.more.append(1)
        return
    with findings._lock:
        found = findings._by_site.get(site)
        if found is not None:
            found.more.append(1)
            return
        if len(findings) >= findings.limit:
            findings.dropped += 1
            return
        other_thread = None
        if other is not None:  # the simulator's thread_id is x + bx * (y + by * z)
            bx, by, _ = thread._manager._block_dim
            other_thread = (other % bx, other // bx % by, other // (bx * by))
        array, index = details(frame)
        found = Finding(kind, array, index, tuple(thread.threadIdx), tuple(thread.blockIdx),
                        other_thread, site[1], site[2])
        findings._by_site[site] = found
        findings.append(found)


def _report_negative(memory: str, obj: Any, array: Any, idx: Any) -> None:
    thread = threading.current_thread()
    if isinstance(thread, _BlockThread):
        _report(NEGATIVE_INDEX, thread, None,
                lambda frame: (_label(memory, array, obj, frame), _as_index(idx)))


def _global_write(obj: Any, idx: Any, value: Any) -> None:
    """Record a plain write to a kernel argument's element; report another thread's
    earlier write of a different value to it in this launch (GLOBAL_WAW)."""
    thread = _active.get(_get_ident())
    if not isinstance(thread, _BlockThread) or thread in _in_atomic:
        return
    index = idx if isinstance(idx, tuple) else (idx,)
    if not all(isinstance(i, _INTS) for i in index):
        return  # a slice: left to the simulator (kernels index single elements)
    array = obj._item._ary
    key = (id(array), tuple(int(i) for i in index))
    me, epoch = (tuple(thread.blockIdx), thread.thread_id), thread._simcheck_epoch
    before = _global_writes.get(key)
    _global_writes[key] = (me, epoch, value)
    # Another thread's write: a race unless a syncthreads of their block came between.
    if before is None or before[0] == me or (before[0][0] == me[0] and before[1] != epoch):
        return
    try:
        same = bool(before[2] == value)
    except (TypeError, ValueError):
        same = False
    if not same:
        _report(GLOBAL_WAW, thread, None,
                lambda frame: (_label("argument", array, obj, frame), _as_index(idx)))


class _Shadow:
    """What is known of each element of one shared array in the block that ran last: who
    wrote and read it, and in which epoch (syncthreads passed so far by the accessing
    thread; the simulator releases all live threads of a block from a barrier at once, so
    this is the block's epoch)."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array  # the allocation, for labels
        self.block: Any = None  # the simulator's BlockManager of the block tracked
        self.lock = threading.Lock()

    def _start_block(self, block: Any) -> None:
        # Plain lists: faster than NumPy for one element at a time.
        n = self.array.size
        self.block = block
        self.writer, self.write_epoch, self.atomic = [-1] * n, [-1] * n, [False] * n
        # Two readers per epoch are enough to name one that is not the writer.
        self.reader, self.reader2, self.read_epoch = [-1] * n, [-1] * n, [-1] * n

    def access(self, flat: int, thread: Any, write: bool,
               atomic: bool) -> tuple[str, int | None] | None:
        """Record an access to element `flat`; return (kind, other thread) on a conflict.

        An atomic read-modify-write arrives as a read, then a write, both with `atomic`;
        it races with plain accesses but not with other atomics."""
        tid, epoch = thread.thread_id, thread._simcheck_epoch
        with self.lock:
            if self.block is not thread._manager:
                self._start_block(thread._manager)
            writer, written = self.writer[flat], self.write_epoch[flat]
            if not write:
                if not atomic:  # an atomic's read is covered by the write that follows
                    if self.read_epoch[flat] != epoch:
                        self.read_epoch[flat], self.reader[flat] = epoch, tid
                        self.reader2[flat] = -1
                    elif self.reader[flat] != tid and self.reader2[flat] < 0:
                        self.reader2[flat] = tid
                if written < 0:
                    return UNINITIALIZED, None
                if written == epoch and writer != tid and not atomic:
                    return RAW, writer
                return None
            was_atomic = self.atomic[flat]
            self.writer[flat], self.write_epoch[flat], self.atomic[flat] = tid, epoch, atomic
            if self.read_epoch[flat] == epoch:
                reader = self.reader[flat]
                reader = self.reader2[flat] if reader == tid else reader
                if reader >= 0:
                    return WAR, reader
            if written == epoch and writer != tid and not (atomic and was_atomic):
                return WAW, writer
            return None


class _SharedArray(KernelArray):
    """A shared array as kernels see it: a NumPy array whose element accesses are checked."""

    _shadow: _Shadow | None = None  # None on arrays NumPy derives from it (a + 1, ...)
    _ids: np.ndarray  # each element's position in the allocation, shaped like this view

    # The fast path, inlined (this runs for every element a kernel touches): one element
    # named by a non-negative Python int per dimension, what kernels nearly always write.
    # Anything else (slices, rows, NumPy integers, negative indices) goes through
    # _shared_access.
    def __getitem__(self, idx: Any) -> Any:
        value = _getitem(self, idx)
        shadow = self._shadow
        if shadow is None:
            return value
        if type(idx) is tuple and len(idx) == self.ndim:
            for i in idx:
                if type(i) is not int or i < 0:
                    return _shared_access(self, idx, value, False)
        elif type(idx) is not int or idx < 0 or self.ndim != 1:
            return _shared_access(self, idx, value, False)
        thread = _active.get(_get_ident())
        if not isinstance(thread, _BlockThread):
            return value
        flat = self._ids.item(idx)
        if _counter is not None or thread in _in_atomic:
            _element_access(shadow, flat, thread, False, value)
            return value
        # A plain read, uncounted: _Shadow.access inlined (this is most of what a
        # shared-memory kernel does, and two calls fewer per element are a third of the
        # simulated kernel's time).
        tid, epoch = thread.thread_id, thread._simcheck_epoch
        with shadow.lock:
            if shadow.block is not thread._manager:
                shadow._start_block(thread._manager)
            if shadow.read_epoch[flat] != epoch:
                shadow.read_epoch[flat], shadow.reader[flat] = epoch, tid
                shadow.reader2[flat] = -1
            elif shadow.reader[flat] != tid and shadow.reader2[flat] < 0:
                shadow.reader2[flat] = tid
            writer, written = shadow.writer[flat], shadow.write_epoch[flat]
        if written < 0:
            _conflict(shadow, flat, thread, (UNINITIALIZED, None))
        elif written == epoch and writer != tid:
            _conflict(shadow, flat, thread, (RAW, writer))
        return value

    def __setitem__(self, idx: Any, value: Any) -> None:
        _setitem(self, idx, value)
        shadow = self._shadow
        if shadow is None:
            return
        if type(idx) is tuple and len(idx) == self.ndim:
            for i in idx:
                if type(i) is not int or i < 0:
                    _shared_access(self, idx, None, True)
                    return
        elif type(idx) is not int or idx < 0 or self.ndim != 1:
            _shared_access(self, idx, None, True)
            return
        thread = _active.get(_get_ident())
        if isinstance(thread, _BlockThread):
            _element_access(shadow, self._ids.item(idx), thread, True)


def _element_access(shadow: _Shadow, flat: int, thread: Any, write: bool,
                    value: Any = None) -> None:
    """_shared_access for one element at a known flat position, by a simulated thread
    (`value`: what a read returned)."""
    conflict = shadow.access(flat, thread, write, thread in _in_atomic)
    counter = _counter
    if counter is not None:  # (after access(): the writers are this block's)
        counter.shared_access(shadow, flat, shadow.array.itemsize, write, value,
                              _stored_by_another(shadow, flat, thread))
    if conflict is not None:
        _conflict(shadow, flat, thread, conflict)


def _stored_by_another(shadow: _Shadow, flat: int, thread: Any) -> bool:
    """Did another thread of the block store the element last (after shadow.access(),
    which keeps the writers of the running block)?"""
    writer = shadow.writer[flat]
    return writer >= 0 and writer != thread.thread_id


def _conflict(shadow: _Shadow, flat: int, thread: Any, conflict: tuple[str, int | None]) -> None:
    alloc = shadow.array
    _report(conflict[0], thread, conflict[1], lambda frame: (
        _label("shared", alloc, alloc, frame),
        tuple(int(i) for i in np.unravel_index(flat, alloc.shape))))


def _shared_access(array: _SharedArray, idx: Any, value: Any, write: bool) -> Any:
    thread = threading.current_thread()
    if not isinstance(thread, _BlockThread):  # the host looking at it
        return value
    # Whether the thread is inside one of the simulator's atomics (see _hooks), not a look
    # at the caller's frame: frames are audited events, and the grading worker's audit
    # hook judged each one (some 130 per thread of a shared-memory GEMM).
    atomic = thread in _in_atomic
    shadow = array._shadow
    alloc = shadow.array
    if _has_negative(idx):
        _report_negative("shared", alloc, alloc, idx)
    ids = array._ids[idx]  # after the access itself, so IndexError is the simulator's
    if isinstance(ids, np.ndarray):
        if value is not None and np.may_share_memory(value, array):
            value._shadow, value._ids = shadow, ids  # a view: check accesses through it
            return value
        flats = ids.ravel().tolist()
        value = None if value is None else value.view(np.ndarray)
    else:
        flats = (int(ids),)
    counter = _counter
    for flat in flats:
        conflict = shadow.access(flat, thread, write, atomic)
        if counter is not None and len(flats) == 1:  # one element: one lane's access
            counter.shared_access(shadow, flat, alloc.itemsize, write, value,
                                  _stored_by_another(shadow, flat, thread))
        if conflict is not None:
            _report(conflict[0], thread, conflict[1], lambda frame, flat=flat: (
                _label("shared", alloc, alloc, frame),
                tuple(int(i) for i in np.unravel_index(flat, alloc.shape))))
    return value


class _DynamicShared(KernelArray):
    """Dynamic shared memory as kernels see it (cuda.shared.array(0, dtype), always from
    the start of the block's buffer, and the 1-D slices a kernel takes of it to hold two
    tiles): its one-element accesses are counted while a counter watches, as a static
    shared array's are, with the thread that last wrote each byte offset (not checked for
    races: views of several dtypes alias one buffer)."""

    _key: Any = None  # the block's buffer (its FakeCUDAShared); None: not counted
    _start = 0  # this view's first element, in bytes from the buffer's start
    _step = 0  # its stride, in bytes

    def __array_finalize__(self, obj: Any) -> None:
        key = getattr(obj, "_key", None)
        if key is None or self.ndim != 1 or not isinstance(obj, np.ndarray):
            self._key = None
            return
        # A slice of a counted view: where it starts in the buffer.
        moved = self.__array_interface__["data"][0] - obj.__array_interface__["data"][0]
        self._key, self._start, self._step = key, obj._start + moved, self.strides[0]

    def _count(self, idx: Any, write: bool, value: Any = None) -> None:
        counter = _counter
        if counter is None or self._key is None:
            return
        i = idx[0] if type(idx) is tuple and len(idx) == 1 else idx
        if not (isinstance(i, _INTS) and 0 <= i):
            return
        offset = self._start + int(i) * (self._step or self.itemsize)
        thread = _active.get(_get_ident())
        # (block, thread): the buffer's object lives for the launch, across its blocks
        me = (tuple(getattr(thread, "blockIdx", ())), getattr(thread, "thread_id", -1))
        writers = self._key.__dict__.setdefault("_simcheck_writers", {})
        if write:
            writers[offset] = me
            counter.shared_access(self._key, offset // self.itemsize, self.itemsize, True)
            return
        writer = writers.get(offset)
        counter.shared_access(self._key, offset // self.itemsize, self.itemsize, False, value,
                              writer is not None and writer[0] == me[0] and writer != me)

    def __getitem__(self, idx: Any) -> Any:
        value = _getitem(self, idx)
        self._count(idx, False, value)
        return value

    def __setitem__(self, idx: Any, value: Any) -> None:
        _setitem(self, idx, value)
        self._count(idx, True)


class _LocalArray(KernelArray):
    """A local array as kernels see it: only negative indices are checked (it is private
    to its thread, so it cannot race)."""

    def __getitem__(self, idx: Any) -> Any:
        if (idx < 0 if type(idx) is int else _has_negative(idx)):
            _report_negative("local", self, self, idx)
        return _getitem(self, idx)

    def __setitem__(self, idx: Any, value: Any) -> None:
        if (idx < 0 if type(idx) is int else _has_negative(idx)):
            _report_negative("local", self, self, idx)
        _setitem(self, idx, value)


def _hooks() -> list[tuple[Any, str, Callable[[Any], Any]]]:
    """(owner, attribute, replacement given the original) for every simulator function
    patched; imported here, so that this module loads without the simulator."""
    from numba.cuda.simulator import kernel, kernelapi
    from numba.cuda.simulator.cudadrv import devicearray

    global _BlockThread, _SIM_DIR
    _BlockThread = kernel.BlockThread
    _SIM_DIR = os.path.dirname(kernelapi.__file__) + os.sep

    def shared_array(original):
        def array(self, shape, dtype, alignment=None):
            if shape == 0:
                # Dynamic shared memory: a view per dtype of one buffer, not checked for
                # races; its accesses are counted (the version rule asks for shared loads).
                view = original(self, shape, dtype, alignment)
                if not isinstance(view, np.ndarray):
                    return view
                view = view.view(_DynamicShared)
                view._key, view._start, view._step = self, 0, view.itemsize  # the block's
                return view
            if alignment is not None:
                raise RuntimeError("Array alignment is not supported in cudasim")
            if isinstance(dtype, kernelapi.types.Type):
                dtype = kernelapi.numpy_support.as_dtype(dtype)
            # One array per allocating source line, as in the simulator, which would see
            # this function as the caller: the whole block (and grid) shares it.
            caller = sys._getframe(1)
            key = (caller.f_code.co_filename, caller.f_lineno)
            with _alloc_lock:
                tracked = self._allocations.get(key)
                if tracked is None:
                    tracked = np.empty(shape, dtype).view(_SharedArray)
                    tracked._shadow = _Shadow(tracked)
                    tracked._ids = np.arange(tracked.size).reshape(tracked.shape)
                    self._allocations[key] = tracked
            return tracked
        return array

    def local_array(original):
        def array(self, shape, dtype, alignment=None):
            return original(self, shape, dtype, alignment).view(_LocalArray)
        return array

    def syncthreads(original):
        def sync(self):
            original(self)
            self._simcheck_epoch += 1  # released: the block's next epoch starts
        return sync

    def argument_getitem(original):
        def getitem(self, idx):
            if _has_negative(idx):
                _report_negative("argument", self, self._item._ary, idx)
            counter = _counter
            if counter is not None:
                counter.global_access(self, idx, False)
            return original(self, idx)
        return getitem

    def argument_setitem(original):
        def setitem(self, idx, value):
            if _has_negative(idx):
                _report_negative("argument", self, self._item._ary, idx)
            counter = _counter
            if counter is not None:
                counter.global_access(self, idx, True)
            original(self, idx, value)
            _global_write(self, idx, value)
        return setitem

    def launch(original):
        def call(self, *args):
            if not self._device:
                _global_writes.clear()  # races are within one launch
            try:
                return original(self, *args)
            finally:
                if not self._device:
                    _global_writes.clear()
        return call

    def atomic_operation(original):
        def operation(self, *args, **kwargs):
            thread = threading.current_thread()
            if not isinstance(thread, _BlockThread):
                return original(self, *args, **kwargs)
            _in_atomic.add(thread)
            try:
                return original(self, *args, **kwargs)
            finally:
                _in_atomic.discard(thread)
        return operation

    arg = devicearray.FakeWithinKernelCUDAArray  # what kernels get for array arguments
    # Every operation of the simulator's atomics (the only code of kernelapi.py that
    # indexes arrays on a kernel's behalf).
    atomics = [(kernelapi.FakeCUDAAtomic, name, atomic_operation)
               for name, value in vars(kernelapi.FakeCUDAAtomic).items()
               if callable(value) and not name.startswith("_")]
    return [
        (kernelapi.FakeCUDAShared, "array", shared_array),
        (kernelapi.FakeCUDALocal, "array", local_array),
        (kernel.BlockThread, "syncthreads", syncthreads),
        (arg, "__getitem__", argument_getitem),
        (arg, "__setitem__", argument_setitem),
        (kernel.FakeCUDAKernel, "__call__", launch),
        *atomics,
    ]


@contextmanager
def instrument(max_findings: int = MAX_FINDINGS,
               counter: memcount.Counter | None = None) -> Iterator[Findings]:
    """Check every kernel launched in the with-block; yields the list the findings go to.
    With a `counter`, the launches' memory traffic is counted into it too (memcount).

    Only in the CUDA simulator (raises SimcheckError on a GPU). Results of kernels are
    unchanged; the simulator is restored when the block ends.
    """
    global _findings, _counter
    if backend.select().on_gpu:
        raise SimcheckError("simcheck watches the CUDA simulator; kernels here run on a GPU "
                            "(set NNKIT_DEVICE=sim to check them)")
    if _findings is not None:
        raise SimcheckError("simcheck.instrument() is already active")
    findings = Findings(max_findings)
    originals = []
    try:
        hooks = _hooks()
        if counter is not None:
            counter.bind(_BlockThread)
            hooks += memcount.hooks(counter)
        for owner, name, wrap in hooks:
            original = owner.__dict__[name]
            originals.append((owner, name, original))
            setattr(owner, name, wrap(original))
        _BlockThread._simcheck_epoch = 0
        _findings, _counter = findings, counter
        yield findings
    finally:
        _findings = _counter = None
        _global_writes.clear()
        for owner, name, original in reversed(originals):
            setattr(owner, name, original)
        _in_atomic.clear()
        if "_simcheck_epoch" in _BlockThread.__dict__:
            del _BlockThread._simcheck_epoch
