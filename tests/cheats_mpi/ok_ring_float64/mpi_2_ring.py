"""A correct ring that sums in a float64 working copy and passes float64 chunks: every
rank moves twice the bytes of a float32 ring, evenly."""

import numpy as np


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
    work = buffer.astype(np.float64)
    bounds = chunk_bounds(work.size, size)
    right, left = (rank + 1) % size, (rank - 1) % size
    incoming = np.empty(bounds[1] - bounds[0], dtype=np.float64)

    def chunk(c: int) -> np.ndarray:
        return work[bounds[c % size]:bounds[c % size + 1]]

    for step in range(size - 1):
        send, recv = chunk(rank - step), chunk(rank - step - 1)
        got = incoming[:recv.size]
        comm.Sendrecv(send, dest=right, sendtag=step, recvbuf=got, source=left, recvtag=step)
        recv += got
    for step in range(size - 1):
        send, recv = chunk(rank + 1 - step), chunk(rank - step)
        got = incoming[:recv.size]
        comm.Sendrecv(send, dest=right, sendtag=size + step, recvbuf=got, source=left,
                      recvtag=size + step)
        recv[...] = got
    buffer[...] = work.astype(np.float32)
