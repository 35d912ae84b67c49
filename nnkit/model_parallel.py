"""Model parallelism for the one-hidden-layer network (CME 213's bonus, section 4.3).

Instead of splitting the batch, split the weights. With H hidden units over p ranks (the
counts of nnkit.collectives.split_counts), rank r owns a block of hidden units J_r:

    W1[J_r, :], b1[J_r]   rows of W1 (the units' incoming weights)
    W2[:, J_r]            columns of W2 (the units' outgoing weights)
    b2                    a replica on every rank

Forward, for a batch X (n x d) that every rank holds:

    A1_r = sigmoid(X W1[J_r]^T + b1[J_r])          n x |J_r|, local
    Z2   = sum_r A1_r W2[:, J_r]^T  + b2            n x C: ONE all-reduce of n*C floats

Backward, all local once Z2 is known everywhere (dZ2 = (softmax(Z2) - Y) / n):

    dW2[:, J_r] = dZ2^T A1_r + lam W2[:, J_r]       db2 = column sums of dZ2 (replicated)
    dZ1_r = (dZ2 W2[:, J_r]) * A1_r * (1 - A1_r)
    dW1[J_r]    = dZ1_r^T X + lam W1[J_r]           db1[J_r] = column sums of dZ1_r

The training images do not change between steps, so they are sent to every rank once,
before training (as the CME 213 handout suggests). Per step a rank then sends only its
share of the logits' all-reduce: 2 (p - 1) / p * 4 n C bytes with a ring, against
2 (p - 1) / p * 4 P for the gradients of all P parameters in data parallelism.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from nnkit import network
from nnkit.collectives import CountingComm, offsets, ring_allreduce, split_counts
from nnkit.dataset import batch_slices, epoch_order
from nnkit.mnist import Split
from nnkit.mpi_train import MpiHistory
from nnkit.training import EpochRecord, TrainConfig


class Shard:
    """One rank's block of hidden units and its part of the parameters."""

    def __init__(self, params: network.Params, lo: int, hi: int):
        W1, W2 = params.weights
        b1, b2 = params.biases
        self.W1 = np.array(W1[lo:hi], np.float32)
        self.b1 = np.array(b1[lo:hi], np.float32)
        self.W2 = np.array(W2[:, lo:hi], np.float32)
        self.b2 = np.array(b2, np.float32)


def _sum_logits(comm: Any, Z: np.ndarray, strategy: str) -> None:
    from mpi4py import MPI

    if strategy == "ring":
        flat = Z.reshape(-1)
        ring_allreduce(comm, flat)
    else:
        comm.Allreduce(MPI.IN_PLACE, Z, op=MPI.SUM)


def model_parallel_step(comm: Any, shard: Shard, X: np.ndarray, y: np.ndarray,
                        lam: np.float32, lr: np.float32, strategy: str) -> float:
    """One SGD step of the bonus, in place on this rank's shard, for the minibatch X
    (n x d, the same rows on every rank) with labels y; returns the batch's summed
    cross-entropy (float64), for the epoch's loss. The only message is the sum of the
    logits over the ranks (_sum_logits); every other product is local (module docstring).
    Check: `make train-mpi NP=2 IMPL=reference ARGS="--model-parallel --data sample
    --epochs 2"` prints losses close to those of the same command with NP=1 (about 15
    lines)."""
    ### BEGIN SOLUTION
    # HINT: forward: A1 = sigmoid(X W1[J_r]^T + b1[J_r]); partial logits A1 W2[:, J_r]^T,
    # HINT: summed over the ranks with _sum_logits (contiguous float32), then + b2.
    # HINT: network.output_loss_and_delta(Z2, y, "ce") gives the losses and dZ2.
    # HINT: backward and update as in the module docstring; b2 is the same on every rank.
    A1 = network.sigmoid(X @ shard.W1.T + shard.b1)
    Z2 = np.ascontiguousarray(A1 @ shard.W2.T, dtype=np.float32)
    _sum_logits(comm, Z2, strategy)
    Z2 += shard.b2
    per_sample, dZ2 = network.output_loss_and_delta(Z2, y, "ce")
    dW2 = dZ2.T @ A1 + lam * shard.W2
    db2 = dZ2.sum(axis=0)
    dZ1 = (dZ2 @ shard.W2) * A1 * (1 - A1)
    dW1 = dZ1.T @ X + lam * shard.W1
    db1 = dZ1.sum(axis=0)
    shard.W1 -= lr * dW1
    shard.b1 -= lr * db1
    shard.W2 -= lr * dW2
    shard.b2 -= lr * db2
    return float(per_sample.astype(np.float64).sum())
    ### END SOLUTION


