"""The kit's own MPI building blocks: the trusted twins of the Part 3 student functions,
the reduce strategies compared with MPI's Allreduce, and a communicator that counts bytes.

Strategies (Su, Chen and Morgan's list, with the kit's reading of the two mixing ones;
the draft names them without defining them):

- all-reduce: MPI's Allreduce, the exact weighted sum, however the library does it;
- ring: reduce-scatter then all-gather between neighbours, exact, 2 (p - 1) / p of the
  buffer sent by every rank;
- butterfly mixing: at the t-th reduce, rank r averages its model with that of rank
  r XOR 2^(t mod log2 p). One exchange of the whole buffer per reduce; log2 p reduces in a
  row, with no update in between, give the exact average. p must be a power of two;
- hopping ring: at the t-th reduce, rank r sends its model h = 2^(t mod ceil(log2 p))
  ranks ahead on the ring and averages it with the one arriving from h ranks behind. One
  message out and one in per reduce, for any p; for p a power of two, log2 p reduces in a
  row give the exact average (hops 1, 2, 4, ... double the ranks mixed each time).

The mixing strategies weigh both partners equally (they do not know each other's shard
sizes); all-reduce and ring weigh each rank by its share of the rows.

Nothing here imports numba or touches a GPU: arrays are host NumPy arrays.

(A module over 400 lines on purpose: the student kit ships it with the twins stubbed
(stubgen works per module), and the grader's tamper messages and the MPI cheats name its
functions and counters as `nnkit.collectives.*`. Its three banner sections, twins and
strategies, the byte-counting communicators, and launching mpiexec, are where it would
split.)
"""

from __future__ import annotations

import array
import functools
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

EXACT = ("allreduce", "ring")
MIXING = ("butterfly", "hopping")
STRATEGIES = EXACT + MIXING

# Calls that combine values across ranks: a ring written "with point-to-point messages"
# must not use any of them.
REDUCING_COLLECTIVES = frozenset({
    "Allreduce", "allreduce", "Reduce", "reduce", "Reduce_scatter", "Reduce_scatter_block",
    "Iallreduce", "Ireduce", "Ireduce_scatter", "Ireduce_scatter_block", "Scan", "Exscan",
    "scan", "exscan", "Allreduce_init", "Reduce_init", "Reduce_local",
})


def split_counts(n: int, parts: int) -> list[int]:
    """n items over `parts` owners, as even as possible, the first n % parts one more."""
    base, extra = divmod(n, parts)
    return [base + (1 if r < extra else 0) for r in range(parts)]


def offsets(counts: list[int]) -> list[int]:
    """Where each owner's block starts: the running sum of the counts before it."""
    return [int(x) for x in np.concatenate([[0], np.cumsum(counts)[:-1]])] if counts else []


