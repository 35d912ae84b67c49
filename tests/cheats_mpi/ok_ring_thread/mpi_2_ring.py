"""A correct ring with blocking Send and Recv, made deadlock-free by sending from a
thread of its own: the kit's ring communicator once found its call only on the calling
thread's stack (red team, round four)."""

import threading

import numpy as np


def chunk_bounds(length, parts):
    base, extra = divmod(length, parts)
    out = [0]
    for c in range(parts):
        out.append(out[-1] + base + (1 if c < extra else 0))
    return out


def ring_allreduce(comm, buffer):
    size, rank = comm.Get_size(), comm.Get_rank()
    if size == 1:
        return
    b = chunk_bounds(buffer.size, size)
    right, left = (rank + 1) % size, (rank - 1) % size
    for phase in (0, 1):
        for s in range(size - 1):
            out_c = (rank - s + phase) % size
            in_c = (rank - s - 1 + phase) % size
            outgoing = buffer[b[out_c]:b[out_c + 1]].copy()
            sender = threading.Thread(target=comm.Send, args=(outgoing, right, 10 * phase + s))
            sender.start()
            got = np.empty(b[in_c + 1] - b[in_c], np.float32)
            comm.Recv(got, source=left, tag=10 * phase + s)
            sender.join()
            if phase:
                buffer[b[in_c]:b[in_c + 1]] = got
            else:
                buffer[b[in_c]:b[in_c + 1]] += got
