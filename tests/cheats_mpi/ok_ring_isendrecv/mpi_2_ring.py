"""A correct ring with MPI-4's non-blocking Isendrecv, turning the other way (to r - 1):
the kit's ring communicator once refused Isendrecv, as it did Rsend and the matched
probes (red team, round four)."""

import numpy as np


def chunk_bounds(length: int, parts: int) -> list[int]:
    return [c * (length // parts) + min(c, length % parts) for c in range(parts + 1)]


def ring_allreduce(comm, buffer) -> None:
    p, r = comm.size, comm.rank
    if p < 2:
        return
    b = chunk_bounds(len(buffer), p)
    to, frm = (r - 1) % p, (r + 1) % p
    tmp = np.empty(b[1] - b[0], dtype=np.float32)
    for s in range(p - 1):
        o, i = (r + s) % p, (r + s + 1) % p
        got = tmp[:b[i + 1] - b[i]]
        req = comm.Isendrecv(buffer[b[o]:b[o + 1]], dest=to, sendtag=s,
                             recvbuf=got, source=frm, recvtag=s)
        req.Wait()
        buffer[b[i]:b[i + 1]] += got
    for s in range(p - 1):
        o, i = (r + s - 1) % p, (r + s) % p
        got = tmp[:b[i + 1] - b[i]]
        req = comm.Isendrecv(buffer[b[o]:b[o + 1]], dest=to, sendtag=p + s,
                             recvbuf=got, source=frm, recvtag=p + s)
        req.Wait()
        buffer[b[i]:b[i + 1]] = got