# The bodies of the three trusted twins below are Part 3's answers: between solution
# markers, so that the student kit ships them as stubs (grader/course/dist.py).
def scatter_batch(comm: Any, X: np.ndarray | None, labels: np.ndarray | None,
                  root: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The kit's Scatterv of a minibatch's rows (same contract as the student's)."""
    ### BEGIN SOLUTION
    from mpi4py import MPI

    rank, size = comm.Get_rank(), comm.Get_size()
    n, d = comm.bcast(X.shape if rank == root else None, root=root)
    counts = split_counts(n, size)
    starts = offsets(counts)
    X_local = np.empty((counts[rank], d), dtype=np.float32)
    labels_local = np.empty(counts[rank], dtype=np.int64)
    send_x = send_y = None
    if rank == root:
        send_x = [np.ascontiguousarray(X, dtype=np.float32), [c * d for c in counts],
                  [s * d for s in starts], MPI.FLOAT]
        send_y = [np.ascontiguousarray(labels, dtype=np.int64), counts, starts, MPI.INT64_T]
    comm.Scatterv(send_x, X_local, root=root)
    comm.Scatterv(send_y, labels_local, root=root)
    return X_local, labels_local
    ### END SOLUTION


def pack(arrays: list[np.ndarray], scale: float = 1.0) -> np.ndarray:
    """One contiguous float32 buffer holding scale * every array, one after the other."""
    flat = np.concatenate([np.asarray(a, dtype=np.float32).ravel() for a in arrays])
    return flat * np.float32(scale) if scale != 1.0 else flat


def unpack(flat: np.ndarray, like: list[np.ndarray]) -> list[np.ndarray]:
    """Arrays shaped like `like`, cut from a buffer made by pack()."""
    out, start = [], 0
    for a in like:
        out.append(flat[start:start + a.size].reshape(a.shape))
        start += a.size
    return out


def allreduce_gradients(comm: Any, grads: list[np.ndarray], n_local: int,
                        n_total: int) -> list[np.ndarray]:
    """The kit's weighted gradient all-reduce: sum over ranks of (n_local / n_total) * grads."""
    ### BEGIN SOLUTION
    from mpi4py import MPI

    flat = pack(grads, n_local / n_total)
    comm.Allreduce(MPI.IN_PLACE, flat, op=MPI.SUM)
    return unpack(flat, grads)
    ### END SOLUTION


def ring_allreduce(comm: Any, buffer: np.ndarray) -> None:
    """The kit's ring all-reduce (reduce-scatter, then all-gather), in place, with Sendrecv."""
    ### BEGIN SOLUTION
    rank, size = comm.Get_rank(), comm.Get_size()
    if size == 1:
        return
    bounds = offsets(split_counts(buffer.size, size)) + [buffer.size]
    right, left = (rank + 1) % size, (rank - 1) % size
    scratch = np.empty(bounds[1] - bounds[0], dtype=buffer.dtype)
    for phase in (0, 1):  # 0: reduce-scatter (add), 1: all-gather (copy)
        for step in range(size - 1):
            out_chunk = (rank - step + phase) % size
            in_chunk = (rank - step - 1 + phase) % size
            part = buffer[bounds[in_chunk]:bounds[in_chunk + 1]]
            got = scratch[:part.size]
            tag = phase * size + step
            comm.Sendrecv(buffer[bounds[out_chunk]:bounds[out_chunk + 1]], dest=right,
                          sendtag=tag, recvbuf=got, source=left, recvtag=tag)
            if phase == 0:
                part += got
            else:
                part[...] = got
    ### END SOLUTION


def _exchange_and_average(comm: Any, buffer: np.ndarray, dest: int, source: int) -> None:
    """buffer <- (buffer + the buffer of `source`) / 2, sending ours to `dest`."""
    got = np.empty_like(buffer)
    comm.Sendrecv(buffer, dest=dest, sendtag=77, recvbuf=got, source=source, recvtag=77)
    buffer += got
    buffer *= np.float32(0.5)


def log2_ranks(size: int) -> int:
    """ceil(log2 size): the number of hop lengths 1, 2, 4, ... below size."""
    return max(1, (size - 1).bit_length())


def butterfly_mix(comm: Any, buffer: np.ndarray, stage: int) -> None:
    """One butterfly-mixing reduce: average with rank XOR 2^(stage mod log2 p), in place."""
    rank, size = comm.Get_rank(), comm.Get_size()
    if size == 1:
        return
    if size & (size - 1):
        raise ValueError(f"butterfly mixing needs a power-of-two number of ranks, not {size}")
    partner = rank ^ (1 << (stage % log2_ranks(size)))
    _exchange_and_average(comm, buffer, partner, partner)


def hopping_ring_mix(comm: Any, buffer: np.ndarray, stage: int) -> None:
    """One hopping-ring reduce: send h ranks ahead, average with the model from h behind,
    h = 2^(stage mod ceil(log2 p)); in place."""
    rank, size = comm.Get_rank(), comm.Get_size()
    if size == 1:
        return
    hop = 1 << (stage % log2_ranks(size))
    _exchange_and_average(comm, buffer, (rank + hop) % size, (rank - hop) % size)


def mix(strategy: str, comm: Any, buffer: np.ndarray, stage: int) -> None:
    if strategy == "butterfly":
        butterfly_mix(comm, buffer, stage)
    elif strategy == "hopping":
        hopping_ring_mix(comm, buffer, stage)
    else:
        raise ValueError(f"{strategy!r} is not a mixing strategy ({', '.join(MIXING)})")


def simulate_mix(strategy: str, buffers: list[np.ndarray], stage: int) -> list[np.ndarray]:
    """What mix() leaves on every rank, computed in one process from every rank's buffer
    (the same float32 operations, so the same bits)."""
    size = len(buffers)
    if size == 1:
        return [b.copy() for b in buffers]
    if strategy == "butterfly":
        if size & (size - 1):
            raise ValueError(f"butterfly mixing needs a power-of-two number of ranks, not {size}")
        source = [r ^ (1 << (stage % log2_ranks(size))) for r in range(size)]
    elif strategy == "hopping":
        hop = 1 << (stage % log2_ranks(size))
        source = [(r - hop) % size for r in range(size)]
    else:
        raise ValueError(f"{strategy!r} is not a mixing strategy ({', '.join(MIXING)})")
    out = []
    for r in range(size):
        mixed = buffers[r] + buffers[source[r]]
        mixed *= np.float32(0.5)
        out.append(mixed)
    return out


# --------------------------------------------------------------------------------------
# Counting what a rank sends
#
# Sizes are read from a call's buffer specification as mpi4py reads it (a buffer, or
# [buffer, count, datatype] and the other forms of mpi4py.typing.BufSpec / BufSpecV),
# with numpy's and MPI's own sizes: the buffer's bytes, the datatype's size and extent.
# Counting never fails a call: a specification the kit cannot read is counted as unknown
# (and, when it is wrong, MPI itself refuses it in the call that follows).


def _mpi() -> Any:
    """mpi4py.MPI if it is loaded (a specification can only hold MPI objects then):
    counting alone never initialises MPI."""
    return sys.modules.get("mpi4py.MPI")


def _is_datatype(value: Any) -> bool:
    MPI = _mpi()
    return isinstance(value, str) or (MPI is not None and isinstance(value, MPI.Datatype))


def _type_sizes(datatype: Any) -> tuple[int, int]:
    """(size, extent) in bytes of an MPI datatype or a typecode string ('f', 'd', ...)."""
    MPI = _mpi()
    if isinstance(datatype, str):
        if MPI is None:
            return (np.dtype(datatype).itemsize,) * 2
        datatype = MPI.Datatype.fromcode(datatype)
    return int(datatype.Get_size()), int(datatype.Get_extent()[1])


def _buffer_bytes(buf: Any) -> tuple[int, int]:
    """(bytes, item size) of a buffer object (NumPy array, bytes, array.array, ...)."""
    MPI = _mpi()
    if buf is None or (MPI is not None and buf is MPI.BOTTOM):
        return 0, 1
    view = memoryview(buf)
    return int(view.nbytes), int(view.itemsize)


class NotPlainArgument(TypeError):
    """A count, displacement, rank or buffer of a counted call that is not a plain value."""


_NUMPY_SCALARS = frozenset(np.sctypeDict.values())


def _not_plain(value: Any, depth: int = 0) -> Any:
    """The first part of `value` that is not made of types whose answers cannot change
    between two readings (ints, floats, strings, NumPy arrays and scalars, MPI's own
    objects, lists and tuples of those), or None. The counters read a call's counts,
    displacements and ranks, and then MPI reads them again: a student's class with
    __int__ and __index__ answering differently, or an __int__ counting its calls, showed
    the counters a ring's bytes while MPI sent every buffer to every rank (red team).
    Exact types only: a subclass can override."""
    kind = type(value)
    if value is None or kind in (int, bool, float, str, bytes, bytearray, memoryview,
                                 array.array):
        return None
    if kind in (list, tuple):
        if depth >= 4:
            return value
        return next((bad for bad in (_not_plain(item, depth + 1) for item in value)
                     if bad is not None), None)
    if kind is np.ndarray:
        return value if value.dtype.hasobject else None
    if kind in _NUMPY_SCALARS:
        return None
    MPI = _mpi()
    return None if MPI is not None and getattr(MPI, kind.__name__, None) is kind else value


def require_plain(name: str, *values: Any) -> None:
    """Raise NotPlainArgument for a value of a counted call that is not plain
    (_not_plain)."""
    for value in values:
        bad = _not_plain(value)
        if bad is not None:
            raise NotPlainArgument(
                f"comm.{name}: a value of type {type(bad).__name__}: buffers, counts, "
                "displacements and ranks must be NumPy arrays, Python or NumPy numbers, "
                "MPI datatypes and lists or tuples of these")


def message_bytes(spec: Any) -> int:
    """Bytes that a point-to-point buffer specification sends: `buf`, `[buf, count]`,
    `[buf, datatype]`, `[buf, count, datatype]`, `[buf, (count, displ), datatype]` or
    `[buf, count, displ, datatype]`, a missing count meaning the rest of the buffer.
    Raises on a specification it cannot read (callers count it as unknown)."""
    if spec is None:
        return 0
    count = datatype = None
    displ = 0
    if isinstance(spec, list | tuple):
        if not 1 <= len(spec) <= 4:
            raise ValueError(f"a buffer specification of {len(spec)} items")
        buf, rest = spec[0], list(spec[1:])
        if len(rest) == 1:
            if _is_datatype(rest[0]):
                datatype = rest[0]
            elif isinstance(rest[0], list | tuple):
                count, displ = rest[0]
            else:
                count = rest[0]
        elif len(rest) == 2:
            count, datatype = rest
            if isinstance(count, list | tuple):
                count, displ = count
        elif len(rest) == 3:
            count, displ, datatype = rest
    else:
        buf = spec
    total, itemsize = _buffer_bytes(buf)
    size, extent = _type_sizes(datatype) if datatype is not None else (itemsize, itemsize)
    displ = int(displ or 0)
    if count is None:
        count = total // extent - displ if extent else 0
    return max(int(count), 0) * size


def element_bytes(payload: Any) -> int:
    """Bytes of one element of a message: its datatype's, else its array's (0 for a
    Python object that is not an array)."""
    if isinstance(payload, list | tuple) and payload and not isinstance(payload[0], int):
        datatype = next((x for x in payload[1:] if _is_datatype(x)), None)
        if datatype is not None:
            return int(_type_sizes(datatype)[0])
        payload = payload[0]
    return int(getattr(payload, "itemsize", 0) or 0) if hasattr(payload, "dtype") else 0


def vector_bytes(spec: Any, comm_size: int) -> list[int]:
    """Bytes for each rank of a vector buffer specification (Scatterv's send buffer):
    `buf`, `[buf, counts]`, `[buf, (counts, displs)]`, `[buf, datatype]`,
    `[buf, counts, datatype]`, `[buf, (counts, displs), datatype]` or
    `[buf, counts, displs, datatype]`; no counts: the buffer in equal parts."""
    counts = datatype = None
    if isinstance(spec, list | tuple):
        if not 1 <= len(spec) <= 4:
            raise ValueError(f"a buffer specification of {len(spec)} items")
        buf, rest = spec[0], list(spec[1:])
        if len(rest) == 1:
            if _is_datatype(rest[0]):
                datatype = rest[0]
            else:
                counts = rest[0]
        elif len(rest) == 2:
            counts, datatype = rest
        elif len(rest) == 3:
            counts, _, datatype = rest
        # (counts, displs) in one item: a pair whose first element is a sequence
        if isinstance(counts, tuple | list) and len(counts) == 2 and \
                isinstance(counts[0], list | tuple | np.ndarray):
            counts = counts[0]
    else:
        buf = spec
    total, itemsize = _buffer_bytes(buf)
    size, extent = _type_sizes(datatype) if datatype is not None else (itemsize, itemsize)
    if counts is None:
        each = total // extent // comm_size if extent else 0
        return [each * size] * comm_size
    return [max(int(c), 0) * size for c in counts]


def object_bytes(obj: Any) -> int:
    """Bytes of a pickled message (send, isend, sendrecv, ...): mpi4py's own pickling."""
    MPI = _mpi()
    if MPI is None:
        import pickle

        return len(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
    return len(MPI.pickle.dumps(obj))


class CountingComm:
    """A communicator that forwards every call to the real one and keeps a tally, for the
    training loop and the benchmarks (the grader's ring item uses point_to_point()).

    `calls` counts the methods used by name; `bytes_sent` adds up the payload this rank
    hands to MPI: exact for point-to-point sends (Send, Isend, Ssend, Sendrecv); for the
    collectives, the payload of the textbook algorithm: Scatterv and Bcast at the root,
    the bytes leaving for the other ranks; Allreduce, 2 (p - 1) / p of the buffer, what a
    ring sends (the library may choose another algorithm). Messages of Python objects
    (lowercase calls such as bcast) are counted as calls only: they are small control data.
    Counting never fails a call: a buffer specification the kit cannot read is counted in
    `unknown` (and its error in `problems`), and the call goes on.
    """

    POINT_TO_POINT = ("Send", "Isend", "Ssend", "Bsend", "Rsend", "Issend")

    def __init__(self, comm: Any):
        self._comm = comm
        self._size, self._rank = comm.Get_size(), comm.Get_rank()  # fixed for a communicator
        self.calls: Counter[str] = Counter()
        self.bytes_sent = 0
        self.unknown = 0
        self.problems: list[str] = []

    @property
    def __class__(self) -> type:
        """The wrapped communicator's class, for isinstance tests of the code it is handed
        to (type() still tells the truth)."""
        return self._comm.__class__

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._comm, name)
        if not callable(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            try:
                self.bytes_sent += self._payload(name, args, kwargs)
            except Exception as err:  # noqa: BLE001 - the kit's failure, never the call's
                self.unknown += 1
                if len(self.problems) < 3:
                    self.problems.append(f"{name}: {type(err).__name__}: {err}")
            return target(*args, **kwargs)

        return call

    def _payload(self, name: str, args: tuple, kwargs: dict) -> int:
        if name == "Allreduce":
            buffer = args[1] if len(args) > 1 else kwargs.get("recvbuf")
            return message_bytes(buffer) * 2 * (self._size - 1) // self._size
        if name in self.POINT_TO_POINT or name in ("Sendrecv", "Bcast", "Scatter", "Scatterv"):
            return root_hands_out(name, args, kwargs, self._size, self._rank)
        return 0


# Calls that send nothing (queries, receives, probes, waits): every other call of a
# communicator is counted by root_hands_out, whatever it is named.
_SENDS_NOTHING = frozenset({
    "Get_rank", "Get_size", "Get_group", "Get_name", "Get_topology", "Get_info",
    "Is_inter", "Is_intra", "Recv", "Irecv", "recv", "irecv", "Mrecv", "Probe", "Iprobe",
    "probe", "iprobe", "Mprobe", "Improbe", "mprobe", "improbe", "Barrier", "Ibarrier",
    "barrier", "Dup", "Clone", "Split", "Create", "Create_group", "Idup",
})
_ROOTED = {"Bcast": 1, "Ibcast": 1, "Scatter": 2, "Iscatter": 2, "Scatterv": 2,
           "Iscatterv": 2, "bcast": 1, "scatter": 1, "Reduce": 2, "Ireduce": 2,
           "reduce": 2, "Gather": 2, "Igather": 2, "Gatherv": 2, "Igatherv": 2,
           "gather": 1}
_POINT_TO_POINT = ("Send", "Isend", "Ssend", "Issend", "Bsend", "Ibsend", "Rsend", "Irsend",
                   "Sendrecv", "Sendrecv_replace", "Isendrecv", "Isendrecv_replace")


def root_hands_out(name: str, args: tuple, kwargs: dict, size: int, rank: int) -> int:
    """Bytes a call hands to MPI for the other ranks of a communicator of `size`: buffers
    and pickled objects alike, any call that sends (the scatter item's count). A
    broadcast, or a collective every rank takes part in, delivers its buffer to each of
    the size - 1 others; a call root does not root sends nothing from root."""
    if name in _SENDS_NOTHING:
        return 0
    first = args[0] if args else kwargs.get(
        "buf", kwargs.get("sendbuf", kwargs.get("obj", kwargs.get("sendobj"))))
    mpi = _mpi()
    if mpi is not None and first is mpi.IN_PLACE:  # the data is in the receive buffer
        first = args[1] if len(args) > 1 else kwargs.get("recvbuf")
    if first is None:
        return 0
    if name in _POINT_TO_POINT:
        return message_bytes(first)
    if name in ("send", "ssend", "isend", "issend", "bsend", "ibsend", "sendrecv"):
        return object_bytes(first)
    root_at = _ROOTED.get(name)
    if root_at is not None:
        root = args[root_at] if len(args) > root_at else kwargs.get("root", 0)
        if rank != root:
            return 0
    pickled = name[:1].islower()
    if name == "scatter":
        return sum(object_bytes(x) for q, x in enumerate(first) if q != rank)
    if name in ("Scatterv", "Iscatterv"):
        parts = vector_bytes(first, size)
        return sum(parts) - (parts[rank] if rank < len(parts) else 0)
    if name in ("Scatter", "Iscatter"):
        return message_bytes(first) * (size - 1) // size
    # Broadcasts, reductions, gathers, all-to-alls: the buffer to each other rank.
    return (object_bytes(first) if pickled else message_bytes(first)) * (size - 1)


# Attributes of a communicator that lead to a communicator the proxy does not count: its
# handles, and its group (from which MPI.Intracomm.Create_from_group builds a twin).
_HANDLES = frozenset({"py2f", "handle", "f2py", "fromhandle", "toint", "Detach", "Get_group",
                      "group"})


def counting_proxy(comm: Any, tally: list[int] | None = None,
                   ) -> tuple[Any, Callable[[], tuple[int, int]]]:
    """(a communicator that forwards every call to `comm`, a function that returns the
    bytes its calls handed to MPI for the other ranks and how many calls could not be
    read). The tally lives in this closure, not on the object the submission gets (the
    policy refuses closures and private attributes in graded code). A communicator a
    call returns (Dup, Split, Create_group, Idup's in a tuple) is counted into the same
    tally; handles and the group, which rebuild the real communicator, are refused."""
    size, rank = int(comm.Get_size()), int(comm.Get_rank())
    tally = [0, 0] if tally is None else tally
    mpi = _mpi()

    class Counted:
        __slots__ = ()

        def __getattr__(self, name: str) -> Any:
            if name in _HANDLES:
                raise AttributeError(f"comm.{name} is not available in the scatter item: it "
                                     "leads to a communicator whose calls the item cannot "
                                     "count")
            target = getattr(comm, name)
            if not callable(target):
                return target

            def call(*args: Any, **kwargs: Any) -> Any:
                # a lowercase call's object is pickled, not read as counts (and a class of
                # the submission's would not unpickle on the other ranks)
                pickled = name[:1].islower()
                require_plain(name, *args[int(pickled):],
                              *(v for k, v in kwargs.items() if not (
                                  pickled and k in ("obj", "sendobj"))))
                try:
                    tally[0] += root_hands_out(name, args, kwargs, size, rank)
                except Exception:  # noqa: BLE001 - the kit's failure, never the call's
                    tally[1] += 1
                return counted(target(*args, **kwargs))

            return call

        def __repr__(self) -> str:
            return f"<communicator of {size} rank(s)>"

        @property
        def __class__(self) -> type:  # isinstance(comm, MPI.Intracomm) holds; type() is true
            return mpi.Intracomm if mpi is not None else Counted

    def counted(result: Any) -> Any:
        """`result`, with every communicator in it counted into the same tally (Idup
        returns one in a tuple with its request)."""
        if mpi is None:
            return result
        if isinstance(result, mpi.Comm):
            return counting_proxy(result, tally)[0] if result != mpi.COMM_NULL else result
        if isinstance(result, tuple | list):
            return type(result)(counted(x) for x in result)
        return result

    return Counted(), lambda: (tally[0], tally[1])


# The calls of a communicator that call_point_to_point() lets through.
POINT_TO_POINT_CALLS = frozenset({
    "Get_rank", "Get_size", "Send", "Ssend", "Isend", "Issend", "Rsend", "Irsend", "Recv",
    "Irecv", "Sendrecv", "Sendrecv_replace", "Isendrecv", "Isendrecv_replace", "send",
    "ssend", "isend", "issend", "recv", "irecv", "sendrecv", "Probe", "Iprobe", "probe",
    "iprobe", "Mprobe", "Improbe", "mprobe", "improbe", "Barrier", "barrier",
})


class PointToPointOnly(AttributeError):
    """A communicator method that the ring item does not allow."""


class _Tally:
    """The real communicator and what went through it; lives only as a local variable of
    call_point_to_point's frame (see PointToPointComm)."""

    __slots__ = ("comm", "size", "rank", "sent_to", "calls", "unknown", "problems", "wide",
                 "requests")

    def __init__(self, comm: Any):
        self.comm = comm
        self.size, self.rank = int(comm.Get_size()), int(comm.Get_rank())
        self.sent_to = [0] * self.size
        self.calls: Counter[str] = Counter()
        self.unknown = 0
        self.problems: list[str] = []
        self.wide = 0  # bytes sent in messages of 8-byte elements (a float64 copy)
        # The nonblocking calls' requests (MPI's, kept alive with the buffers they hold)
        # and what the submission got for each, to see them completed.
        self.requests: list[tuple[Any, Any]] = []

    def started(self, request: Any) -> Any:
        MPI = _mpi()
        handed = request
        if MPI is not None and type(request) is MPI.Request:
            handed = _watched_request(MPI)(request)
        self.requests.append((request, handed))
        return handed

    def sending(self, name: str, payload: Any, dest: Any, pickled: bool = False) -> None:
        require_plain(name, dest, *(() if pickled else (payload,)))
        self.calls[name] += 1
        try:
            target = int(dest)
            if target == _mpi().PROC_NULL or not 0 <= target < self.size:
                return  # nothing leaves (PROC_NULL), or MPI refuses the call
            size = object_bytes(payload) if pickled else message_bytes(payload)
            self.sent_to[target] += size
            if element_bytes(payload) >= 8:
                self.wide += size
        except Exception as err:  # noqa: BLE001 - the kit's failure, never the call's
            self.unknown += 1
            if len(self.problems) < 3:
                self.problems.append(f"{name}: {type(err).__name__}: {err}")

    def receiving(self, name: str) -> Any:
        self.calls[name] += 1
        return self.comm


def _tally() -> _Tally:
    """The tally of the call_point_to_point() this call runs in: found on the stack, so
    that no object handed to the submission leads to the communicator (reading frames is
    the kit's alone in a grading job: the audit hook refuses it to submitted code)."""
    # Only PointToPointComm's own methods may ask: a submission that called this itself
    # (the module is already loaded in the rank, so importing it raises no audit event)
    # would get the real communicator and the tally it is counted by.
    if sys._getframe(1).f_code not in _COMM_CODES:
        raise RuntimeError("the ring's communicator is reached only through its methods")
    frame = _call_frame(sys._getframe(2))
    if frame is None:  # a thread of the submission's, started during the call
        found = [f for f in map(_call_frame, sys._current_frames().values()) if f is not None]
        frame = found[0] if len(found) == 1 else None
    if frame is None:
        raise RuntimeError("this communicator works only during the call it was given to")
    return frame.f_locals["tally"]


@functools.cache
def _watched_request(MPI: Any) -> type:
    """MPI.Request whose Free refuses a request not yet complete: freed, an Isend's buffer
    stays in MPI's hands with nothing left to wait on, and the request no longer shows
    as pending (red team). Made once MPI is loaded; shares the original's handle."""
    class Request(MPI.Request):
        def Free(self) -> None:
            if self != MPI.REQUEST_NULL and not self.Test():
                raise RuntimeError(
                    "Request.Free on a request that has not completed: MPI may still be "
                    "using its buffer, and nothing could wait on it any more. Complete it "
                    "with Wait (or Waitall, or a Test that returns True)")

    return Request


def _call_frame(frame: Any) -> Any:
    """The frame of call_point_to_point() on the stack that `frame` is on, or None."""
    while frame is not None and frame.f_code is not _CALL_CODE:
        frame = frame.f_back
    return frame


class _AnyType:
    """Stands for MPI.ANY_SOURCE / MPI.ANY_TAG in defaults (MPI is not loaded yet)."""

    def __repr__(self) -> str:
        return "ANY"


_ANY: Any = _AnyType()


def _source(value: int) -> int:
    return _mpi().ANY_SOURCE if value is _ANY else value


def _tag(value: int) -> int:
    return _mpi().ANY_TAG if value is _ANY else value


class PointToPointComm:
    """The communicator the ring item gets: `rank`, `size` and the point-to-point calls
    (POINT_TO_POINT_CALLS: sends and receives of buffers and of Python objects, blocking,
    non-blocking and combined, probes and Barrier), with mpi4py's signatures; the requests
    that Isend and Irecv return are MPI's own, with their waits and tests. Any other
    attribute (Allreduce, Allgather, bcast, Dup, Split, Abort, ...) raises
    PointToPointOnly, an AttributeError that says so. The object holds nothing: each call
    finds the real communicator and the tally on the stack (_tally)."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        raise PointToPointOnly(
            f"comm.{name}: the ring item allows point-to-point messages only (Send, Recv, "
            "Sendrecv, Sendrecv_replace, Isendrecv, Isend, Irecv, Ssend, Issend, Rsend, "
            "Irsend and their lowercase forms, the probes, Barrier, rank and size); "
            "collectives, persistent requests (Send_init), Dup, Split and the like are not "
            "available here")

    def __repr__(self) -> str:
        return "<point-to-point communicator of the ring item>"

    @property
    def __class__(self) -> type:
        """MPI.Intracomm, for isinstance tests (type() still tells the truth)."""
        mpi = _mpi()
        return mpi.Intracomm if mpi is not None else PointToPointComm

    @property
    def rank(self) -> int:
        return _tally().rank

    @property
    def size(self) -> int:
        return _tally().size

    def Get_rank(self) -> int:
        tally = _tally()
        tally.calls["Get_rank"] += 1
        return tally.rank

    def Get_size(self) -> int:
        tally = _tally()
        tally.calls["Get_size"] += 1
        return tally.size

    def Send(self, buf: Any, dest: int, tag: int = 0) -> None:
        tally = _tally()
        tally.sending("Send", buf, dest)
        return tally.comm.Send(buf, dest, tag)

    def Ssend(self, buf: Any, dest: int, tag: int = 0) -> None:
        tally = _tally()
        tally.sending("Ssend", buf, dest)
        return tally.comm.Ssend(buf, dest, tag)

    def Isend(self, buf: Any, dest: int, tag: int = 0) -> Any:
        tally = _tally()
        tally.sending("Isend", buf, dest)
        return tally.started(tally.comm.Isend(buf, dest, tag))

    def Issend(self, buf: Any, dest: int, tag: int = 0) -> Any:
        tally = _tally()
        tally.sending("Issend", buf, dest)
        return tally.started(tally.comm.Issend(buf, dest, tag))

    def Rsend(self, buf: Any, dest: int, tag: int = 0) -> None:
        tally = _tally()
        tally.sending("Rsend", buf, dest)
        return tally.comm.Rsend(buf, dest, tag)

    def Irsend(self, buf: Any, dest: int, tag: int = 0) -> Any:
        tally = _tally()
        tally.sending("Irsend", buf, dest)
        return tally.started(tally.comm.Irsend(buf, dest, tag))

    def Isendrecv(self, sendbuf: Any, dest: int, sendtag: int = 0, recvbuf: Any = None,
                  source: int = _ANY, recvtag: int = _ANY) -> Any:
        tally = _tally()
        tally.sending("Isendrecv", sendbuf, dest)
        return tally.started(tally.comm.Isendrecv(sendbuf, dest, sendtag, recvbuf,
                                                  _source(source), _tag(recvtag)))

    def Isendrecv_replace(self, buf: Any, dest: int, sendtag: int = 0, source: int = _ANY,
                          recvtag: int = _ANY) -> Any:
        tally = _tally()
        tally.sending("Isendrecv_replace", buf, dest)
        return tally.started(tally.comm.Isendrecv_replace(buf, dest, sendtag, _source(source),
                                                          _tag(recvtag)))

    def Recv(self, buf: Any, source: int = _ANY, tag: int = _ANY, status: Any = None) -> None:
        return _tally().receiving("Recv").Recv(buf, _source(source), _tag(tag), status)

    def Irecv(self, buf: Any, source: int = _ANY, tag: int = _ANY) -> Any:
        tally = _tally()
        return tally.started(tally.receiving("Irecv").Irecv(buf, _source(source), _tag(tag)))

    def Sendrecv(self, sendbuf: Any, dest: int, sendtag: int = 0, recvbuf: Any = None,
                 source: int = _ANY, recvtag: int = _ANY, status: Any = None) -> None:
        tally = _tally()
        tally.sending("Sendrecv", sendbuf, dest)
        return tally.comm.Sendrecv(sendbuf, dest, sendtag, recvbuf, _source(source),
                                   _tag(recvtag), status)

    def Sendrecv_replace(self, buf: Any, dest: int, sendtag: int = 0, source: int = _ANY,
                         recvtag: int = _ANY, status: Any = None) -> None:
        tally = _tally()
        tally.sending("Sendrecv_replace", buf, dest)
        return tally.comm.Sendrecv_replace(buf, dest, sendtag, _source(source),
                                           _tag(recvtag), status)

    def send(self, obj: Any, dest: int, tag: int = 0) -> None:
        tally = _tally()
        tally.sending("send", obj, dest, pickled=True)
        return tally.comm.send(obj, dest, tag)

    def ssend(self, obj: Any, dest: int, tag: int = 0) -> None:
        tally = _tally()
        tally.sending("ssend", obj, dest, pickled=True)
        return tally.comm.ssend(obj, dest, tag)

    def isend(self, obj: Any, dest: int, tag: int = 0) -> Any:
        tally = _tally()
        tally.sending("isend", obj, dest, pickled=True)
        return tally.started(tally.comm.isend(obj, dest, tag))

    def issend(self, obj: Any, dest: int, tag: int = 0) -> Any:
        tally = _tally()
        tally.sending("issend", obj, dest, pickled=True)
        return tally.started(tally.comm.issend(obj, dest, tag))

    def recv(self, buf: Any = None, source: int = _ANY, tag: int = _ANY,
             status: Any = None) -> Any:
        return _tally().receiving("recv").recv(buf, _source(source), _tag(tag), status)

    def irecv(self, buf: Any = None, source: int = _ANY, tag: int = _ANY) -> Any:
        tally = _tally()
        return tally.started(tally.receiving("irecv").irecv(buf, _source(source), _tag(tag)))

    def sendrecv(self, sendobj: Any, dest: int, sendtag: int = 0, recvbuf: Any = None,
                 source: int = _ANY, recvtag: int = _ANY, status: Any = None) -> Any:
        tally = _tally()
        tally.sending("sendrecv", sendobj, dest, pickled=True)
        return tally.comm.sendrecv(sendobj, dest, sendtag, recvbuf, _source(source),
                                   _tag(recvtag), status)

    def Barrier(self) -> None:
        return _tally().receiving("Barrier").Barrier()

    def barrier(self) -> None:
        return _tally().receiving("barrier").barrier()

    # Probes, matched probes (whose Message is received from, not the communicator) and
    # their lowercase forms: one signature, made by _probe below.
    Probe: Any
    Iprobe: Any
    probe: Any
    iprobe: Any
    Mprobe: Any
    Improbe: Any
    mprobe: Any
    improbe: Any


def _probe(name: str) -> Callable[..., Any]:
    def probe(self: PointToPointComm, source: int = _ANY, tag: int = _ANY,
              status: Any = None) -> Any:
        return getattr(_tally().receiving(name), name)(_source(source), _tag(tag), status)

    probe.__name__ = probe.__qualname__ = name
    return probe


for _name in ("Probe", "Iprobe", "probe", "iprobe", "Mprobe", "Improbe", "mprobe", "improbe"):
    setattr(PointToPointComm, _name, _probe(_name))


def call_point_to_point(fn: Callable, comm: Any, *args: Any) -> dict:
    """Call fn(PointToPointComm(), *args) with `comm` behind it; return the tally:
    `sent_to`, the bytes this rank handed to MPI for each rank of comm (dest = PROC_NULL or
    this rank itself: moved nowhere, still listed at its own index); `calls`, the methods
    used by name; `unknown` and `problems`, sends whose size the kit could not read
    (counting never fails a call); `pending`, the nonblocking calls' requests that were
    not complete when fn returned (never waited on or tested to completion). What a
    rank received is what the others sent to it: the grader adds it up from every
    rank's tally."""
    tally = _Tally(comm)  # found by PointToPointComm's calls on the stack: keep the name
    fn(PointToPointComm(), *args)
    null, pending = _mpi().REQUEST_NULL, 0
    for _, handed in tally.requests:
        if handed != null:
            pending += 1
            try:
                handed.Test()  # one that did complete is released (a test frees it)
            except Exception:  # noqa: BLE001, S110 - counting never fails the call
                pass
    return {"sent_to": list(tally.sent_to), "calls": dict(tally.calls),
            "unknown": tally.unknown, "problems": list(tally.problems), "wide": tally.wide,
            "pending": pending}


_CALL_CODE = call_point_to_point.__code__
# The code of PointToPointComm's methods and properties: the only callers of _tally().
_COMM_CODES = frozenset(
    getattr(value.fget if isinstance(value, property) else value, "__code__", None)
    for value in vars(PointToPointComm).values()) - {None}


# --------------------------------------------------------------------------------------
# Starting MPI jobs


def find_mpiexec() -> str | None:
    """The mpiexec next to this interpreter (the venv's MPICH wheel), else the PATH's."""
    beside = Path(sys.executable).parent / "mpiexec"
    if beside.exists():
        return str(beside)
    return shutil.which("mpiexec")


def mpiexec_command(ranks: int, mpiexec: str | None = None) -> list[str]:
    """[mpiexec, -n, ranks, ...] for ranks on this machine, with the flags Open MPI needs
    to run more ranks than cores, as root, and where no ssh is installed (its default
    launcher stops if none is found, even for local ranks); MPICH's Hydra needs none."""
    mpiexec = mpiexec or find_mpiexec()
    if mpiexec is None:
        raise FileNotFoundError("no mpiexec: install the kit's environment (pip install "
                                "mpich mpi4py) or load the site's MPI module")
    command = [mpiexec, "-n", str(ranks)]
    try:
        version = subprocess.run([mpiexec, "--version"], capture_output=True, text=True,
                                 timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        version = ""
    if "Open MPI" in version or "OpenRTE" in version:
        command.append("--oversubscribe")
        if "OpenRTE" in version:  # Open MPI 4: its local-only launcher needs no ssh
            command += ["--mca", "plm", "isolated"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            command.append("--allow-run-as-root")
    return command


# MPICH's ranks spin while they wait for a message. With these settings a waiting rank
# soon sleeps instead (a little latency per message): on a machine with fewer cores than
# ranks, or a small virtual machine, the spinning ranks otherwise slow the working ones.
MPICH_YIELD = {"MPIR_CVAR_ENABLE_HEAVY_YIELD": "1", "MPIR_CVAR_POLLS_BEFORE_YIELD": "10",
               # Open MPI's ranks spin too; this one makes an idle rank yield its core.
               "OMPI_MCA_mpi_yield_when_idle": "1"}


def rank_environment(base: dict[str, str] | None = None, polite: bool = False) -> dict[str, str]:
    """The environment for a fresh MPI job started from this process: without the
    variables of an MPI job we may be running in (a nested mpiexec would otherwise try to
    join it), and one BLAS thread per rank so that ranks, not threads, share the cores.
    polite: waiting ranks yield their core, under MPICH or Open MPI (MPICH_YIELD,
    unless already set)."""
    env = dict(os.environ if base is None else base)
    for key in list(env):
        if key.startswith(("PMI_", "PMIX_", "HYDRA_", "MPI_LOCAL", "OMPI_COMM_WORLD_")):
            del env[key]
    for key in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[key] = "1"
    if polite:
        for key, value in MPICH_YIELD.items():
            env.setdefault(key, value)
    return env
