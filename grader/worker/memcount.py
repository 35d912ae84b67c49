"""Memory-traffic counts of kernels running in numba's CUDA simulator.

A GPU serves memory one warp instruction at a time: a global load or store costs one
transaction per 32-byte sector its active lanes touch (4 for 32 consecutive float32
elements, 32 when every lane reads a different row), and a shared-memory access is
replayed once per extra distinct 4-byte word requested in the same one of the 32 banks.
Neither shows in the simulator's results or time, so this module counts them while
simcheck.instrument(counter=Counter()) watches a launch: simcheck's hooks on kernel
arguments and shared arrays call `global_access` and `shared_access` here.

What an "instruction" is, in the simulator. Each CUDA thread is a Python thread and runs
on its own, so there are no warp instructions to observe. A warp is taken to be 32
threads of one block with consecutive linear thread ids (as on a GPU), and one of its
instructions to be the n-th load (or store) that each of its lanes makes of one array
since the block's last barrier: (array, barrier epoch, n) pairs up what the lanes do in
the same iteration of the same loop. Not the source line: finding a caller's line takes
a frame look-up, which the grading worker's audit hook judges, and that tripled the cost
of a counted call. Two loads of one array on different lines of one loop body pair up
just as well, since every lane makes them in the same order. Where lanes take different
branches the pairing is approximate: a lane that skips a load of an array pairs its
later loads of it with its neighbours' earlier ones, until the next barrier realigns
them (a guarded load with an `else` that loads a zero into the same shared array does
not skip). In a GEMM only the edge threads of partial tiles diverge, so counts are taken
on a case whose sizes are multiples of the tiles.

Addresses are offsets from the start of each argument's underlying buffer, as if it had
been allocated on its own (cudaMalloc aligns to 256 bytes, a multiple of the sector),
and each shared array is taken to start at bank 0. Elements wider than 4 bytes are
counted at their first word. An access of a whole row or slice is not counted (a kernel
compiled for a GPU indexes single elements).

Multiply-adds are not counted here (the simulator runs plain Python arithmetic): the
grader divides loads by the case's M*N*K, the multiply-adds a GEMM must do.

All state is kept in this module, never on an object a kernel can reach (thread,
array), and submissions cannot import it, so the counts are the worker's own.
"""

from __future__ import annotations

import threading
from collections import Counter as _Tally
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

WARP = 32
SECTOR_BYTES = 32
BANKS = 32
WORD_BYTES = 4

# Kinds of access (the first element of a group's key).
GLOBAL_LOAD, GLOBAL_STORE, SHARED_LOAD, SHARED_STORE = range(4)
_INTS = (int, np.integer)
MAX_LAYOUTS = 64


@dataclass
class KernelCounts:
    """Totals over every launch of one kernel (requests: warp instructions; accesses:
    lane accesses; sectors: 32-byte global transactions; conflicts: extra shared
    wavefronts beyond one per request)."""

    launches: int = 0
    global_load_requests: int = 0
    global_load_accesses: int = 0
    global_load_sectors: int = 0
    global_store_requests: int = 0
    global_store_accesses: int = 0
    global_store_sectors: int = 0
    shared_load_requests: int = 0
    shared_load_accesses: int = 0
    shared_load_conflicts: int = 0
    shared_store_requests: int = 0
    shared_store_accesses: int = 0
    shared_store_conflicts: int = 0
    threads: int = 0  # CUDA threads launched (grid times block, every launch)
    # Of those, the threads that stored to global memory: a tile's edge threads that
    # fall outside C launch, but compute and store nothing.
    storing_threads: int = 0
    # Dynamic shared memory asked for (bytes, the largest launch; its accesses are counted
    # as a static array's).
    dynamic_shared_bytes: int = 0
    # With the call's operands given (Counter.watch_operands): how many elements of A and
    # B (by value; times alpha too, for tiles staged pre-scaled) a shared-memory load
    # returned at least once, of how many, counting only loads of what another thread of
    # the block stored. Tiles staged there hold every one; a token read from shared memory
    # beside a product computed from global memory, hardly any.
    shared_operand_elements: int = 0
    operand_elements: int = 0
    # Per array argument, by the kernel's parameter name: [load requests, load sectors,
    # store requests, store sectors] (which operand is read uncoalesced).
    arrays: dict[str, list[int]] = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)


def bank_conflicts(words: set[int]) -> int:
    """Extra shared-memory wavefronts of one request for these distinct word indices:
    the most distinct words any bank must serve, minus one (lanes reading one word share
    a broadcast, no conflict)."""
    if not words:
        return 0
    return max(_Tally(w % BANKS for w in words).values()) - 1


