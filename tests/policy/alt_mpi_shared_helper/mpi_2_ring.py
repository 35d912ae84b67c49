"""Alternative ring that reuses shard_counts from mpi_1_data_parallel (whose other
functions use collectives, which the ring does not touch), with Sendrecv and a
module-level helper class."""

import numpy as np

from .mpi_1_data_parallel import shard_counts


class Ring:
    def __init__(self, comm):
        self._comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()

    def exchange(self, send, recv, tag: int) -> None:
        right, left = (self.rank + 1) % self.size, (self.rank - 1) % self.size
        self._comm.Sendrecv(send, dest=right, sendtag=tag, recvbuf=recv, source=left,
                            recvtag=tag)


def chunk_bounds(length: int, parts: int) -> list[int]:
    bounds = [0]
    for count in shard_counts(length, parts):
        bounds.append(bounds[-1] + count)
    return bounds


def ring_allreduce(comm, buffer) -> None:
    ring = Ring(comm)
    p, r = ring.size, ring.rank
    if p == 1:
        return
    bounds = chunk_bounds(buffer.size, p)
    views = [buffer[bounds[c]:bounds[c + 1]] for c in range(p)]
    incoming = np.empty_like(views[0])
    for step in range(p - 1):
        recv = views[(r - step - 1) % p]
        ring.exchange(views[(r - step) % p], incoming[:recv.size], step)
        recv += incoming[:recv.size]
    for step in range(p - 1):
        recv = views[(r - step) % p]
        ring.exchange(views[(r + 1 - step) % p], incoming[:recv.size], p + step)
        recv[...] = incoming[:recv.size]
