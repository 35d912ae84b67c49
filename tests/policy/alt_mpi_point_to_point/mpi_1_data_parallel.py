"""Alternative data parallelism with rank-dependent code paths: root sends every other
rank its rows with Send (and copies its own), the shape goes out as a pickled NumPy array
(lowercase bcast), the labels through a pickled scatter of NumPy slices, and the gradients
are summed by the lowercase (pickled) allreduce of one packed array."""


# ruff: noqa: B905 (written as students do: zip without strict)
import numpy as np
from mpi4py import MPI


def shard_counts(n, size):
    # (n + size - 1 - r) // size: the first n % size ranks get the extra row.
    return [(n + size - 1 - r) // size for r in range(size)]


def scatter_batch(comm, X, labels, root=0):
    rank, size = comm.Get_rank(), comm.Get_size()
    shape = comm.bcast(np.array(X.shape, dtype=np.int64) if rank == root else None, root=root)
    n, d = int(shape[0]), int(shape[1])
    counts = shard_counts(n, size)
    starts = [sum(counts[:r]) for r in range(size)]
    if rank == root:
        for r in range(size):
            if r != root and counts[r]:
                rows = np.ascontiguousarray(X[starts[r]:starts[r] + counts[r]], np.float32)
                comm.Send([rows, MPI.FLOAT], dest=r, tag=7)
        mine = np.array(X[starts[rank]:starts[rank] + counts[rank]], dtype=np.float32)
        pieces = [np.array(labels[s:s + c], dtype=np.int64) for s, c in zip(starts, counts)]
    else:
        mine = np.empty((counts[rank], d), dtype=np.float32)
        if counts[rank]:
            comm.Recv([mine, MPI.FLOAT], source=root, tag=7)
        pieces = None
    my_labels = comm.scatter(pieces, root=root)
    return mine, my_labels


def allreduce_gradients(comm, grads, n_local, n_total):
    share = np.float32(n_local / n_total)
    sizes = [g.size for g in grads]
    packed = np.concatenate([np.ravel(g).astype(np.float32) for g in grads]) * share
    summed = comm.allreduce(packed, op=MPI.SUM)
    cuts = np.cumsum(sizes)[:-1]
    return [part.reshape(g.shape).astype(np.float32)
            for part, g in zip(np.split(summed, cuts), grads)]
