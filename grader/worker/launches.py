"""Which kernels a graded call launched, and whether they alone produce its result.

(A module over 400 lines: recording and replay share the recorder's private state — the
wrapped launch paths, the arguments' snapshots, the buffers' origins — and splitting
them would widen what a submission could reach between the two.)

A result can be right without any kernel having computed it: the launcher may copy the
operands to the host and compute there, call a library, or launch a kernel that does
nothing and fill the output some other way. So the worker records what the call did to
device memory through the paths the kit knows, in order:

- kernel launches (`kernel[grid, block](args)`, `kernel.configure(...)`, in the simulator
  and on a GPU), with their configuration and arguments;
- the kit's own data movement that students may use (`nnkit.backend.copy` and
  `copy_into`) and the trusted GEMM the kit hands to Part 2's functions.

After the call, `replay()` starts again from fresh memory holding only the call's inputs
(the kit's buffers as they were before the call) and runs the recorded operations
again, through references the recorder took before the submission was imported. The
grader checks the replayed outputs exactly as it checks the call's own: a result the
recorded kernels do not reproduce was not made by them.

Given `inputs`, the replay starts from other values in the kit's buffers (new operands of
the same layout, which the grader built and the call never saw). Everything else the
launches carry is replayed as recorded: scalar arguments, tuples, launch configurations.
A launcher that computed the answer on the host and handed it to a kernel through one
of those (a value per launch, a grid whose size spells a number) reproduces its result
on the call's own inputs, but not on new ones.

Memory the call used that is not one of the kit's buffers (temporaries the launcher
allocated, workspaces kept between calls) starts the replay as it was when the call
first used it if all its elements were then equal (zeros, a fill value), and as zeros
otherwise: data the launcher prepared on the host cannot be smuggled into the replay.

In "count" mode (timed calls, training steps) only the number of launches of the
submission's own kernels is kept, at the cost of a counter.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nnkit.fastlaunch import c_strides

FULL, COUNT = "full", "count"


class ReplayError(RuntimeError):
    """The recorded operations could not be run again."""


@dataclass(frozen=True)
class ArrayRef:
    """An array argument as a view of one allocation: what the replay rebuilds."""

    alloc: int  # index into the recorder's allocations
    offset: int  # bytes from the allocation's start to the view's first element
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str


@dataclass
class Allocation:
    base: int  # address of its first byte
    nbytes: int
    space: str  # "device" (CuPy / numba on a GPU), "sim" (simulated device), "host"
    keep: Any  # an object keeping the memory alive while the recorder holds it
    kit: bool  # holds one of the kit's inputs (restored from `fills`)
    pristine: Any = None  # a temporary's initial bytes if they may be restored (pristine())
    itemsize: int = 4
    fills: list = field(default_factory=list)  # (ArrayRef, host array) of the kit's inputs


@dataclass
class Launch:
    kernel: Any
    config: tuple  # (grid, block, sharedmem)
    args: tuple  # ArrayRef or a scalar per argument
    own: bool  # the kernel is defined in the submission


@dataclass
class Copy:
    dst: ArrayRef
    src: ArrayRef


@dataclass
class Gemm:
    fn: Any  # the trusted GEMM (cuBLAS or NumPy on the host)
    A: ArrayRef
    B: ArrayRef
    C: ArrayRef
    alpha: float
    beta: float
    trans_a: bool
    trans_b: bool


@dataclass
class Record:
    ops: list = field(default_factory=list)
    allocations: list[Allocation] = field(default_factory=list)
    own_launches: int = 0
    other_launches: int = 0
    unrecorded: list[str] = field(default_factory=list)  # arguments the recorder could not map
    # Where each of the kit's inputs (in the order begin() got them) is restored from:
    # (allocation, index into its fills), for a replay on other inputs.
    inputs: list[tuple[int, int]] = field(default_factory=list)


# ---------------------------------------------------------------------------------------
# Arrays, whatever they are


def _sim_array_type() -> type | None:
    try:
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    except ImportError:
        return None
    return FakeCUDAArray


def numba_allocation(value: Any, address: int) -> tuple[int, int, Any] | None:
    """(base address, bytes, keep-alive object) of the numba allocation a numba device
    array views (its `gpu_data.owner`): a view's own span would leave a later, larger view
    of the same memory outside the bytes a replay gives it. None for anything else."""
    owner = getattr(getattr(value, "gpu_data", None), "owner", None)
    base, size = getattr(owner, "device_pointer_value", None), getattr(owner, "size", None)
    if isinstance(base, int) and isinstance(size, int) and base <= address < base + max(size, 1):
        return base, size, owner
    return None


def _root(array: np.ndarray) -> np.ndarray:
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


class Memory:
    """Addresses, extents and fresh copies of the arrays of one backend."""

    def __init__(self, on_gpu: bool):
        self.on_gpu = on_gpu
        self.sim_type = None if on_gpu else _sim_array_type()
        if on_gpu:
            import cupy

            self.cupy = cupy

    def describe(self, value: Any) -> tuple[int, tuple, tuple, np.dtype, str] | None:
        """(address, shape, strides in bytes, dtype, space) of an array, None otherwise."""
        if self.sim_type is not None and isinstance(value, self.sim_type):
            a = value._ary
            return a.__array_interface__["data"][0], a.shape, a.strides, a.dtype, "sim"
        if isinstance(value, np.ndarray):
            return value.__array_interface__["data"][0], value.shape, value.strides, \
                value.dtype, "host"
        cai = getattr(value, "__cuda_array_interface__", None) if self.on_gpu else None
        if isinstance(cai, dict):
            dtype = np.dtype(cai["typestr"])
            shape = tuple(int(s) for s in cai["shape"])
            strides = cai.get("strides") or c_strides(shape, dtype.itemsize)
            return int(cai["data"][0]), shape, tuple(int(s) for s in strides), dtype, "device"
        return None

    def extent(self, value: Any, described: tuple) -> tuple[int, int, Any]:
        """(base address, bytes, keep-alive object) of the allocation holding `value`."""
        address, shape, strides, dtype, space = described
        if space in ("sim", "host"):
            array = value._ary if space == "sim" else value
            root = _root(array)
            if root.flags.c_contiguous or root.flags.f_contiguous:
                start = root.__array_interface__["data"][0]
                return start, root.nbytes, root
        elif self.on_gpu and isinstance(value, self.cupy.ndarray):
            mem = value.data.mem
            return int(mem.ptr), int(mem.size), mem
        elif self.on_gpu and (whole := numba_allocation(value, address)) is not None:
            return whole
        return self.span(value, described)

    @staticmethod
    def span(value: Any, described: tuple) -> tuple[int, int, Any]:
        """(first address, bytes, keep-alive object) of the bytes a view spans."""
        address, shape, strides, dtype, _ = described
        lo, hi = address, address + dtype.itemsize
        for n, s in zip(shape, strides, strict=True):
            if n == 0:
                return address, 0, value
            if s >= 0:
                hi += (n - 1) * s
            else:
                lo += (n - 1) * s
        return lo, hi - lo, value

    def snapshot(self, alloc: Allocation) -> np.ndarray:
        """A host copy of an allocation's bytes as they are now."""
        if alloc.space == "device":
            cp = self.cupy
            mem = cp.cuda.UnownedMemory(alloc.base, alloc.nbytes, alloc.keep)
            raw = cp.ndarray((alloc.nbytes,), cp.uint8, memptr=cp.cuda.MemoryPointer(mem, 0))
            return raw.get()
        keep = alloc.keep
        if isinstance(keep, np.ndarray) and keep.nbytes == alloc.nbytes and (
                keep.flags.c_contiguous or keep.flags.f_contiguous):
            return keep.ravel(order="K").view(np.uint8).copy()
        if not alloc.nbytes:
            return np.zeros(0, np.uint8)
        import ctypes  # the bytes a strided view spans, read where they are

        return np.ctypeslib.as_array((ctypes.c_uint8 * alloc.nbytes).from_address(
            alloc.base)).copy()

    def owner(self, value: Any, described: tuple) -> tuple[int, int]:
        """(first address, bytes) of the array owning the memory `value` views, as the
        program asked for it (CuPy's pool rounds allocations up to 512 bytes); the view's
        own span where that array is unknown or not contiguous."""
        space = described[4]
        root: Any = None
        if space in ("sim", "host"):
            root = _root(value._ary if space == "sim" else value)
            address = root.__array_interface__["data"][0]
        elif self.on_gpu and isinstance(value, self.cupy.ndarray):
            root = value
            while isinstance(root.base, self.cupy.ndarray):
                root = root.base
            address = int(root.data.ptr)
        if root is not None and (root.flags.c_contiguous or root.flags.f_contiguous):
            return address, int(root.nbytes)
        if self.on_gpu and (whole := numba_allocation(value, described[0])) is not None:
            return whole[0], whole[1]
        first, size, _ = self.span(value, described)
        return first, size

    def pristine(self, snap: np.ndarray, regions: list[tuple[int, int]], dtype: np.dtype
                 ) -> np.ndarray | None:
        """What a replay may restore of memory the call found (`snap`, a snapshot of the
        whole allocation): the bytes of the first of `regions` ((offset, bytes): the array
        owning the memory, then the view that first showed it) whose elements are all
        equal, bit for bit (a constant carries no data prepared outside the call), zeros
        elsewhere; None if no region is constant. Elements are the view's when it is
        numeric, else bytes (a structured dtype one element long would let any bytes
        through). Compared on the host: on the GPU, CuPy's comparison and reduction
        kernels are compiled by NVRTC in every worker (~1 s each), while copying a call's
        temporaries out takes milliseconds."""
        step = dtype.itemsize if dtype.kind in "biufc" and dtype.itemsize <= 16 else 1
        for start, size in regions:
            if start < 0 or start + size > snap.size:
                continue
            view = snap[start:start + size]
            rows = view.reshape(-1, step if view.size % step == 0 else 1)
            if rows.size and not (rows == rows[0]).all():
                continue
            out = np.zeros_like(snap)
            out[start:start + size] = view
            return out
        return None

    def fresh(self, alloc: Allocation, instead: dict[int, np.ndarray] | None = None) -> Any:
        """New memory of the allocation's size, as the call found it: the kit's inputs
        where they lie (fill n replaced by instead[n] where given), the bytes pristine()
        allowed of other memory, zeros elsewhere."""
        init = alloc.pristine  # host bytes, or None
        if alloc.space == "device":
            buf = self.cupy.zeros(alloc.nbytes, self.cupy.uint8)
            if init is not None:
                buf[: init.size] = self.cupy.asarray(init)
        else:
            buf = np.zeros(max(alloc.nbytes, 1), np.uint8)
            if init is not None:
                buf[: init.size] = init
        for n, (ref, host) in enumerate(alloc.fills):
            host = (instead or {}).get(n, host)
            target = self.view(buf, ref, alloc.space)
            if alloc.space == "device":
                target[...] = self.cupy.asarray(host)
            else:
                (target._ary if alloc.space == "sim" else target)[...] = host
        return buf

    def view(self, buf: Any, ref: ArrayRef, space: str) -> Any:
        """The array `ref` describes, on fresh memory `buf`."""
        dtype = np.dtype(ref.dtype)
        if space == "device":
            cp = self.cupy
            return cp.ndarray(ref.shape, dtype, memptr=buf.data + ref.offset,
                              strides=ref.strides)
        array = np.ndarray(ref.shape, dtype, buffer=buf, offset=ref.offset, strides=ref.strides)
        return self.sim_type(array) if space == "sim" else array

    def to_host(self, value: Any) -> np.ndarray:
        if self.sim_type is not None and isinstance(value, self.sim_type):
            return np.array(value._ary, copy=True)
        if self.on_gpu and isinstance(value, self.cupy.ndarray):
            return value.get()
        return np.array(value, copy=True)


