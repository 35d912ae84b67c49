"""Ring all-reduce without chunks: the whole buffer relayed around the ring twice (a
running sum from rank 0 to the last, then the total back around). Right sums and
neighbour messages only, but each rank moves the whole buffer twice, not 2(p-1)/p of it."""

import numpy as np


def ring_allreduce(comm, buffer) -> None:
    rank, size = comm.Get_rank(), comm.Get_size()
    if size == 1:
        return
    right, left = (rank + 1) % size, (rank - 1) % size
    incoming = np.empty_like(buffer)
    if rank > 0:  # the running sum goes 0 -> 1 -> ... -> p-1
        comm.Recv(incoming, source=left, tag=1)
        buffer += incoming
    if rank < size - 1:
        comm.Send(buffer, dest=right, tag=1)
    if rank == size - 1:  # the total goes p-1 -> 0 -> 1 -> ... -> p-2
        comm.Send(buffer, dest=right, tag=2)
    else:
        comm.Recv(incoming, source=left, tag=2)
        buffer[...] = incoming
        if rank < size - 2:
            comm.Send(buffer, dest=right, tag=2)
