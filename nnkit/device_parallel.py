"""Device-resident data parallelism: the training set and the gradients stay on the GPUs.

The host-staged loop (nnkit.mpi_train) scatters every minibatch from rank 0 and copies
every gradient to the host for MPI and back: measured on H200s, 14 ms of staging a step
against under 3 ms of GEMMs, and no speedup on two GPUs. Here, instead:

- every rank holds the whole training set on its GPU for the whole run, and computes the
  epoch's order itself (nnkit.dataset.epoch_order is the same on every rank), so that its
  rows of every minibatch are one gather on the device at the start of the epoch;
- the network's parameters and gradients are two flat float32 arrays on the device
  (nnkit.device_reduce.FlatLayout); backward writes each layer's gradient, already scaled
  by the rank's share of the batch, into its segment of the gradient array;
- as soon as a layer's gradient is written its segment is summed over the ranks (NCCL's
  all-reduce, or the ring with NCCL send/recv) on the transport's stream, while the
  compute stream goes on with the layer below (overlap);
- every rank then applies the same update to its own copy of the parameters.

Nothing crosses the host in a step; once an epoch the summed loss does. The network is the
kit's own (matrix products by cuBLAS through CuPy, the formulas of nnkit.network), written
for any array module, so the same loop runs with NumPy arrays over CPU MPI ranks
(nnkit.device_reduce.MpiTransport): that is how it is tested without GPUs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nnkit import network
from nnkit.dataset import batch_slices, epoch_order
from nnkit.device_reduce import FlatLayout, Transport, chunk_bounds, rank_rows, ring_allreduce
from nnkit.mpi_train import MpiHistory
from nnkit.training import EpochRecord, TrainConfig

REDUCES = ("allreduce", "ring")


class _Fused:
    """The elementwise steps as one kernel each on the GPU (CuPy otherwise launches one per
    operator, and at batch 800 a step is launch-bound); plain NumPy on the CPU."""

    def __init__(self, xp: Any):
        self.gpu = xp is not np
        if self.gpu:
            self.bias_sigmoid = xp.ElementwiseKernel(
                "T z, T b", "T a", "a = 1 / (1 + exp(-(z + b)))", "nnkit_bias_sigmoid")
            self.sigmoid_backward = xp.ElementwiseKernel(
                "T g, T a", "T d", "d = g * a * (1 - a)", "nnkit_sigmoid_backward")

    def hidden(self, Z: Any, b: Any) -> Any:
        if self.gpu:
            return self.bias_sigmoid(Z, b, Z)  # in place
        Z += b
        with np.errstate(over="ignore"):  # exp(-z) -> inf gives exactly 0
            return 1 / (1 + np.exp(-Z))

    def backward(self, dA: Any, A: Any) -> Any:
        if self.gpu:
            return self.sigmoid_backward(dA, A, dA)
        return dA * A * (1 - A)


class ResidentNet:
    """One rank's copy of the network, parameters and gradients in two flat arrays of the
    array module xp (cupy on a GPU, numpy on the CPU)."""

    def __init__(self, xp: Any, params: network.Params, lam: float):
        self.xp, self.lam = xp, lam
        self.layout = FlatLayout(tuple(params.sizes))
        self.flat = xp.asarray(self.layout.pack(params.weights, params.biases))
        self.grad = xp.zeros_like(self.flat)
        self.W, self.b = self.layout.views(self.flat)
        self.dW, self.db = self.layout.views(self.grad)
        self.fused = _Fused(xp)

    def forward(self, X: Any) -> list[Any]:
        """[A_0 = X, A_1, ..., Z_L] as nnkit.network.forward computes them."""
        acts = [X]
        for layer, (W, b) in enumerate(zip(self.W, self.b, strict=True)):
            Z = acts[-1] @ W.T
            if layer < self.layout.layers - 1:
                Z = self.fused.hidden(Z, b)
            else:
                Z += b
            acts.append(Z)
        return acts

    def backward(self, acts: list[Any], labels: Any, n_batch: int):
        """Write share * gradient into self.grad, layer by layer from the top, yielding each
        layer as soon as its segment is final; share = rows / n_batch. The generator's
        value (StopIteration.value) is the summed per-sample loss, on the device.

        With dZ = (P - Y) / n_batch instead of / rows, dZ^T A is already share times the
        mean over this rank's rows; the L2 term gets the share explicitly."""
        xp = self.xp
        rows = acts[0].shape[0]
        if rows == 0:  # weight 0: nothing to add, but the collective still needs a buffer
            self.grad.fill(0)
            for layer in range(self.layout.layers - 1, -1, -1):
                yield layer
            return xp.zeros((), xp.float32)
        share = np.float32(rows / n_batch)
        logits = acts[-1]
        shifted = logits - logits.max(axis=1, keepdims=True)
        logp = shifted - xp.log(xp.exp(shifted).sum(axis=1, keepdims=True))
        picked = xp.arange(rows)
        loss = -logp[picked, labels].sum(dtype=xp.float64)
        dZ = xp.exp(logp)
        dZ[picked, labels] -= 1
        dZ *= np.float32(1 / n_batch)
        for layer in range(self.layout.layers - 1, -1, -1):
            W, A_prev = self.W[layer], acts[layer]
            dW = self.dW[layer]
            xp.matmul(dZ.T, A_prev, out=dW)
            dW += np.float32(self.lam) * share * W
            dZ.sum(axis=0, out=self.db[layer])
            yield layer
            if layer > 0:
                dZ = self.fused.backward(dZ @ W, A_prev)
        return loss

    def step(self, lr: float) -> None:
        self.flat -= np.float32(lr) * self.grad

    def host_params(self) -> network.Params:
        flat = self.flat.get() if hasattr(self.flat, "get") else np.array(self.flat)
        W, b = self.layout.views(flat)
        return network.Params([np.array(w) for w in W], [np.array(v) for v in b])

    def predict(self, X: Any, chunk: int = 8192) -> np.ndarray:
        out = []
        for start in range(0, len(X), chunk):
            logits = self.forward(self.xp.asarray(X[start:start + chunk], self.xp.float32))[-1]
            top = logits.argmax(axis=1)
            out.append(top.get() if hasattr(top, "get") else np.asarray(top))
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


