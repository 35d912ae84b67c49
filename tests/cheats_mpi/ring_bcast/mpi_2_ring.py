"""Each rank broadcasts its buffer in turn (pickled bcast), every rank sums."""
import numpy as np


def ring_allreduce(comm, buffer):
    total = np.zeros_like(buffer)
    for root in range(comm.Get_size()):
        total += comm.bcast(buffer.copy() if comm.Get_rank() == root else None, root=root)
    buffer[...] = total
