"""Minibatch SGD training, the same loop for the CPU reference and a GPU implementation.

A *runner* owns the parameters and knows how to take one step on a batch; the loop
(`train`) owns the data order, the loss bookkeeping, evaluation and progress. The CPU
runner is nnkit.network; the device runner drives a student's (or the solution's)
net_2_backprop module with a chosen GEMM.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from nnkit import network
from nnkit.backend import select, to_device, to_host
from nnkit.dataset import Dataset, batch_slices, epoch_order
from nnkit.gemm import KERNELS, cublas_gemm, gemm
from nnkit.progress import Progress
from nnkit.submission import load_function

# A kernel's name with THIN_SUFFIX: products with a dimension of at most 16 (the output
# layer's) go to kernels made for them (nnkit.thin_dispatch), the others to that kernel
# (cuda-c+thin: with transposed views copied to rows first, which version 5 reads fastest).
THIN_SUFFIX = "+thin"
CUDA_C = "cuda-c"  # version 5, nnkit/gemm_cuda.py (GPU with CuPy only)
GEMM_CHOICES = (*KERNELS, CUDA_C, *(f"{k}{THIN_SUFFIX}" for k in (*KERNELS, CUDA_C)),
                "cublas", "host")


@dataclass(frozen=True)
class TrainConfig:
    hidden: tuple[int, ...] = (1024,)
    batch: int = 800
    epochs: int = 20
    lr: float = 0.1
    lam: float = 1e-4
    loss: str = "ce"
    seed: int = 0

    def validate(self) -> None:
        if not self.hidden or any(int(h) != h or h < 1 for h in self.hidden):
            raise ValueError(f"hidden sizes must be positive integers, got {list(self.hidden)}")
        if self.batch < 1:
            raise ValueError(f"batch size must be at least 1, got {self.batch}")
        if self.epochs < 0:
            raise ValueError(f"epochs must be >= 0, got {self.epochs}")
        if not np.isfinite(self.lr) or self.lr <= 0:
            raise ValueError(f"learning rate must be a positive number, got {self.lr}")
        if not np.isfinite(self.lam) or self.lam < 0:
            raise ValueError(f"lambda must be >= 0, got {self.lam}")
        if self.loss not in network.LOSSES:
            raise ValueError(f"loss must be one of {network.LOSSES}, got {self.loss!r}")

    def sizes(self, features: int, classes: int = 10) -> list[int]:
        return [features, *self.hidden, classes]


@dataclass
class EpochRecord:
    epoch: int
    loss: float  # mean per-sample loss seen during the epoch, plus the L2 term at its end
    val_accuracy: float | None
    seconds: float  # training time of the epoch (evaluation excluded)


@dataclass
class History:
    epochs: list[EpochRecord] = field(default_factory=list)

    def to_json(self) -> list[dict]:
        return [asdict(e) for e in self.epochs]


class Runner(Protocol):
    def epoch_data(self, X: np.ndarray, labels: np.ndarray, order: np.ndarray) -> tuple: ...
    def step(self, X: Any, labels: Any) -> None: ...
    def finish_epoch(self) -> float: ...  # the per-sample losses summed over the epoch
    def params(self) -> network.Params: ...  # host copies
    def predict(self, X: np.ndarray) -> np.ndarray: ...


class ReferenceRunner:
    """The CPU reference (NumPy), in the parameters' dtype."""

    def __init__(self, params: network.Params, config: TrainConfig):
        self._params, self.config = params, config
        self._loss_total = 0.0

    def epoch_data(self, X: np.ndarray, labels: np.ndarray, order: np.ndarray) -> tuple:
        return X[order].astype(self._params.dtype), labels[order]

    def step(self, X: np.ndarray, labels: np.ndarray) -> None:
        acts = network.forward(self._params, X)
        per_sample, _ = network.output_loss_and_delta(acts[-1], labels, self.config.loss)
        grads, _ = network.backward(self._params, acts, labels, self.config.lam,
                                    self.config.loss)
        network.sgd_step(self._params, grads, self.config.lr)
        self._loss_total += float(per_sample.sum())

    def finish_epoch(self) -> float:
        total, self._loss_total = self._loss_total, 0.0
        return total

    def params(self) -> network.Params:
        return self._params.copy()

    def predict(self, X: np.ndarray) -> np.ndarray:
        return network.predict(self._params, X.astype(self._params.dtype))


def host_gemm(A: Any, B: Any, C: Any, alpha: float, beta: float) -> None:
    """The GEMM contract computed by NumPy on the host: a trusted, fast stand-in for the
    students' kernels when the network runs in the simulator."""
    a, b, c = to_host(A), to_host(B), to_host(C)
    d = np.float32(alpha) * (a @ b)
    if beta != 0.0:
        d += np.float32(beta) * c
    C.copy_to_device(d.astype(np.float32)) if hasattr(C, "copy_to_device") else C.set(d)


