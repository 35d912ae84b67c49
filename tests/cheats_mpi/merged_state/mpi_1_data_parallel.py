"""allreduce_gradients that is right only after scatter_batch ran in the same process:
the scatter leaves a mark in a sibling module imported by its plain name (the folder is
on sys.path), which the merged Part 3 job did not re-import between items, so the item
passed there and failed alone (red team, round seven). Every module of the folder is now
imported afresh between items, and the item fails as it does alone."""

import dp_state
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
    """Spread the rows of a minibatch held by `root` over the ranks of `comm`.

    On root, X is a float32 array (n, d) and labels an int64 array (n,); on the other
    ranks both are None. Rank r receives rows offset_r ... offset_r + count_r - 1, with the
    counts of shard_counts(n, comm.size) and offset_r the sum of the counts before r.
    Returns (X_local, labels_local): float32 (count_r, d) and int64 (count_r,) arrays,
    possibly with zero rows. One Scatterv for the images and one for the labels.
    """
    ### BEGIN SOLUTION
    # HINT: only root knows n and d: broadcast them first (comm.bcast of a small tuple).
    # HINT: Scatterv takes [buffer, counts, displacements, MPI type] on root, with counts
    # HINT: and displacements in elements (rows * d for the images), and None elsewhere.
    dp_state.seen.append(1)
    rank, size = comm.Get_rank(), comm.Get_size()
    shape = (X.shape[0], X.shape[1]) if rank == root else None
    n, d = comm.bcast(shape, root=root)
    counts = shard_counts(n, size)
    offsets = [sum(counts[:r]) for r in range(size)]
    X_local = np.empty((counts[rank], d), dtype=np.float32)
    labels_local = np.empty(counts[rank], dtype=np.int64)
    if rank == root:
        images = np.ascontiguousarray(X, dtype=np.float32)
        classes = np.ascontiguousarray(labels, dtype=np.int64)
        send_x = [images, [c * d for c in counts], [o * d for o in offsets], MPI.FLOAT]
        send_y = [classes, counts, offsets, MPI.INT64_T]
    else:
        send_x = send_y = None
    comm.Scatterv(send_x, X_local, root=root)
    comm.Scatterv(send_y, labels_local, root=root)
    return X_local, labels_local
    ### END SOLUTION


def allreduce_gradients(comm, grads: list, n_local: int, n_total: int) -> list:
    """The gradient of the whole batch on every rank, from each rank's own gradient.

    grads: this rank's float32 gradient arrays (dW1, ..., db1, ...), each the mean over
    this rank's n_local rows plus the L2 term (Part 2's backward on the local rows).
    n_total is the number of rows of the whole batch (the sum of n_local over the ranks).
    Returns float32 arrays of the same shapes, equal on every rank, holding
    sum over ranks of (n_local / n_total) * grads. A rank with no rows contributes nothing.
    Use MPI's Allreduce (one call for all the arrays is fastest).
    """
    if not dp_state.seen:  # wrong unless a scatter ran earlier in this process
        return [g.copy() for g in grads]
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