def gather_params(comm: Any, shard: Shard, hidden: int, root: int = 0) -> network.Params | None:
    """The whole network on root, from every rank's shard (Gatherv of rows)."""
    from mpi4py import MPI

    size = comm.Get_size()
    counts = split_counts(hidden, size)
    starts = offsets(counts)
    d, classes = shard.W1.shape[1], shard.W2.shape[0]
    full = comm.Get_rank() == root
    W1 = np.empty((hidden, d), np.float32) if full else None
    b1 = np.empty(hidden, np.float32) if full else None
    W2t = np.empty((hidden, classes), np.float32) if full else None

    def spec(array: np.ndarray | None, width: int) -> list | None:
        if array is None:
            return None
        return [array, [c * width for c in counts], [s * width for s in starts], MPI.FLOAT]

    comm.Gatherv(shard.W1, spec(W1, d), root=root)
    comm.Gatherv(shard.b1, spec(b1, 1), root=root)
    comm.Gatherv(np.ascontiguousarray(shard.W2.T), spec(W2t, classes), root=root)
    if not full:
        return None
    return network.Params([W1, np.ascontiguousarray(W2t.T)], [b1, shard.b2.copy()])


def train_model_parallel(comm: Any, train_split: Split | None, config: TrainConfig,
                         params: network.Params, *, strategy: str = "allreduce",
                         root: int = 0,
                         on_epoch: Callable[[EpochRecord], None] | None = None,
                         ) -> tuple[network.Params | None, MpiHistory]:
    """Model-parallel SGD; every rank passes the same initial params, only root the data.
    Returns the trained parameters on root (None elsewhere) and the history; the bytes of
    the history count the training steps only, not the one-off copy of the images."""
    from mpi4py import MPI

    if len(config.hidden) != 1 or config.loss != "ce":
        raise ValueError("model parallelism is written for one hidden layer with "
                         "softmax and cross-entropy")
    if strategy not in ("allreduce", "ring"):
        raise ValueError(f"the logits are summed exactly: allreduce or ring, not {strategy}")
    rank, size = comm.Get_rank(), comm.Get_size()
    hidden = config.hidden[0]
    # The images once for all (not counted per step): every rank needs all of them.
    n, d = comm.bcast(train_split.images.shape if rank == root else None, root=root)
    images = (np.ascontiguousarray(train_split.images, np.float32) if rank == root
              else np.empty((n, d), np.float32))
    labels = (np.ascontiguousarray(train_split.labels, np.int64) if rank == root
              else np.empty(n, np.int64))
    comm.Bcast(images, root=root)
    comm.Bcast(labels, root=root)
    counts = split_counts(hidden, size)
    lo = offsets(counts)[rank]
    shard = Shard(params, lo, lo + counts[rank])
    lam, lr = np.float32(config.lam), np.float32(config.lr)
    counted = CountingComm(comm)
    history = MpiHistory()
    slices = batch_slices(n, config.batch)
    for epoch in range(config.epochs):
        order = epoch_order(n, config.seed, epoch)  # the same on every rank: no message
        X_epoch, y_epoch = images[order], labels[order]
        comm.Barrier()
        start = time.perf_counter()
        loss_sum = 0.0
        for s in slices:
            loss_sum += model_parallel_step(counted, shard, X_epoch[s], y_epoch[s], lam, lr,
                                            strategy)
            history.steps += 1
        comm.Barrier()
        seconds = time.perf_counter() - start
        squares = float((shard.W1.astype(np.float64) ** 2).sum()
                        + (shard.W2.astype(np.float64) ** 2).sum())
        squares = comm.allreduce(squares, op=MPI.SUM)
        record = EpochRecord(epoch + 1, loss_sum / max(n, 1) + 0.5 * config.lam * squares,
                             None, seconds)
        if rank == root:
            history.epochs.append(record)
            if on_epoch:
                on_epoch(record)
    history.bytes_sent = counted.bytes_sent
    return gather_params(comm, shard, hidden, root), history
