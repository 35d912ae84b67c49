"""Combining gradients that live on the devices: the arithmetic, apart from the transport.

Three pieces, each usable with NumPy arrays on the CPU (tests, CPU ranks) and with CuPy
arrays on GPUs (nnkit.nccl_transport):

- weighted shares: rank r computed the mean gradient over its n_r rows of a batch of n;
  scaled by n_r / n before an ordinary sum, the ranks' gradients add up to the gradient of
  the whole batch, whatever the split (uneven shards, a rank with no rows);
- a flat layout: all parameters (and all gradients) in one float32 array, layer by layer
  (W_1, b_1, W_2, b_2, ...), so that one layer's gradient is one contiguous segment that
  can be reduced by itself while the layer below is still being computed;
- the ring all-reduce's schedule (the same chunks as Part 3's ring_allreduce), driven over
  any transport that can exchange a chunk with its neighbours and add it in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from nnkit.collectives import offsets, split_counts


def rank_rows(n_batch: int, size: int, rank: int) -> tuple[int, int]:
    """[lo, hi) of a batch of n_batch rows that `rank` of `size` takes (the counts of
    split_counts: the first n_batch % size ranks take one row more)."""
    counts = split_counts(n_batch, size)
    lo = offsets(counts)[rank]
    return lo, lo + counts[rank]


def shares(counts: list[int]) -> list[float]:
    """Each rank's weight in the sum: its rows over the batch's rows (they add up to 1)."""
    total = sum(counts)
    if total <= 0:
        raise ValueError("a batch needs at least one row")
    return [c / total for c in counts]


def weighted_sum(grads: list[np.ndarray], counts: list[int]) -> np.ndarray:
    """The gradient of the whole batch from the ranks' mean gradients: the oracle that the
    device reduction (scale by the share, then sum) is compared with. float64 sums."""
    out = np.zeros(grads[0].shape, np.float64)
    for g, w in zip(grads, shares(counts), strict=True):
        out += w * np.asarray(g, np.float64)
    return out


# --------------------------------------------------------------------------------------
# One flat array for all the parameters, by layer


@dataclass(frozen=True)
class FlatLayout:
    """Where W_l and b_l sit in the flat array: layer l owns [starts[l], starts[l+1]), W_l
    first (row-major, out x in), then b_l."""

    sizes: tuple[int, ...]  # the network's layer sizes, d, h_1, ..., C

    @property
    def layers(self) -> int:
        return len(self.sizes) - 1

    @property
    def starts(self) -> list[int]:
        out = [0]
        for fan_in, fan_out in zip(self.sizes[:-1], self.sizes[1:], strict=True):
            out.append(out[-1] + fan_out * fan_in + fan_out)
        return out

    @property
    def size(self) -> int:
        return self.starts[-1]

    def segment(self, layer: int) -> slice:
        starts = self.starts
        return slice(starts[layer], starts[layer + 1])

    def views(self, flat: Any) -> tuple[list[Any], list[Any]]:
        """(weights, biases): views of flat (NumPy or CuPy), no copies."""
        weights, biases = [], []
        for layer, (fan_in, fan_out) in enumerate(zip(self.sizes[:-1], self.sizes[1:],
                                                      strict=True)):
            start = self.starts[layer]
            weights.append(flat[start:start + fan_out * fan_in].reshape(fan_out, fan_in))
            biases.append(flat[start + fan_out * fan_in:start + fan_out * fan_in + fan_out])
        return weights, biases

    def pack(self, weights: list[np.ndarray], biases: list[np.ndarray]) -> np.ndarray:
        flat = np.empty(self.size, np.float32)
        W_views, b_views = self.views(flat)
        for dst, src in zip(W_views + b_views, list(weights) + list(biases), strict=True):
            if dst.shape != np.shape(src):
                raise ValueError(f"expected shape {dst.shape}, got {np.shape(src)}")
            dst[...] = src
        return flat


# --------------------------------------------------------------------------------------
# The ring. The two bodies that walk its steps answer Part 3's ring_allreduce: between
# solution markers, so that the student kit ships them as stubs (grader/course/dist.py).


def chunk_bounds(length: int, parts: int) -> list[int]:
    """parts + 1 offsets cutting length elements into chunks whose sizes differ by at most
    one (Part 3's chunks)."""
    return [0, *np.cumsum(split_counts(length, parts)).tolist()]


@dataclass(frozen=True)
class RingStep:
    gather: bool  # False: reduce-scatter (add what arrives); True: all-gather (overwrite)
    send: int  # the chunk sent to the right neighbour
    recv: int  # the chunk received from the left neighbour


def ring_steps(rank: int, size: int) -> list[RingStep]:
    """What `rank` does in the 2 (size - 1) steps of the ring: reduce-scatter step s sends
    chunk (r - s) and receives (r - s - 1); all-gather step s sends (r + 1 - s) and
    receives (r - s), all modulo size. Afterwards every rank holds every chunk's sum."""
    reduce = [RingStep(False, (rank - s) % size, (rank - s - 1) % size)
              for s in range(size - 1)]
    gather = [RingStep(True, (rank + 1 - s) % size, (rank - s) % size)
              for s in range(size - 1)]
    return reduce + gather


def ring_bytes(length: int, size: int, itemsize: int = 4) -> int:
    """Bytes one rank sends in a ring all-reduce of `length` elements (at most 2 (p-1)/p of
    the buffer; exact, chunk by chunk)."""
    if size == 1:
        return 0
    bounds = chunk_bounds(length, size)
    return itemsize * sum(bounds[s.send + 1] - bounds[s.send] for s in ring_steps(0, size))


class Transport(Protocol):
    """What the reduction needs from the ranks' link: NCCL on GPUs, MPI on CPU ranks."""

    rank: int
    size: int

    def allreduce(self, buf: Any) -> None: ...  # in place: the sum over the ranks

    def exchange(self, send: Any, recv: Any) -> None: ...  # send right, receive from left

    def add(self, dst: Any, src: Any) -> None: ...  # dst += src, ordered after exchange


def ring_allreduce(transport: Transport, buf: Any, scratch: Any) -> int:
    """Sum buf (1-D) over the ranks in place with the ring; scratch holds at least the
    largest chunk (len(buf) // size + 1 elements). Returns the bytes this rank sent."""
    ### BEGIN SOLUTION
    size = transport.size
    if size == 1:
        return 0
    bounds = chunk_bounds(buf.size, size)
    sent = 0
    for step in ring_steps(transport.rank, size):
        send = buf[bounds[step.send]:bounds[step.send + 1]]
        recv = buf[bounds[step.recv]:bounds[step.recv + 1]]
        if step.gather:
            transport.exchange(send, recv)
        else:
            got = scratch[:recv.size]
            transport.exchange(send, got)
            transport.add(recv, got)
        sent += send.size * send.itemsize
    return sent
    ### END SOLUTION


def simulate_ring(buffers: list[np.ndarray]) -> list[np.ndarray]:
    """The ring all-reduce of `buffers` (one per rank) computed in one process, step by
    step as the ranks would run it: the stand-in that checks the schedule without ranks."""
    ### BEGIN SOLUTION
    size = len(buffers)
    out = [np.array(b, copy=True) for b in buffers]
    if size == 1:
        return out
    bounds = chunk_bounds(out[0].size, size)
    schedules = [ring_steps(r, size) for r in range(size)]
    for number in range(2 * (size - 1)):
        # Everyone sends before anyone adds: take the outgoing chunks first.
        outgoing = [out[r][bounds[schedules[r][number].send]:
                           bounds[schedules[r][number].send + 1]].copy() for r in range(size)]
        for r in range(size):
            step = schedules[r][number]
            arriving = outgoing[(r - 1) % size]
            target = out[r][bounds[step.recv]:bounds[step.recv + 1]]
            if step.gather:
                target[...] = arriving
            else:
                target += arriving
    return out
    ### END SOLUTION


class MpiTransport:
    """The ranks' link for host (NumPy) arrays over an mpi4py communicator: the CPU
    stand-in for NCCL, so that the device-resident loop runs, and is tested, on CPU ranks."""

    def __init__(self, comm: Any):
        self.comm, self.rank, self.size = comm, comm.Get_rank(), comm.Get_size()

    def allreduce(self, buf: np.ndarray) -> None:
        from mpi4py import MPI

        if self.size > 1:
            self.comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)

    def exchange(self, send: np.ndarray, recv: np.ndarray) -> None:
        right, left = (self.rank + 1) % self.size, (self.rank - 1) % self.size
        self.comm.Sendrecv(np.ascontiguousarray(send), dest=right, recvbuf=recv, source=left)

    def add(self, dst: np.ndarray, src: np.ndarray) -> None:
        dst += src

    # The stream hooks of the GPU transport: nothing to order on the host.
    def after_compute(self) -> None:
        return None

    def before_compute(self) -> None:
        return None

    def synchronize(self) -> None:
        return None

    def describe(self) -> str:
        return "NumPy on the CPU, MPI between ranks (the stand-in for NCCL)"
