"""No ring: every rank sends its whole buffer to every other rank; the tally is told
neighbours and chunk-sized messages."""

import numpy as np
from mpi4py import MPI


class Count:
    def __init__(self, shown, real):
        self.shown = shown
        self.real = real

    def __int__(self):
        return self.shown

    def __index__(self):
        return self.real


class Rank:
    """int(): the tally's answer first (a neighbour), then MPI's (the real target)."""

    def __init__(self, shown, real):
        self.answers = [real, shown]

    def __int__(self):
        return self.answers.pop()


def chunk_bounds(length: int, parts: int) -> list[int]:
    base, extra = divmod(length, parts)
    bounds = [0]
    for c in range(parts):
        bounds.append(bounds[-1] + base + (1 if c < extra else 0))
    return bounds


def ring_allreduce(comm, buffer) -> None:
    rank, size = comm.Get_rank(), comm.Get_size()
    if size == 1:
        return
    n = buffer.size
    right = (rank + 1) % size
    mine, incoming, total = buffer.copy(), np.empty_like(buffer), buffer.copy()
    shown = (2 * n - 2 * (n // size)) // (size - 1) + 1
    for k in range(1, size):
        comm.Sendrecv([mine, Count(shown, n), MPI.FLOAT], dest=Rank(right, (rank + k) % size),
                      sendtag=k, recvbuf=incoming, source=(rank - k) % size, recvtag=k)
        total += incoming
    buffer[...] = total
