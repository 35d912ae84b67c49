"""Alternative ring all-reduce with non-blocking messages: each step posts the receive
first (Irecv into a scratch buffer), then the send (Isend of a copy), and waits for both
with Waitall; the chunk to add or copy is then taken from the scratch buffer."""

import numpy as np
from mpi4py import MPI


def chunk_bounds(length, parts):
    out = [0] * (parts + 1)
    for c in range(parts):
        out[c + 1] = out[c] + length // parts + (c < length % parts)
    return out


def ring_allreduce(comm, buffer):
    p, me = comm.Get_size(), comm.Get_rank()
    if p == 1:
        return
    edge = chunk_bounds(buffer.size, p)
    nxt, prv = (me + 1) % p, (me - 1) % p
    scratch = np.empty(edge[1] - edge[0], np.float32)
    plan = [(s, s, True) for s in range(p - 1)] + [(s - 1, p + s, False) for s in range(p - 1)]
    for shift, tag, adding in plan:
        out_c, in_c = (me - shift) % p, (me - shift - 1) % p
        lo, hi = edge[in_c], edge[in_c + 1]
        got = scratch[:hi - lo]
        requests = [comm.Irecv([got, MPI.FLOAT], source=prv, tag=tag),
                    comm.Isend(buffer[edge[out_c]:edge[out_c + 1]].copy(), dest=nxt, tag=tag)]
        MPI.Request.Waitall(requests)
        if adding:
            buffer[lo:hi] += got
        else:
            buffer[lo:hi] = got
