"""Thread-parallel over examples (the paper's "Multicore Parallel", Pthreads in C++).

The examples of a minibatch are split into as many contiguous shares as there are
threads, as evenly as possible (the first n % T shares get one example more; a share may
be empty when the batch is smaller than T). Each thread runs the naive loops over its
share into a partial gradient of its own, so no two threads ever write the same memory;
then the partial gradients are summed, again split over the threads, by parameter.

The same loops as the naive version (nnkit.paper.loops), so the ratio of the two is the
gain from threads alone. numba's `prange` gives one share to each thread of its pool.
"""

from __future__ import annotations

import numpy as np

from nnkit import network
from nnkit.collectives import split_counts
from nnkit.paper import loops
from nnkit.paper.jit import njit, numba, prange
from nnkit.paper.naive import LoopRunner
from nnkit.training import TrainConfig


def share_bounds(n: int, threads: int) -> np.ndarray:
    """(threads + 1,) starts of the shares of n examples; share t is [b[t], b[t+1])."""
    return np.concatenate([[0], np.cumsum(split_counts(n, threads))]).astype(np.int64)


@njit(parallel=True, fastmath=loops.FASTMATH, cache=True)
def parallel_gradient(theta: np.ndarray, layers: np.ndarray, aoff: np.ndarray, X: np.ndarray,
                      labels: np.ndarray, bounds: np.ndarray, loss: int, acts: np.ndarray,
                      deltas: np.ndarray, partial: np.ndarray) -> float:
    """partial[0] <- the summed gradient of the batch; partial[t] is thread t's scratch.

    Returns the summed loss."""
    shares = partial.shape[0]
    losses = np.zeros(shares)
    for t in prange(shares):
        losses[t] = loops.share_gradient(theta, layers, aoff, X, labels, bounds[t],
                                         bounds[t + 1], loss, acts[t], deltas[t], partial[t])
    for p in prange(partial.shape[1]):  # the reduction, split over the threads by parameter
        s = partial[0, p]
        for t in range(1, shares):
            s += partial[t, p]
        partial[0, p] = s
    return losses.sum()


class ThreadsRunner(LoopRunner):
    """Shares of each batch on `threads` threads (default: numba's pool, all cores)."""

    def __init__(self, params: network.Params, config: TrainConfig, threads: int | None = None):
        super().__init__(params, config)
        self.threads = threads or numba.get_num_threads()
        size = self.layout.act_size
        self.acts = np.zeros((self.threads, size), dtype=np.float32)
        self.deltas = np.zeros((self.threads, size), dtype=np.float32)
        self.partial = np.zeros((self.threads, self.layout.size), dtype=np.float32)
        self.grad = self.partial[0]  # the reduction leaves the batch's gradient here

    def _batch_gradient(self, X: np.ndarray, labels: np.ndarray) -> float:
        return parallel_gradient(self.theta, self.layout.layers, self.layout.acts, X, labels,
                                 share_bounds(len(X), self.threads), self.loss_code,
                                 self.acts, self.deltas, self.partial)
