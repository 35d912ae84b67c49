"""Correct: the ring turning the other way (rank r sends to r - 1 and receives from
r + 1), with Isend/Irecv pairs; it must keep every point."""

import numpy as np
from mpi4py import MPI


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
    bounds = chunk_bounds(buffer.size, size)
    left, right = (rank - 1) % size, (rank + 1) % size
    incoming = np.empty(bounds[1] - bounds[0], dtype=buffer.dtype)

    def chunk(c: int) -> np.ndarray:
        return buffer[bounds[c % size]:bounds[c % size + 1]]

    for step in range(2 * (size - 1)):
        gather = step >= size - 1
        s = step - (size - 1) if gather else step
        send = chunk(rank + s - 1) if gather else chunk(rank + s)
        recv = chunk(rank + s) if gather else chunk(rank + s + 1)
        got = incoming[:recv.size]
        requests = [comm.Irecv(got, source=right, tag=step),
                    comm.Isend(send, dest=left, tag=step)]
        MPI.Request.Waitall(requests)
        if gather:
            recv[...] = got
        else:
            recv += got