def make_launcher(kernel: str, folder: Path) -> Callable:
    """The launcher (A, B, C, alpha, beta) of a GEMM_CHOICES name."""
    base, thin = kernel.removesuffix(THIN_SUFFIX), kernel.endswith(THIN_SUFFIX)
    if kernel not in GEMM_CHOICES:
        raise ValueError(f"unknown GEMM {kernel!r}; choose from {', '.join(GEMM_CHOICES)}")
    if base in ("cublas", CUDA_C) and not select().on_gpu:
        raise ValueError(f"--gemm {kernel} needs a GPU")
    if base == "cublas":
        return cublas_gemm
    if base == "host":
        return host_gemm
    from nnkit import thin_dispatch

    if base == CUDA_C:
        from nnkit import gemm_cuda, gemm_cuda_thin

        # With +thin, the network's whole GEMM on version 5: its tiles get row-major
        # operands (transposed views copied first), thin products the thin kernels.
        launch = gemm_cuda_thin.rowmajor_gemm_cuda if thin else gemm_cuda.gemm_cuda
        kernels = thin_dispatch.ThinKernels(gemm_cuda_thin.rows_gemm,
                                            gemm_cuda_thin.columns_gemm,
                                            gemm_cuda_thin.outer_gemm)
    else:
        from nnkit import gemm_thin

        launch = load_function(folder, *KERNELS[base])
        kernels = thin_dispatch.ThinKernels(gemm_thin.rows_gemm, gemm_thin.columns_gemm,
                                            gemm_thin.outer_gemm)
    return thin_dispatch.with_thin(launch, kernels) if thin else launch


def make_gemm(kernel: str, folder: Path) -> Callable:
    """gemm(A, B, C, alpha, beta, trans_a=, trans_b=) over the chosen launcher."""
    return partial(gemm, make_launcher(kernel, folder))


class DeviceRunner:
    """A GPU implementation (net_2_backprop.py of a folder) driven from the host."""

    MODULE = "net_2_backprop"

    def __init__(self, folder: Path, params: network.Params, config: TrainConfig,
                 gemm_fn: Callable):
        if config.loss != "ce":
            raise ValueError("the GPU network implements softmax with cross-entropy; "
                             "--loss mse runs with --impl reference")
        self.forward, self.backward, self.sgd_step = (
            load_function(folder, self.MODULE, name)
            for name in ("forward", "backward", "sgd_step"))
        self.config, self.gemm = config, gemm_fn
        self.weights = [to_device(W.astype(np.float32)) for W in params.weights]
        self.biases = [to_device(b.astype(np.float32)) for b in params.biases]
        self._losses: list[Any] = []
        self._device_set: tuple | None = None  # (host X, host labels, their device copies)

    def epoch_data(self, X: np.ndarray, labels: np.ndarray, order: np.ndarray) -> tuple:
        """The epoch's rows in `order`, on the device. On a GPU the set is copied there
        once and gathered there each epoch: gathering 54,000 MNIST rows on the host and
        copying them took ~0.16 s an epoch (8 of the 20 s of a grading job's 51 epochs)."""
        if not select().on_gpu:
            return to_device(X[order]), to_device(labels[order].astype(np.int64))
        import cupy

        held = self._device_set
        if held is None or held[0] is not X or held[1] is not labels:
            held = self._device_set = (X, labels, to_device(X),
                                       to_device(labels.astype(np.int64)))
        rows = cupy.asarray(order)
        return held[2][rows], held[3][rows]

    def step(self, X: Any, labels: Any) -> None:
        acts = self.forward(self.weights, self.biases, X, self.gemm)
        grads_W, grads_b, losses = self.backward(self.weights, self.biases, acts, labels,
                                                 self.config.lam, self.gemm)
        self.sgd_step(self.weights, self.biases, grads_W, grads_b, self.config.lr)
        self._losses.append(losses)  # fetched once an epoch: no synchronisation per batch

    def finish_epoch(self) -> float:
        total = float(sum(to_host(losses).astype(np.float64).sum() for losses in self._losses))
        self._losses = []
        return total

    def params(self) -> network.Params:
        return network.Params([to_host(W) for W in self.weights],
                              [to_host(b) for b in self.biases])

    def predict(self, X: np.ndarray, chunk: int = 8192) -> np.ndarray:
        out = []
        for start in range(0, len(X), chunk):
            logits = self.forward(self.weights, self.biases, to_device(X[start:start + chunk]),
                                  self.gemm)[-1]
            out.append(to_host(logits).argmax(axis=1))
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def train(runner: Runner, data: Dataset, config: TrainConfig, *, evaluate: bool = True,
          show_progress: bool = False, on_epoch: Callable[[EpochRecord], None] | None = None,
          ) -> History:
    """Run config.epochs epochs of minibatch SGD; the batch order depends on config.seed."""
    from nnkit.backend import synchronize

    history = History()
    n = len(data.train)
    slices = batch_slices(n, config.batch)
    for epoch in range(config.epochs):
        X, labels = runner.epoch_data(data.train.images, data.train.labels,
                                      epoch_order(n, config.seed, epoch))
        bar = Progress(len(slices), f"epoch {epoch + 1}/{config.epochs}") if show_progress \
            else None
        synchronize()
        start = time.perf_counter()
        for s in slices:
            runner.step(X[s], labels[s])
            if bar:
                bar.update()
        summed = runner.finish_epoch()
        synchronize()
        seconds = time.perf_counter() - start
        if bar:
            bar.close()
        params = runner.params()
        val = None
        if evaluate and len(data.val):
            val = float((runner.predict(data.val.images) == data.val.labels).mean())
        record = EpochRecord(epoch + 1, summed / n + network.l2_term(params, config.lam), val,
                             seconds)
        history.epochs.append(record)
        if on_epoch:
            on_epoch(record)
    return history