class GradientReducer:
    """Sums the rank-scaled gradient over the ranks: all of it after backward, or layer
    by layer as backward finishes each one (overlap). Counts the bytes it sends."""

    def __init__(self, transport: Any, net: ResidentNet, reduce: str, overlap: bool):
        if reduce not in REDUCES:
            raise ValueError(f"reduce must be one of {', '.join(REDUCES)}, not {reduce!r}")
        self.transport, self.net, self.reduce, self.overlap = transport, net, reduce, overlap
        size = transport.size
        largest = chunk_bounds(net.layout.size, size)[1] if size > 1 else 1
        self.scratch = net.xp.empty(largest, net.xp.float32)
        self.bytes_sent = 0

    def _sum(self, segment: Any) -> None:
        if self.reduce == "ring":
            self.bytes_sent += ring_allreduce(self.transport, segment, self.scratch)
        else:
            self.transport.allreduce(segment)
            p = self.transport.size
            # What NCCL's ring algorithm sends; it may pick a tree for small messages.
            self.bytes_sent += int(2 * (p - 1) / p * segment.nbytes)

    def layer_done(self, layer: int) -> None:
        if self.overlap:
            self.transport.after_compute()
            self._sum(self.net.grad[self.net.layout.segment(layer)])

    def finish(self) -> None:
        """After backward: the whole gradient summed, and the compute stream waiting for it."""
        if self.overlap:
            self.transport.before_compute()
        else:
            self.reduce_all()

    def reduce_all(self) -> None:
        self.transport.after_compute()
        self._sum(self.net.grad)
        self.transport.before_compute()


@dataclass
class ResidentHistory(MpiHistory):
    # Milliseconds per step, from a profiled epoch (phases separated by synchronisation):
    # compute (forward, backward, update), idle (waiting for the slowest rank), reduce.
    profile: dict[str, float] = field(default_factory=dict)


def _sync_ms(transport: Any, since: float) -> tuple[float, float]:
    transport.synchronize()
    now = time.perf_counter()
    return 1e3 * (now - since), now


