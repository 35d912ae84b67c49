"""Alternative Part 3: scatter_batch with comm.scatter of Python lists of arrays (a
collective is fine here), allreduce_gradients with one Allreduce per array, annotations
with MPI.Comm, isinstance checks of the communicator, a deep copy of the
gradients."""

# ruff: noqa: UP006, UP035, UP045, B905 (written as students do: typing's old names, zip)

from __future__ import annotations

import copy
from typing import List, Optional

import numpy as np
from mpi4py import MPI


def shard_counts(n: int, size: int) -> List[int]:
    return [len(part) for part in np.array_split(np.arange(n), size)]


def scatter_batch(comm: MPI.Comm, X: Optional[np.ndarray], labels, root: int = 0) -> tuple:
    if not isinstance(comm, MPI.Intracomm):
        raise TypeError(f"scatter_batch needs an intracommunicator, not {comm!r}")
    if comm.Get_rank() == root:
        counts = shard_counts(X.shape[0], comm.Get_size())
        bounds = np.cumsum([0, *counts])
        pieces = [(np.ascontiguousarray(X[lo:hi], dtype=np.float32),
                   np.ascontiguousarray(labels[lo:hi], dtype=np.int64))
                  for lo, hi in zip(bounds[:-1], bounds[1:])]
    else:
        pieces = None
    X_local, labels_local = comm.scatter(pieces, root=root)
    return X_local, labels_local


def allreduce_gradients(comm: MPI.Comm, grads: list, n_local: int, n_total: int) -> list:
    assert isinstance(comm, (MPI.Comm, MPI.Intracomm))
    grads = copy.deepcopy(grads)  # the caller's arrays stay as they were
    weight = np.float32(n_local / n_total)
    out = []
    for g in grads:
        send = np.ascontiguousarray(g, dtype=np.float32) * weight
        total = np.empty_like(send)
        comm.Allreduce(send, total, op=MPI.SUM)
        out.append(total)
    return out
