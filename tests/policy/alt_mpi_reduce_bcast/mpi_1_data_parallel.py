"""Alternative data parallelism: counts and displacements as NumPy arrays from a cumulative
sum, the shape sent by a capitalised Bcast of an int64 array, and the gradients combined
array by array with Reduce to rank 0 followed by Bcast."""

import numpy as np
from mpi4py import MPI


def shard_counts(n, size):
    return [n // size + int(r < n % size) for r in range(size)]


def scatter_batch(comm, X, labels, root=0):
    rank = comm.Get_rank()
    dims = np.zeros(2, dtype=np.int64)
    if rank == root:
        dims[:] = X.shape
    comm.Bcast([dims, MPI.INT64_T], root=root)
    n, d = int(dims[0]), int(dims[1])
    counts = np.array(shard_counts(n, comm.Get_size()), dtype=np.int64)
    displs = np.zeros_like(counts)
    displs[1:] = np.cumsum(counts)[:-1]
    mine = int(counts[rank])
    X_part = np.empty((mine, d), dtype=np.float32)
    y_part = np.empty(mine, dtype=np.int64)
    if rank == root:
        comm.Scatterv([X, counts * d, displs * d, MPI.FLOAT], [X_part, MPI.FLOAT], root=root)
        comm.Scatterv([labels, counts, displs, MPI.INT64_T], [y_part, MPI.INT64_T], root=root)
    else:
        comm.Scatterv(None, [X_part, MPI.FLOAT], root=root)
        comm.Scatterv(None, [y_part, MPI.INT64_T], root=root)
    return X_part, y_part


def allreduce_gradients(comm, grads, n_local, n_total):
    weight = np.float32(n_local) / np.float32(n_total)
    combined = []
    for g in grads:
        mine = (np.asarray(g, dtype=np.float32) * weight).astype(np.float32)
        total = np.empty_like(mine)
        comm.Reduce(mine, total, op=MPI.SUM, root=0)
        comm.Bcast(total, root=0)
        combined.append(total)
    return combined
