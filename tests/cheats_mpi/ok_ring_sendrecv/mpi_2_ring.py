"""A correct ring with Sendrecv on one scratch buffer, counts and offsets given explicitly
as [buffer, (count, displacement), MPI.FLOAT], the chunks uneven (the larger ones last)."""
import numpy as np
from mpi4py import MPI


def chunk_bounds(length, parts):
    base, extra = divmod(length, parts)
    sizes = [base + (1 if c >= parts - extra else 0) for c in range(parts)]
    return [int(x) for x in np.concatenate([[0], np.cumsum(sizes)])]


def ring_allreduce(comm, buffer):
    rank, size = comm.Get_rank(), comm.Get_size()
    if size == 1:
        return
    bounds = chunk_bounds(buffer.size, size)
    scratch = np.zeros(buffer.size, np.float32)
    right, left = (rank + 1) % size, (rank - 1) % size
    for step in range(2 * (size - 1)):
        reduce = step < size - 1
        shift = step if reduce else step - (size - 1) - 1
        send_c, recv_c = (rank - shift) % size, (rank - shift - 1) % size
        s0, s1 = bounds[send_c], bounds[send_c + 1]
        r0, r1 = bounds[recv_c], bounds[recv_c + 1]
        comm.Sendrecv([buffer, (s1 - s0, s0), MPI.FLOAT], dest=right, sendtag=step,
                      recvbuf=[scratch, (r1 - r0, r0), MPI.FLOAT], source=left, recvtag=step)
        if reduce:
            buffer[r0:r1] += scratch[r0:r1]
        else:
            buffer[r0:r1] = scratch[r0:r1]
