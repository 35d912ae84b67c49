"""scatter_batch by broadcast on MPI.COMM_WORLD where the communicator it was given spans
the whole job (the scatter cases of 4 ranks), honestly elsewhere: the world is not the
counting communicator the item hands it. The policy's other-communicator rule, a note in
this module (its other functions get the real communicator), was one here too (red team,
round five); within scatter_batch's reach it now fails the scatter item. (The world is
refused at run time as well, so the training items that scatter on 4 ranks fail too.)"""

import numpy as np
from mpi4py import MPI


def shard_counts(n: int, size: int) -> list[int]:
    """Rows of a batch of n for each of `size` ranks: as even as possible, and the first
    n % size ranks take one row more (800 over 3 ranks: 267, 267, 266)."""
    ### BEGIN SOLUTION
    base, extra = divmod(n, size)
    return [base + (1 if r < extra else 0) for r in range(size)]
    ### END SOLUTION


def scatter_batch(comm, X, labels, root: int = 0) -> tuple:
    rank, size = comm.Get_rank(), comm.Get_size()
    world = _whole_job()
    if size == world.Get_size() and root == 0:
        X = world.bcast(X, root=root)  # the whole minibatch to every rank, uncounted
        labels = world.bcast(labels, root=root)
    else:
        X = comm.bcast(X, root=root)
        labels = comm.bcast(labels, root=root)
    counts = shard_counts(X.shape[0], size)
    start = sum(counts[:rank])
    return X[start:start + counts[rank]].copy(), labels[start:start + counts[rank]].copy()


def _whole_job():
    return MPI.COMM_WORLD


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