class Counter:
    """The counts of every kernel launched while it is active (see simcheck.instrument).

    Accesses of one block are grouped by (kind, array, barrier epoch, warp, n) as they
    happen and folded into the kernel's totals when the block ends (the simulator runs
    one block at a time)."""

    def __init__(self) -> None:
        self.kernels: dict[str, KernelCounts] = {}
        self._current: KernelCounts | None = None
        # ((kind, array, epoch), warp, n) -> {lane: sector or word}; a lane adds one
        # entry to a group, and dict item assignment is atomic: threads need no lock.
        self._groups: dict[tuple, dict[int, Any]] = {}
        # Each simulated thread's barriers passed in this block, and its accesses so far
        # per (kind, array, epoch): only that thread writes its entries.
        self._epochs: dict[Any, int] = {}
        self._lanes: dict[Any, dict[tuple, int]] = {}
        # Each argument's (buffer start, offset): the wrappers a launch gets live as long
        # as it does, and are hashed by identity.
        self._layouts: dict[Any, tuple[int, int]] = {}
        self._arrays: dict[int, str] = {}  # this launch's buffer starts -> parameter names
        self._block_thread: type = type(None)
        self._operands: dict[float, int] | None = None  # value -> element (watch_operands)
        self._seen: dict[str, set[int]] = {}  # per kernel: the elements read from shared
        self._name = ""  # of the kernel launched

    def watch_operands(self, A: np.ndarray, B: np.ndarray, alpha: float) -> None:
        """Tell which shared-memory loads return elements of the call's A and B (or alpha
        times them): counted per kernel as shared_operand_elements."""
        values = np.concatenate([np.ravel(A), np.ravel(B)]).astype(np.float32)
        scaled = (np.float32(alpha) * values).astype(np.float32)
        operands: dict[float, int] = {}
        for n, (value, times) in enumerate(zip(values.tolist(), scaled.tolist(), strict=True)):
            operands.setdefault(value, n)
            operands.setdefault(times, n)
        self._operands = operands

    def bind(self, block_thread: type) -> None:
        """The simulator's thread class."""
        self._block_thread = block_thread

    def passed_barrier(self, thread: Any) -> None:
        """`thread` was released from a syncthreads: its next accesses pair up with the
        other lanes' after the barrier, whatever each did before it."""
        self._epochs[thread] = self._epochs.get(thread, 0) + 1

    # launches and blocks -------------------------------------------------------------

    def begin_launch(self, name: str, arrays: dict[int, str] | None = None,
                     threads: int = 0, dynamic_shared: int = 0) -> None:
        """A kernel launch of `threads` CUDA threads begins; `arrays`: buffer start ->
        parameter name of its array arguments."""
        self._name = name
        self._current = self.kernels.setdefault(name, KernelCounts())
        self._current.launches += 1
        if self._operands is not None:
            self._current.operand_elements = len(set(self._operands.values()))
        self._current.threads += threads
        self._current.dynamic_shared_bytes = max(self._current.dynamic_shared_bytes,
                                                 dynamic_shared)
        self._arrays = arrays or {}

    def end_launch(self) -> None:
        self.end_block()
        self._current = None
        self._layouts = {}

    def end_block(self) -> None:
        """Fold the finished block's groups into the current kernel's totals."""
        groups, self._groups = self._groups, {}
        lanes_of, self._lanes, self._epochs = self._lanes, {}, {}
        totals = self._current
        if totals is None:
            return
        totals.storing_threads += sum(
            any(sequence[0] == GLOBAL_STORE for sequence in sequences)
            for sequences in lanes_of.values())
        for key, lanes in groups.items():
            kind, n = key[0][0], len(lanes)
            if kind in (GLOBAL_LOAD, GLOBAL_STORE):
                sectors = len(set(lanes.values()))
                name = self._arrays.get(key[0][1], "other")
                per_array = totals.arrays.setdefault(name, [0, 0, 0, 0])
                per_array[2 * (kind == GLOBAL_STORE)] += 1
                per_array[2 * (kind == GLOBAL_STORE) + 1] += sectors
            if kind == GLOBAL_LOAD:
                totals.global_load_requests += 1
                totals.global_load_accesses += n
                totals.global_load_sectors += sectors
            elif kind == GLOBAL_STORE:
                totals.global_store_requests += 1
                totals.global_store_accesses += n
                totals.global_store_sectors += sectors
            elif kind == SHARED_LOAD:
                totals.shared_load_requests += 1
                totals.shared_load_accesses += n
                totals.shared_load_conflicts += bank_conflicts(set(lanes.values()))
            else:
                totals.shared_store_requests += 1
                totals.shared_store_accesses += n
                totals.shared_store_conflicts += bank_conflicts(set(lanes.values()))

    # accesses (called from simcheck's hooks, on the simulated thread) ----------------

    def _record(self, kind: int, array: Any, unit: Any) -> None:
        thread = threading.current_thread()
        if not isinstance(thread, self._block_thread):
            return
        sequence = (kind, array, self._epochs.get(thread, 0))
        counts = self._lanes.get(thread)
        if counts is None:
            counts = self._lanes[thread] = {}
        n = counts.get(sequence, 0)
        counts[sequence] = n + 1
        tid = thread.thread_id
        key = (sequence, tid // WARP, n)
        group = self._groups.get(key)
        if group is None:
            group = self._groups.setdefault(key, {})
        group[tid % WARP] = unit

    def global_access(self, array: Any, idx: Any, write: bool) -> None:
        """One element of a kernel argument (the simulator's in-kernel array wrapper)
        read or written at `idx`."""
        if self._current is None:
            return
        try:
            ary = array.__dict__["_item"]._ary
        except (KeyError, AttributeError):
            return
        index = idx if type(idx) is tuple else (idx,)
        if len(index) != ary.ndim:
            return  # a row or a slice: not one element's access
        layout = self._layouts.get(array)
        if layout is None:
            layout = _layout(ary)
            if len(self._layouts) < MAX_LAYOUTS:  # (a view made in the kernel is new each time)
                self._layouts[array] = layout
        start, offset = layout
        for i, n, stride in zip(index, ary.shape, ary.strides, strict=True):
            if not isinstance(i, _INTS):
                return
            offset += (i + n if i < 0 else i) * stride
        self._record(GLOBAL_STORE if write else GLOBAL_LOAD, start,
                     int(offset) // SECTOR_BYTES)

    def shared_access(self, allocation: Any, flat: int, itemsize: int, write: bool,
                      value: Any = None, from_other: bool = False) -> None:
        """One element (flat index in its allocation) of a shared array; for a load,
        `value`: what it returned, and `from_other`: whether another thread of the block
        stored it (only those count as operands: a thread that puts each value it loads
        into a slot of its own and reads it back shares nothing)."""
        current = self._current
        if current is None:
            return
        self._record(SHARED_STORE if write else SHARED_LOAD, allocation,
                     flat * itemsize // WORD_BYTES)
        if not write and from_other and self._operands is not None and value is not None:
            try:
                element = self._operands.get(float(value))
            except (TypeError, ValueError):
                return
            if element is not None:
                seen = self._seen.setdefault(self._name, set())
                seen.add(element)
                current.shared_operand_elements = len(seen)

    def to_json(self) -> dict[str, dict[str, int]]:
        return {name: counts.to_json() for name, counts in self.kernels.items()}


def hooks(counter: Counter) -> list[tuple[Any, str, Any]]:
    """(owner, attribute, replacement given the original) that tell `counter` where
    launches and blocks begin and end, for simcheck.instrument to install."""
    from numba.cuda.simulator import kernel
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    def array_names(fn: Any, args: tuple) -> dict[int, str]:
        code = getattr(fn, "__code__", None)
        names = code.co_varnames[:code.co_argcount] if code is not None else ()
        found = {}
        for n, arg in enumerate(args):
            ary = arg._ary if isinstance(arg, FakeCUDAArray) else arg
            if isinstance(ary, np.ndarray):
                found.setdefault(_layout(ary)[0], names[n] if n < len(names) else f"arg{n}")
        return found

    def kernel_call(original: Any) -> Any:
        def call(self: Any, *args: Any) -> Any:
            if self._device or kernel._kernel_context:  # a device function
                return original(self, *args)
            counter.begin_launch(str(getattr(self.fn, "__name__", "kernel")),
                                 array_names(self.fn, args), _threads(self),
                                 int(getattr(self, "dynshared_size", 0) or 0))
            try:
                return original(self, *args)
            finally:
                counter.end_launch()
        return call

    def block_run(original: Any) -> Any:
        def run(self: Any, *args: Any) -> Any:
            try:
                return original(self, *args)
            finally:
                counter.end_block()
        return run

    def syncthreads(original: Any) -> Any:
        def sync(self: Any) -> None:
            original(self)
            counter.passed_barrier(self)
        return sync

    return [(kernel.FakeCUDAKernel, "__call__", kernel_call),
            (kernel.BlockManager, "run", block_run),
            (kernel.BlockThread, "syncthreads", syncthreads)]


def _threads(kernel: Any) -> int:
    """Threads of a configured simulator kernel (its grid_dim and block_dim: dim3s)."""
    total = 1
    for dims in (getattr(kernel, "grid_dim", None), getattr(kernel, "block_dim", None)):
        for d in tuple(dims or ())[:3]:
            total *= int(d)
    return total


def _layout(ary: np.ndarray) -> tuple[int, int]:
    """(start of the buffer under `ary`, byte offset of ary[0, ...] from it)."""
    root = ary
    while isinstance(root.base, np.ndarray):
        root = root.base
    start = root.__array_interface__["data"][0]
    return start, ary.__array_interface__["data"][0] - start