def train_resident(comm: Any, transport: Transport | Any, xp: Any, images: np.ndarray,
                   labels: np.ndarray, params: network.Params, config: TrainConfig, *,
                   reduce: str = "allreduce", overlap: bool = True, profile: bool = False,
                   evaluate: Any = None, on_epoch: Any = None,
                   ) -> tuple[ResidentNet, ResidentHistory]:
    """Data-parallel SGD over comm's ranks, everything on the devices. Every rank passes
    the whole training set (images, labels) and the same initial params; the batches and
    their order are those of single-process training. profile=True adds one more epoch,
    not in the history's epochs, with the phases of every step timed apart (the model is
    restored afterwards)."""
    from mpi4py import MPI

    if config.loss != "ce":
        raise ValueError("the device-resident network implements softmax with cross-entropy")
    rank, size = comm.Get_rank(), comm.Get_size()
    n = len(labels)
    X_all = xp.asarray(np.ascontiguousarray(images, np.float32))
    y_all = xp.asarray(np.ascontiguousarray(labels, np.int64))
    net = ResidentNet(xp, params, config.lam)
    reducer = GradientReducer(transport, net, reduce, overlap)
    history = ResidentHistory()
    slices = batch_slices(n, config.batch)
    bounds = [rank_rows(s.stop - s.start, size, rank) for s in slices]
    timed_epochs = config.epochs + (1 if profile else 0)
    for epoch in range(timed_epochs):
        timing = profile and epoch == config.epochs
        if timing:
            trained = net.flat.copy()  # the profiled epoch leaves the trained model as it was
        order = epoch_order(n, config.seed, epoch % config.epochs)
        mine = np.concatenate([order[s.start + lo:s.start + hi]
                               for s, (lo, hi) in zip(slices, bounds, strict=True)])
        index = xp.asarray(mine)
        X_mine, y_mine = X_all[index], y_all[index]  # this epoch's rows: one device gather
        spent = {"compute": 0.0, "idle": 0.0, "reduce": 0.0}
        transport.synchronize()
        comm.Barrier()
        start = time.perf_counter()
        loss_sum = xp.zeros((), xp.float64)
        position = 0
        for s, (lo, hi) in zip(slices, bounds, strict=True):
            rows = slice(position, position + hi - lo)
            position += hi - lo
            tick = time.perf_counter()
            acts = net.forward(X_mine[rows])
            steps = net.backward(acts, y_mine[rows], s.stop - s.start)
            try:
                while True:
                    layer = next(steps)
                    if not timing:
                        reducer.layer_done(layer)
            except StopIteration as done:
                loss_sum += done.value
            if timing:  # the phases one after the other, each waited for
                ms, tick = _sync_ms(transport, tick)
                spent["compute"] += ms
                comm.Barrier()
                ms, tick = _sync_ms(transport, tick)
                spent["idle"] += ms
                reducer.reduce_all()
                ms, tick = _sync_ms(transport, tick)
                spent["reduce"] += ms
            else:
                reducer.finish()
            net.step(config.lr)
            if timing:
                ms, tick = _sync_ms(transport, tick)
                spent["compute"] += ms
            else:
                history.steps += 1
        local = float(loss_sum)  # waits for the epoch's work: the epoch's one host sync
        total = comm.allreduce(local, op=MPI.SUM)
        comm.Barrier()
        seconds = time.perf_counter() - start
        if timing:
            history.profile = {k: v / len(slices) for k, v in spent.items()}
            history.profile["step"] = 1e3 * seconds / len(slices)
            net.flat[...] = trained
            continue
        history.bytes_sent = reducer.bytes_sent  # of the training epochs, not the profiled
        if rank == 0:
            val = evaluate(net) if evaluate else None
            record = EpochRecord(epoch + 1, total / max(n, 1) +
                                 network.l2_term(net.host_params(), config.lam), val, seconds)
            history.epochs.append(record)
            if on_epoch:
                on_epoch(record)
    return net, history


def array_module(transport: Any) -> Any:
    """cupy for the NCCL transport, numpy for the CPU stand-in."""
    if type(transport).__name__ == "NcclTransport":
        import cupy

        return cupy
    return np


def make_transport(comm: Any, device: str) -> Any:
    """device 'gpu': NCCL (NcclUnavailable says what is missing); 'cpu': MPI on the host."""
    if device == "gpu":
        from nnkit.nccl_transport import NcclTransport

        return NcclTransport(comm)
    if device == "cpu":
        from nnkit.device_reduce import MpiTransport

        return MpiTransport(comm)
    raise ValueError(f"device must be gpu or cpu, not {device!r}")
