"""The honest ring, but rank 1 ends its process with status 0 in the last case, once its
buffer holds the right sum (its last result is never written, nor its marker)."""
import os

import numpy as np


def ring_allreduce(comm, buffer):
    rank, size = comm.Get_rank(), comm.Get_size()
    if size > 1:
        base, extra = divmod(buffer.size, size)
        bounds = [0]
        for c in range(size):
            bounds.append(bounds[-1] + base + (1 if c < extra else 0))
        right, left = (rank + 1) % size, (rank - 1) % size
        incoming = np.empty(bounds[1] - bounds[0], dtype=buffer.dtype)
        for phase in (0, 1):
            for step in range(size - 1):
                out_c, in_c = (rank - step + phase) % size, (rank - step - 1 + phase) % size
                part = buffer[bounds[in_c]:bounds[in_c + 1]]
                got = incoming[:part.size]
                comm.Sendrecv(buffer[bounds[out_c]:bounds[out_c + 1]], dest=right,
                              sendtag=step, recvbuf=got, source=left, recvtag=step)
                if phase == 0:
                    part += got
                else:
                    part[...] = got
    if size == 4 and buffer.size == 100002 and rank == 1:
        os._exit(0)
