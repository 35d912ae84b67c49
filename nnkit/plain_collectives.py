"""Plain stand-ins for the Part 3 functions, for the student kit's reference runs.

The instructors' kit trains its MPI reference (`train --mpi --impl reference`,
`bench-mpi`, the bonus's ring strategy) with nnkit/collectives.py's own versions of
scatter_batch, allreduce_gradients and ring_allreduce. Those are Part 3's answers, so the
student kit (grader/course/dist.py) replaces their bodies with calls to the functions here:
correct, same contracts, and written on purpose the way the assignment does *not* ask
for, so that reading them teaches nothing that the handout does not already say:

- scatter_batch sends each rank its rows as one pickled Python object
  (`comm.scatter`), where the exercise asks for Scatterv of raw buffers with counts and
  displacements in elements; the row split is numpy's array_split, which the handout's
  rule (the first n % p ranks one row more) describes in words already;
- allreduce_gradients gathers every rank's arrays on root as pickled objects, sums them
  there with the weights the exercise's docstring states, and broadcasts the result,
  where the exercise asks for one Allreduce on a packed buffer;
- ring_allreduce is MPI's own Allreduce: no ring at all (the ring item forbids it).

They are slower than the real ones (pickling, everything through root), which is fine for
a reference run's accuracy; time your own functions with `--impl starter`, not these.
Arrays are host NumPy arrays; nothing here touches a GPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def scatter_batch(comm: Any, X: np.ndarray | None, labels: np.ndarray | None,
                  root: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Rows of root's minibatch for each rank, contiguous blocks in rank order."""
    size = comm.Get_size()
    blocks = None
    if comm.Get_rank() == root:
        images = np.asarray(X, dtype=np.float32)
        classes = np.asarray(labels, dtype=np.int64)
        blocks = list(zip(np.array_split(images, size), np.array_split(classes, size),
                          strict=True))
    X_local, labels_local = comm.scatter(blocks, root=root)
    return (np.ascontiguousarray(X_local, dtype=np.float32),
            np.ascontiguousarray(labels_local, dtype=np.int64))


def allreduce_gradients(comm: Any, grads: list[np.ndarray], n_local: int,
                        n_total: int) -> list[np.ndarray]:
    """sum over ranks of (n_local / n_total) * grads, the same arrays on every rank."""
    mine = [np.asarray(g, dtype=np.float32) for g in grads]
    everyone = comm.gather((n_local, mine), root=0)
    total = None
    if comm.Get_rank() == 0:
        total = [np.zeros_like(g) for g in mine]
        for count, arrays in everyone:  # rank order: the same sum whoever computes it
            for acc, g in zip(total, arrays, strict=True):
                acc += np.float32(count / n_total) * g
    return comm.bcast(total, root=0)


def ring_allreduce(comm: Any, buffer: np.ndarray) -> None:
    """The elementwise sum over ranks, in place (MPI's Allreduce, not a ring)."""
    from mpi4py import MPI

    comm.Allreduce(MPI.IN_PLACE, buffer, op=MPI.SUM)
