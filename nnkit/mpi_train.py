"""Training across the ranks of an MPI job: the trusted loop around the Part 3 functions.

Data parallelism, as in CME 213: rank 0 holds the training set and draws the minibatches
in the order of single-process training (nnkit.dataset.epoch_order and batch_slices);
every minibatch is shared out with `scatter_batch`; each rank computes the gradient of
its rows with the network (the CPU reference, or the Part 2 functions of an
implementation folder on the rank's GPU or in the simulator); the gradients are combined
(`allreduce_gradients`, or a ring all-reduce) and every rank takes the same SGD step.

Model averaging (Su, Chen and Morgan): every rank steps with the gradient of its own
rows, and the models are averaged every k minibatches and at the end of every epoch,
weighted by the rows each rank saw since the last average (all-reduce or ring), or mixed
pairwise (butterfly, hopping ring; see nnkit.collectives). With k = 1 and an exact
strategy this is the gradient all-reduce again: the average of p - lr * g_r weighted by
the shares n_r / n is p - lr * sum_r (n_r / n) g_r.

The command line (`mpiexec -n 4 python -m nnkit train --mpi ...`) is nnkit.mpi_cli; this
module is the library it drives (and the grader's worker imports), and imports no command
line.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nnkit import network
from nnkit.collectives import (
    EXACT,
    MIXING,
    STRATEGIES,
    CountingComm,
    mix,
    pack,
    simulate_mix,
    split_counts,
    unpack,
)
from nnkit.dataset import batch_slices, epoch_order
from nnkit.mnist import Split
from nnkit.training import EpochRecord, TrainConfig

DATA_MODULE = "mpi_1_data_parallel"
RING_MODULE = "mpi_2_ring"


@dataclass(frozen=True)
class MpiFunctions:
    """The Part 3 functions a run uses: an implementation folder's, or the kit's own."""

    scatter_batch: Callable
    allreduce_gradients: Callable
    ring_allreduce: Callable | None


def kit_functions() -> MpiFunctions:
    from nnkit import collectives

    return MpiFunctions(collectives.scatter_batch, collectives.allreduce_gradients,
                        collectives.ring_allreduce)


def folder_functions(folder: Path, need_ring: bool = False) -> MpiFunctions:
    """The functions of an implementation folder (its ring only when it is needed)."""
    from nnkit.submission import load_function

    ring = load_function(folder, RING_MODULE, "ring_allreduce") if need_ring else None
    return MpiFunctions(load_function(folder, DATA_MODULE, "scatter_batch"),
                        load_function(folder, DATA_MODULE, "allreduce_gradients"), ring)


# --------------------------------------------------------------------------------------
# What one rank computes with: its copy of the network


class HostEngine:
    """This rank's copy of the network, computed by the CPU reference (NumPy, float32)."""

    def __init__(self, params: network.Params, config: TrainConfig):
        self.params, self.config = params.copy(np.float32), config

    def gradients(self, X: np.ndarray, labels: np.ndarray) -> tuple[list[np.ndarray], float]:
        """[dW1, ..., db1, ...] of the mean loss over these rows plus the L2 term, and the
        summed per-sample loss. No rows: zeros (their weight in any average is 0)."""
        if len(labels) == 0:
            return [np.zeros_like(a) for a in self.arrays()], 0.0
        acts = network.forward(self.params, X)
        per_sample, _ = network.output_loss_and_delta(acts[-1], labels, self.config.loss)
        grads, _ = network.backward(self.params, acts, labels, self.config.lam,
                                    self.config.loss)
        return grads.weights + grads.biases, float(per_sample.astype(np.float64).sum())

    def step(self, grads: list[np.ndarray], lr: float) -> None:
        layers = len(self.params.weights)
        network.sgd_step(self.params, network.Params(list(grads[:layers]),
                                                     list(grads[layers:])), lr)

    def arrays(self) -> list[np.ndarray]:
        return self.params.weights + self.params.biases

    def set_arrays(self, arrays: list[np.ndarray]) -> None:
        layers = len(self.params.weights)
        self.params = network.Params([np.array(a, np.float32) for a in arrays[:layers]],
                                     [np.array(a, np.float32) for a in arrays[layers:]])

    def host_params(self) -> network.Params:
        return self.params.copy()

    def predict(self, X: np.ndarray) -> np.ndarray:
        return network.predict(self.params, X.astype(np.float32))


