"""Every rank's whole float32 buffer passed p - 1 times around the ring, each rank adding
what arrives: the right sum from neighbour messages, and every rank sends as much as the
others, but (p - 1) n values each instead of the chunked ring's 2n (p - 1) / p (red team,
round four: the ring's byte bound was doubled for any ranks that send evenly, meant for a
float64 working copy; it is now doubled only for messages of 8-byte elements)."""

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
    right, left = (rank + 1) % size, (rank - 1) % size
    outgoing, incoming, total = buffer.copy(), np.empty_like(buffer), buffer.copy()
    for step in range(size - 1):
        comm.Sendrecv(outgoing, dest=right, sendtag=step, recvbuf=incoming, source=left,
                      recvtag=step)
        total += incoming
        outgoing, incoming = incoming, outgoing
    buffer[...] = total
