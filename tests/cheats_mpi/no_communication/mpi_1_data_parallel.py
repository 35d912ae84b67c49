"""Data parallelism without the communication that makes it one training: the rows are
shared out honestly, but allreduce_gradients hands every rank back its own gradient, so
each rank trains on its shard alone and the ranks' models drift apart. Every rank still
returns arrays of the right shapes and dtype, and on one rank nothing is wrong."""
import numpy as np
from mpi4py import MPI


def shard_counts(n, size):
    base, extra = divmod(n, size)
    return [base + (1 if r < extra else 0) for r in range(size)]


def scatter_batch(comm, X, labels, root=0):
    rank, size = comm.Get_rank(), comm.Get_size()
    n, d = comm.bcast(X.shape if rank == root else None, root=root)
    counts = shard_counts(n, size)
    starts = [sum(counts[:r]) for r in range(size)]
    X_local = np.empty((counts[rank], d), np.float32)
    y_local = np.empty(counts[rank], np.int64)
    if rank == root:
        images = np.ascontiguousarray(X, np.float32)
        classes = np.ascontiguousarray(labels, np.int64)
        comm.Scatterv([images, [c * d for c in counts], [s * d for s in starts], MPI.FLOAT],
                      X_local, root=root)
        comm.Scatterv([classes, counts, starts, MPI.INT64_T], y_local, root=root)
    else:
        comm.Scatterv(None, X_local, root=root)
        comm.Scatterv(None, y_local, root=root)
    return X_local, y_local


def allreduce_gradients(comm, grads, n_local, n_total):
    # No message: this rank's own gradient, as if its shard were the whole batch.
    return [np.array(g, dtype=np.float32) for g in grads]
