"""A correct ring with non-blocking messages: Irecv and Isend posted together, then
Waitall, in both phases."""
import numpy as np
from mpi4py import MPI


def chunk_bounds(length, parts):
    base, extra = divmod(length, parts)
    bounds = [0]
    for c in range(parts):
        bounds.append(bounds[-1] + base + (1 if c < extra else 0))
    return bounds


def ring_allreduce(comm, buffer):
    rank, size = comm.rank, comm.size
    if size == 1:
        return
    bounds = chunk_bounds(buffer.size, size)
    right, left = (rank + 1) % size, (rank - 1) % size
    incoming = np.empty(bounds[1] - bounds[0], dtype=np.float32)
    for phase in (0, 1):
        for step in range(size - 1):
            out_c = (rank - step + phase) % size
            in_c = (rank - step - 1 + phase) % size
            part = buffer[bounds[in_c]:bounds[in_c + 1]]
            got = incoming[:part.size]
            requests = [comm.Irecv([got, MPI.FLOAT], source=left, tag=step),
                        comm.Isend([buffer[bounds[out_c]:bounds[out_c + 1]], MPI.FLOAT],
                                   dest=right, tag=step)]
            MPI.Request.Waitall(requests)
            if phase == 0:
                part += got
            else:
                part[...] = got