class DeviceEngine:
    """This rank's copy of the network on its device, driven by the Part 2 functions of
    an implementation folder. Gradients travel to the host for MPI and back."""

    def __init__(self, folder: Path, params: network.Params, config: TrainConfig,
                 gemm_fn: Callable):
        from nnkit.submission import load_function
        from nnkit.training import DeviceRunner

        if config.loss != "ce":
            raise ValueError("the GPU network implements softmax with cross-entropy")
        self.forward, self.backward, self.sgd_step = (
            load_function(folder, DeviceRunner.MODULE, name)
            for name in ("forward", "backward", "sgd_step"))
        self.config, self.gemm = config, gemm_fn
        self.layers = len(params.weights)
        self.set_arrays(params.weights + params.biases)

    def gradients(self, X: np.ndarray, labels: np.ndarray) -> tuple[list[np.ndarray], float]:
        from nnkit.backend import to_device, to_host

        if len(labels) == 0:
            return [np.zeros_like(a) for a in self.arrays()], 0.0
        acts = self.forward(self.weights, self.biases, to_device(X), self.gemm)
        grads_W, grads_b, losses = self.backward(self.weights, self.biases, acts,
                                                 to_device(labels.astype(np.int64)),
                                                 self.config.lam, self.gemm)
        host = [np.asarray(to_host(g), dtype=np.float32) for g in [*grads_W, *grads_b]]
        return host, float(to_host(losses).astype(np.float64).sum())

    def step(self, grads: list[np.ndarray], lr: float) -> None:
        from nnkit.backend import to_device

        dev = [to_device(np.ascontiguousarray(g, dtype=np.float32)) for g in grads]
        self.sgd_step(self.weights, self.biases, dev[:self.layers], dev[self.layers:], lr)

    def arrays(self) -> list[np.ndarray]:
        from nnkit.backend import to_host

        return [to_host(a) for a in self.weights + self.biases]

    def set_arrays(self, arrays: list[np.ndarray]) -> None:
        from nnkit.backend import to_device

        dev = [to_device(np.ascontiguousarray(a, dtype=np.float32)) for a in arrays]
        self.weights, self.biases = dev[:self.layers], dev[self.layers:]

    def host_params(self) -> network.Params:
        arrays = self.arrays()
        return network.Params(arrays[:self.layers], arrays[self.layers:])

    def predict(self, X: np.ndarray, chunk: int = 8192) -> np.ndarray:
        from nnkit.backend import to_device, to_host

        out = [to_host(self.forward(self.weights, self.biases, to_device(X[s:s + chunk]),
                                    self.gemm)[-1]).argmax(axis=1)
               for s in range(0, len(X), chunk)]
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def bind_device(comm: Any) -> str:
    """One GPU per rank when there are several: rank r of a node takes GPU r mod count
    (ranks share GPUs when there are fewer GPUs than ranks). Call before any CUDA work;
    in the simulator it does nothing. Returns a description for the log."""
    from nnkit.backend import select

    backend = select()
    if not backend.on_gpu:
        return backend.describe()
    from numba import cuda

    from nnkit.nccl_transport import bind_gpu

    device, count = bind_gpu(comm)  # CuPy's current device
    # CuPy allocates on its current device, numba launches on its own: both must agree.
    cuda.select_device(device)
    return f"GPU {device} of {count} ({backend.detail})"


# --------------------------------------------------------------------------------------
# The loop


@dataclass
class MpiHistory:
    epochs: list[EpochRecord] = field(default_factory=list)
    steps: int = 0
    bytes_sent: int = 0  # by this rank, during the training steps (CountingComm's tally)

    @property
    def bytes_per_step(self) -> float:
        return self.bytes_sent / max(self.steps, 1)


def _combine_gradients(comm: Any, grads: list[np.ndarray], n_local: int, n_total: int,
                       strategy: str, fns: MpiFunctions) -> list[np.ndarray]:
    if strategy == "allreduce":
        combined = fns.allreduce_gradients(comm, grads, n_local, n_total)
    elif strategy == "ring":
        flat = pack(grads, n_local / n_total)
        fns.ring_allreduce(comm, flat)
        combined = unpack(flat, grads)
    else:
        raise ValueError(f"{strategy} mixes models: use it with model averaging "
                         "(--average-every K)")
    if not isinstance(combined, list | tuple) or len(combined) != len(grads):
        raise TypeError(f"allreduce_gradients returned {type(combined).__name__}, expected "
                        f"a list of {len(grads)} arrays")
    return list(combined)


def _average_models(comm: Any, arrays: list[np.ndarray], seen: int, window: int,
                    strategy: str, fns: MpiFunctions, stage: int) -> list[np.ndarray]:
    if strategy in EXACT:
        # The weighted average of the models is the same weighted sum as the gradients'.
        return _combine_gradients(comm, arrays, seen, window, strategy, fns)
    flat = pack(arrays)
    mix(strategy, comm, flat, stage)
    return unpack(flat, arrays)


def check_strategy(strategy: str, average_every: int, ranks: int) -> None:
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown reduce strategy {strategy!r}; choose from "
                         f"{', '.join(STRATEGIES)}")
    if average_every < 0:
        raise ValueError(f"--average-every must be >= 0, got {average_every}")
    if strategy in MIXING and average_every == 0:
        raise ValueError(f"{strategy} mixing averages models, not gradients: add "
                         "--average-every K")
    if strategy == "butterfly" and ranks & (ranks - 1):
        raise ValueError(f"butterfly mixing needs a power-of-two number of ranks, not {ranks}")


