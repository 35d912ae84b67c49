"""Part 3, a ring all-reduce written with point-to-point messages.

MPI's Allreduce hides how the sum travels. Here you write the bandwidth-optimal scheme
that NCCL and most MPI libraries use for large buffers. With p ranks in a ring (rank r
sends to r + 1 and receives from r - 1, modulo p) and the buffer cut into p chunks:

1. reduce-scatter, p - 1 steps: in each step every rank passes one chunk to the right
   and adds the chunk arriving from the left into its own copy. Afterwards each rank
   holds the complete sum of one chunk.
2. all-gather, p - 1 steps: every rank passes a completed chunk to the right, and
   overwrites its copy with the completed chunk arriving from the left.

Every rank sends 2 (p - 1) / p of the buffer in all, whatever p: the ring is limited by
the bandwidth of one link, not by the number of ranks.

Use only point-to-point calls of `comm` (Sendrecv, or Send/Recv/Isend/Irecv), never a
collective such as Allreduce or Reduce, and only the communicator you are given.
"""

import numpy as np


def chunk_bounds(length: int, parts: int) -> list[int]:
    """parts + 1 offsets cutting `length` elements into `parts` chunks whose sizes differ
    by at most one; chunks are empty when length < parts.

    Check: `make check FUNCTION=chunk_bounds` (a few lines)."""
    raise NotImplementedError("write chunk_bounds()")


def ring_allreduce(comm, buffer) -> None:
    """Sum a float32 1-D array over the ranks of comm, in place: afterwards every rank's
    buffer holds the elementwise sum of all ranks' buffers. Any length, including lengths
    not divisible by the number of ranks and lengths smaller than it.

    Check: `make check FUNCTION=ring_allreduce` (about 20 lines)."""
    # HINT: in reduce-scatter step s (s = 0 .. p-2) rank r sends chunk (r - s) mod p and
    # HINT: receives chunk (r - s - 1) mod p; in all-gather step s it sends chunk
    # HINT: (r + 1 - s) mod p and receives chunk (r - s) mod p.
    # HINT: Send then Recv on every rank deadlocks once messages are too big for MPI to
    # HINT: buffer: use Sendrecv, which pairs both halves safely.
    raise NotImplementedError("write ring_allreduce()")
