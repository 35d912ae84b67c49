"""Alternative data parallelism: the images scattered in whole rows through a derived
datatype (one element = one row of d floats, so the counts and displacements are in rows),
and the gradients combined array by array with Allreduce in place."""

import numpy as np
from mpi4py import MPI


def shard_counts(n, size):
    counts = []
    left = n
    for r in range(size):
        share = -(-left // (size - r))  # ceil: the earlier ranks take the extra rows
        counts.append(share)
        left -= share
    return counts


def scatter_batch(comm, X, labels, root=0):
    rank = comm.Get_rank()
    n, d = comm.bcast(X.shape if rank == root else None, root=root)
    counts = shard_counts(n, comm.Get_size())
    displs = [0]
    for c in counts[:-1]:
        displs.append(displs[-1] + c)
    row = MPI.FLOAT.Create_contiguous(d)
    row.Commit()
    X_mine = np.zeros((counts[rank], d), np.float32)
    y_mine = np.zeros(counts[rank], np.int64)
    send_x = [np.ascontiguousarray(X, np.float32), counts, displs, row] if rank == root else None
    send_y = [np.ascontiguousarray(labels, np.int64), counts, displs, MPI.INT64_T] \
        if rank == root else None
    comm.Scatterv(send_x, [X_mine, counts[rank], row], root=root)
    comm.Scatterv(send_y, y_mine, root=root)
    row.Free()
    return X_mine, y_mine


def allreduce_gradients(comm, grads, n_local, n_total):
    result = []
    for g in grads:
        buf = np.array(g, dtype=np.float32, copy=True)
        buf *= np.float32(n_local / n_total)
        comm.Allreduce(MPI.IN_PLACE, [buf, MPI.FLOAT], op=MPI.SUM)
        result.append(buf)
    return result