# ---------------------------------------------------------------------------------------
# The recorder


class Recorder:
    """Installed once per worker, before the submission is imported."""

    def __init__(self, submission: Path, on_gpu: bool):
        self.submission = str(Path(submission).resolve()) + os.sep
        self.memory = Memory(on_gpu)
        self.on_gpu = on_gpu
        self.mode: str | None = None  # None: not in a graded call
        self.record = Record()
        self._lock = threading.Lock()
        self._inside = threading.local()
        self._launch: Callable[[Any, tuple, tuple], None] | None = None
        self._copy_into: Callable[[Any, Any], None] | None = None
        self._kernel_type: type = object  # numba's kernels (dispatchers) in this mode
        self._wrapped: tuple[str, ...] = ()  # the methods of that class the recorder wraps
        self._gemms: tuple = ()  # the trusted GEMMs handed out (gemm_observer)

    # installing ------------------------------------------------------------------------

    def install(self) -> None:
        """Wrap the launch paths of numba's kernels and nnkit.backend's copies, keeping
        private references to the originals (the replay launches through them)."""
        from grader.worker import tamper
        from nnkit import backend

        self._copy_into = backend.copy_into
        backend.set_copy_observer(self._observe_copy)
        if self.on_gpu:
            self._install_gpu()
        else:
            self._install_sim()
        # The recorder is within the submission's reach (the copy observer is one of its
        # methods, and the launch paths close over it): what it replays with, and the
        # launch paths it wrapped, must be as installed when results are written.
        tamper.watch(self, state=("mode", "record", "_gemms"))
        tamper.watch(self.memory)
        tamper.watch(self._kernel_type, only=self._wrapped)

    def _install_gpu(self) -> None:
        from numba.cuda import dispatcher as numba_dispatcher

        cls = numba_dispatcher.CUDADispatcher
        getitem, configure = cls.__getitem__, cls.configure
        recorder = self
        self._kernel_type, self._wrapped = cls, ("__getitem__", "configure")

        class Recording:
            __slots__ = ("kernel", "config", "inner")

            def __init__(self, kernel, config, inner):
                self.kernel, self.config, self.inner = kernel, config, inner

            def __getattr__(self, name):  # griddim, blockdim ... as numba's object has them
                return getattr(self.inner, name)

            def __call__(self, *args):
                with recorder.launching(self.kernel, self.config, args):
                    return self.inner(*args)

        def recording_getitem(kernel, config):
            return Recording(kernel, _config_of(config), getitem(kernel, config))

        def recording_configure(kernel, griddim, blockdim, stream=0, sharedmem=0):
            return Recording(kernel, (griddim, blockdim, sharedmem),
                             configure(kernel, griddim, blockdim, stream, sharedmem))

        cls.__getitem__ = recording_getitem
        cls.configure = recording_configure

        def launch(kernel, config, args):
            grid, block, shared = config
            getitem(kernel, (grid, block, 0, shared))(*args)

        self._launch = launch

    def _install_sim(self) -> None:
        from numba.cuda.simulator import kernel as sim

        cls = sim.FakeCUDAKernel
        call, getitem = cls.__call__, cls.__getitem__
        self._kernel_type, self._wrapped = cls, ("__call__",)
        context = sim._kernel_context  # non-empty while a kernel runs (device calls)
        recorder = self

        def recording_call(kernel, *args):
            if kernel._device or context:  # a device function called from a kernel
                return call(kernel, *args)
            with recorder.launching(kernel, (kernel.grid_dim, kernel.block_dim,
                                             kernel.dynshared_size), args):
                return call(kernel, *args)

        cls.__call__ = recording_call

        def launch(kernel, config, args):
            grid, block, shared = config
            getitem(kernel, (grid, block, 0, shared))
            call(kernel, *args)

        self._launch = launch

    # recording -------------------------------------------------------------------------

    def begin(self, mode: str, kit_arrays: list[tuple[Any, np.ndarray]] = ()) -> None:
        """A graded call starts. kit_arrays: (device array, its host bytes before the
        call) for every buffer the kit gave the call."""
        with self._lock:
            self.record = Record()
            self.mode = mode
            if mode == FULL:
                for array, host in kit_arrays:
                    found = self._allocation(array, kit=True, pristine=host)
                    if found is not None:
                        n = found[0]
                        self.record.inputs.append(
                            (n, len(self.record.allocations[n].fills) - 1))

    def end(self) -> Record:
        with self._lock:
            self.mode = None
            return self.record

    def _own(self, kernel: Any) -> bool:
        fn = getattr(kernel, "py_func", None) or getattr(kernel, "fn", None)
        code = getattr(fn, "__code__", None)
        return bool(code) and code.co_filename.startswith(self.submission)

    @contextmanager
    def launching(self, kernel: Any, config: tuple, args: tuple) -> Iterator[None]:
        """Around one launch: record it, unless it is part of a launch already recorded
        (numba's own first launch goes through `configure`, which is wrapped too)."""
        if getattr(self._inside, "launch", False):
            yield
            return
        self._note_launch(kernel, config, args)
        self._inside.launch = True
        try:
            yield
        finally:
            self._inside.launch = False

    def _note_launch(self, kernel: Any, config: tuple, args: tuple) -> None:
        if self.mode is None:
            return
        own = self._own(kernel)
        with self._lock:
            if own:
                self.record.own_launches += 1
            else:
                self.record.other_launches += 1
            if self.mode == FULL:
                refs = tuple(self._ref(a, f"argument {i} of {getattr(kernel, '__name__', '?')}")
                             for i, a in enumerate(args))
                self.record.ops.append(Launch(kernel, config, refs, own))

    def _observe_copy(self, dst: Any, src: Any) -> None:
        """nnkit.backend.copy_into calls this before it copies."""
        if self.mode != FULL:
            return
        with self._lock:
            d, s = self._ref(dst, "copy destination"), self._ref(src, "copy source")
            if isinstance(d, ArrayRef) and isinstance(s, ArrayRef):
                self.record.ops.append(Copy(d, s))

    def gemm_observer(self, gemm: Callable) -> Callable:
        """The trusted GEMM handed to a student function, recorded as it is called."""
        recorder = self
        self._gemms += (gemm,)

        # The handout's signature: the flags may come by position as well.
        def recorded(A, B, C, alpha=1.0, beta=0.0, trans_a=False, trans_b=False):
            if recorder.mode == FULL:
                with recorder._lock:
                    refs = [recorder._ref(x, name) for x, name in ((A, "A"), (B, "B"),
                                                                   (C, "C"))]
                    if all(isinstance(r, ArrayRef) for r in refs):
                        recorder.record.ops.append(Gemm(gemm, *refs, float(alpha), float(beta),
                                                        bool(trans_a), bool(trans_b)))
            return gemm(A, B, C, alpha, beta, trans_a=trans_a, trans_b=trans_b)

        return recorded

    def _allocation(self, value: Any, kit: bool = False, pristine: np.ndarray | None = None,
                    described: tuple | None = None) -> tuple[int, tuple] | None:
        described = described or self.memory.describe(value)
        if described is None:
            return None
        address, shape, strides, dtype, space = described
        found = None
        for n, alloc in enumerate(self.record.allocations):
            if alloc.space == space and alloc.base <= address < alloc.base + max(alloc.nbytes, 1):
                found = n
                break
        if found is None:
            # A kit input is its own allocation, exactly the bytes its view spans; other
            # memory is taken whole (a temporary and the views the call makes of it).
            base, nbytes, keep = (self.memory.span(value, described) if kit
                                  else self.memory.extent(value, described))
            alloc = Allocation(base, nbytes, space, keep, kit, itemsize=dtype.itemsize)
            if not kit:
                owner_first, owner_size = self.memory.owner(value, described)
                first, size, _ = self.memory.span(value, described)
                alloc.pristine = self.memory.pristine(
                    self.memory.snapshot(alloc),
                    [(owner_first - base, owner_size), (first - base, size)], dtype)
            self.record.allocations.append(alloc)
            found = len(self.record.allocations) - 1
        if kit:
            alloc = self.record.allocations[found]
            alloc.kit = True
            alloc.fills.append((ArrayRef(found, address - alloc.base, tuple(shape),
                                         tuple(strides), dtype.str), np.asarray(pristine)))
        return found, described

    def _ref(self, value: Any, what: str) -> Any:
        """An ArrayRef for an array argument; scalars as they are."""
        found = self._allocation(value)
        if found is None:
            if isinstance(value, int | float | bool | np.generic | complex) or value is None:
                return value
            self.record.unrecorded.append(f"{what}: {type(value).__name__}")
            return value
        n, (address, shape, strides, dtype, _) = found
        return ArrayRef(n, address - self.record.allocations[n].base, tuple(shape),
                        tuple(strides), dtype.str)

    def ref_of(self, value: Any) -> ArrayRef | None:
        """Where an output of the call lives, among the memory the call used."""
        described = self.memory.describe(value)
        if described is None:
            return None
        address = described[0]
        for n, alloc in enumerate(self.record.allocations):
            if alloc.space == described[4] and alloc.base <= address < alloc.base + max(
                    alloc.nbytes, 1):
                return ArrayRef(n, address - alloc.base, tuple(described[1]),
                                tuple(described[2]), described[3].str)
        return None

    # replaying -------------------------------------------------------------------------

    def replay(self, record: Record, outputs: dict[str, ArrayRef | None],
               inputs: list[np.ndarray] | None = None) -> dict[str, Any]:
        """Run the record's operations again on fresh memory; the outputs, as host arrays
        (None for an output that lives in memory the recorded operations never touched).
        `inputs`: other host values for the kit's inputs, one per array begin() got and
        in its order, each of the shape and dtype of the one it replaces."""
        if self._launch is None:
            raise ReplayError("the recorder is not installed")
        memory = self.memory
        instead = self._instead(record, inputs)
        bufs = [memory.fresh(a, instead.get(n)) for n, a in enumerate(record.allocations)]

        def rebuild(value: Any) -> Any:
            if isinstance(value, ArrayRef):
                return memory.view(bufs[value.alloc], value, record.allocations[value.alloc].space)
            return value

        self._vet(record)
        mode, self.mode = self.mode, None  # the replay itself is not recorded
        try:
            for op in record.ops:
                if isinstance(op, Launch):
                    self._launch(op.kernel, op.config, tuple(rebuild(a) for a in op.args))
                elif isinstance(op, Copy):
                    self._copy_into(rebuild(op.dst), rebuild(op.src))
                else:
                    op.fn(rebuild(op.A), rebuild(op.B), rebuild(op.C), op.alpha, op.beta,
                          trans_a=op.trans_a, trans_b=op.trans_b)
            if memory.on_gpu:
                memory.cupy.cuda.runtime.deviceSynchronize()
            return {name: None if ref is None else memory.to_host(rebuild(ref))
                    for name, ref in outputs.items()}
        finally:
            self.mode = mode

    def _vet(self, record: Record) -> None:
        """Every operation of the record as the recorder makes them: a launch of one of
        numba's kernels, a copy, a GEMM the kit handed out. The record is within the
        submission's reach during the call; an operation it added (a host function
        called as a "GEMM", say) would run in the replay."""
        for op in record.ops:
            if type(op) is Launch and isinstance(op.kernel, self._kernel_type):
                continue
            if type(op) is Copy or (type(op) is Gemm and any(op.fn is g for g in self._gemms)):
                continue
            raise ReplayError(f"the record of the call holds an operation the kit did not "
                              f"record ({type(op).__name__}): it was changed")

    @staticmethod
    def _instead(record: Record, inputs: list[np.ndarray] | None) -> dict[int, dict]:
        """{allocation: {fill: host array}} for a replay on other inputs."""
        if inputs is None:
            return {}
        if len(inputs) != len(record.inputs):
            raise ReplayError(f"{len(inputs)} replay inputs for {len(record.inputs)} buffers")
        instead: dict[int, dict] = {}
        for (alloc, fill), host in zip(record.inputs, inputs, strict=True):
            old = record.allocations[alloc].fills[fill][1]
            host = np.asarray(host)
            if host.shape != old.shape or host.dtype != old.dtype:
                raise ReplayError(f"a replay input of {host.dtype}{host.shape} for one of "
                                  f"{old.dtype}{old.shape}")
            instead.setdefault(alloc, {})[fill] = host
        return instead


def _config_of(config: Any) -> tuple:
    """(grid, block, dynamic shared memory) of a `kernel[...]` configuration."""
    if not isinstance(config, tuple):
        return (config, 1, 0)
    grid = config[0]
    block = config[1] if len(config) > 1 else 1
    shared = config[3] if len(config) > 3 else 0
    return grid, block, shared


class NullRecorder:
    """For jobs that run none of a submission's code (cuBLAS timed as a reference)."""

    mode = None

    def begin(self, mode: str, kit_arrays: list = ()) -> None:
        pass

    def end(self) -> Record:
        return Record()

    def ref_of(self, value: Any) -> None:
        return None
