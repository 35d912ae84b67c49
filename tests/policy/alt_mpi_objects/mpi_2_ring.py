"""Alternative ring all-reduce: nonblocking Isend/Irecv pairs completed with
MPI.Request.Waitall, chunks from np.array_split, helpers from a sibling module, a Barrier
at the end."""

import numpy as np
from mpi4py import MPI

from .ring_helpers import neighbours, total


def chunk_bounds(length: int, parts: int) -> list[int]:
    sizes = [len(c) for c in np.array_split(np.empty(length), parts)]
    return [total(sizes[:c]) for c in range(parts + 1)]


def ring_allreduce(comm, buffer) -> None:
    assert isinstance(comm, MPI.Comm), "a communicator, please"
    rank, size = comm.Get_rank(), comm.Get_size()
    if size < 2:
        return
    right, left = neighbours(rank, size)
    chunks = np.array_split(buffer, size)  # views into buffer
    scratch = np.empty(chunks[0].size, dtype=buffer.dtype)
    for step in range(size - 1):
        send = chunks[(rank - step) % size]
        recv = chunks[(rank - step - 1) % size]
        got = scratch[:recv.size]
        requests = [comm.Isend(send, dest=right, tag=step),
                    comm.Irecv(got, source=left, tag=step)]
        MPI.Request.Waitall(requests)
        np.add(recv, got, out=recv)
    for step in range(size - 1):
        send = chunks[(rank + 1 - step) % size]
        recv = chunks[(rank - step) % size]
        got = scratch[:recv.size]
        requests = [comm.Isend(send, dest=right, tag=size + step),
                    comm.Irecv(got, source=left, tag=size + step)]
        MPI.Request.Waitall(requests)
        recv[:] = got
    comm.Barrier()


if __name__ == "__main__":
    comm = MPI.COMM_WORLD
    data = np.ones(10, dtype=np.float32)
    ring_allreduce(comm, data)
    comm.Allreduce(MPI.IN_PLACE, data)
