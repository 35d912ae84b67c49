"""Cheat: no ring. Every rank sends its whole buffer to rank 0, which adds them up and
sends the sum back to each: point-to-point calls only, and every other rank moves exactly
a buffer each way, as an all-reduce must; but rank 0 talks to every rank and carries
(p - 1) buffers each way, the bottleneck the ring exists to avoid."""

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
    if rank == 0:
        incoming = np.empty_like(buffer)
        for source in range(1, size):
            comm.Recv(incoming, source=source, tag=1)
            buffer += incoming
        for dest in range(1, size):
            comm.Send(buffer, dest=dest, tag=2)
    else:
        comm.Send(buffer, dest=0, tag=1)
        comm.Recv(buffer, source=0, tag=2)
