"""Alternative ring all-reduce: the ring turns the other way (send to the left, receive
from the right), chunks are numbered so that rank r ends the reduce-scatter owning chunk r,
and every step is one Sendrecv_replace of a scratch buffer as long as the largest chunk
(chunks differ by one element at most; the shorter ones travel padded)."""

import numpy as np


def chunk_bounds(length, parts):
    sizes = [length // parts] * parts
    for c in range(length % parts):
        sizes[c] += 1
    return [0, *np.cumsum(sizes).tolist()]


def ring_allreduce(comm, buffer):
    p = comm.Get_size()
    r = comm.Get_rank()
    if p < 2:
        return
    edges = chunk_bounds(len(buffer), p)
    width = max(edges[1] - edges[0], 1)  # chunk 0 is the largest; never a 0-length message
    left = (r - 1) % p
    right = (r + 1) % p
    scratch = np.zeros(width, dtype=np.float32)

    def view(c):
        return buffer[edges[c]:edges[c + 1]]

    def exchange(out_c, tag):
        scratch[:] = 0
        scratch[:view(out_c).size] = view(out_c)
        comm.Sendrecv_replace(scratch, dest=left, sendtag=tag, source=right, recvtag=tag)

    # Reduce-scatter: in step s rank r sends chunk (r + s + 1) mod p to the left and adds
    # chunk (r + s + 2) mod p, arriving from the right; at the end it owns chunk r.
    for s in range(p - 1):
        in_c = (r + s + 2) % p
        exchange((r + s + 1) % p, s)
        view(in_c)[:] += scratch[:view(in_c).size]
    # All-gather: in step s rank r sends chunk (r + s) mod p, complete, to the left and
    # copies chunk (r + s + 1) mod p, arriving from the right.
    for s in range(p - 1):
        in_c = (r + s + 1) % p
        exchange((r + s) % p, p + s)
        view(in_c)[:] = scratch[:view(in_c).size]