def train_mpi(comm: Any, engine: Any, train_split: Split | None, config: TrainConfig,
              fns: MpiFunctions, *, strategy: str = "allreduce", average_every: int = 0,
              root: int = 0, evaluate: Callable[[Any], float | None] | None = None,
              on_epoch: Callable[[EpochRecord], None] | None = None) -> MpiHistory:
    """Data-parallel SGD over the ranks of comm. Only root needs train_split (the others
    pass None). average_every = 0: gradient all-reduce every step; k > 0: model
    averaging every k minibatches and at the end of every epoch. evaluate(engine), called
    on root after every epoch, returns a validation accuracy or None. Every rank returns
    the history; only root's epochs hold losses."""
    from mpi4py import MPI

    rank, size = comm.Get_rank(), comm.Get_size()
    check_strategy(strategy, average_every, size)
    counted = CountingComm(comm)
    history = MpiHistory()
    n = comm.bcast(len(train_split) if rank == root else None, root=root)
    slices = batch_slices(n, config.batch)
    stage = 0
    for epoch in range(config.epochs):
        if rank == root:
            order = epoch_order(n, config.seed, epoch)
            X_epoch = train_split.images[order].astype(np.float32)
            y_epoch = train_split.labels[order].astype(np.int64)
        comm.Barrier()
        start = time.perf_counter()
        loss_sum, pending, seen, window = 0.0, 0, 0, 0
        for number, s in enumerate(slices):
            X_b, y_b = (X_epoch[s], y_epoch[s]) if rank == root else (None, None)
            X_loc, y_loc = fns.scatter_batch(counted, X_b, y_b, root=root)
            n_batch, n_local = s.stop - s.start, len(y_loc)
            grads, loss = engine.gradients(np.asarray(X_loc, np.float32),
                                           np.asarray(y_loc, np.int64))
            loss_sum += loss
            if average_every == 0:
                engine.step(_combine_gradients(counted, grads, n_local, n_batch, strategy,
                                               fns), config.lr)
            else:
                if n_local:
                    engine.step(grads, config.lr)
                pending, seen, window = pending + 1, seen + n_local, window + n_batch
                if pending == average_every or number == len(slices) - 1:
                    engine.set_arrays(_average_models(counted, engine.arrays(), seen, window,
                                                      strategy, fns, stage))
                    stage, pending, seen, window = stage + 1, 0, 0, 0
            history.steps += 1
        total = comm.allreduce(loss_sum, op=MPI.SUM)
        comm.Barrier()
        seconds = time.perf_counter() - start
        if rank == root:
            val = evaluate(engine) if evaluate else None
            record = EpochRecord(epoch + 1, total / max(n, 1) +
                                 network.l2_term(engine.host_params(), config.lam), val,
                                 seconds)
            history.epochs.append(record)
            if on_epoch:
                on_epoch(record)
    history.bytes_sent = counted.bytes_sent
    return history


def simulate_model_averaging(params: network.Params, train_split: Split, config: TrainConfig,
                             ranks: int, average_every: int,
                             strategy: str = "allreduce") -> list[network.Params]:
    """Model averaging with `ranks` ranks computed in one process: every rank's model
    after training, as train_mpi(average_every=k) should leave them. The oracle of the
    grader's averaging check (and, with k = 1, equal to gradient all-reduce training)."""
    check_strategy(strategy, average_every, ranks)
    if average_every < 1:
        raise ValueError("simulate_model_averaging needs average_every >= 1")
    engines = [HostEngine(params, config) for _ in range(ranks)]
    n = len(train_split)
    slices = batch_slices(n, config.batch)
    stage = 0
    for epoch in range(config.epochs):
        order = epoch_order(n, config.seed, epoch)
        X_epoch = train_split.images[order].astype(np.float32)
        y_epoch = train_split.labels[order].astype(np.int64)
        pending, seen, window = 0, [0] * ranks, 0
        for number, s in enumerate(slices):
            counts = split_counts(s.stop - s.start, ranks)
            start = s.start
            for r, engine in enumerate(engines):
                rows = slice(start, start + counts[r])
                start += counts[r]
                if counts[r]:
                    grads, _ = engine.gradients(X_epoch[rows], y_epoch[rows])
                    engine.step(grads, config.lr)
                seen[r] += counts[r]
            pending, window = pending + 1, window + (s.stop - s.start)
            if pending == average_every or number == len(slices) - 1:
                models = [pack(e.arrays()) for e in engines]
                if strategy in EXACT:
                    average = np.zeros_like(models[0])
                    for r in range(ranks):
                        average += models[r] * np.float32(seen[r] / window)
                    mixed = [average] * ranks
                else:
                    mixed = simulate_mix(strategy, models, stage)
                for engine, flat in zip(engines, mixed, strict=True):
                    engine.set_arrays(unpack(flat, engine.arrays()))
                stage, pending, seen, window = stage + 1, 0, [0] * ranks, 0
    return [e.host_params() for e in engines]
