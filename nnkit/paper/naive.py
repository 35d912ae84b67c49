"""Naive serial: one example after another, explicit loops compiled by numba, one thread.

The paper's baseline ("Naive Serial", its own linear-algebra loops in C++). Every other
implementation is also compared with this one.
"""

from __future__ import annotations

import numpy as np

from nnkit import network
from nnkit.paper import loops
from nnkit.paper.flat import pack, unpack
from nnkit.training import TrainConfig


class LoopRunner:
    """The Runner of nnkit.training for the loop implementations: parameters in a flat
    vector, gradients from loops.example_gradient. Subclasses choose how a batch's
    examples are spread over threads (`_batch_gradient`)."""

    def __init__(self, params: network.Params, config: TrainConfig):
        config.validate()
        self.config = config
        self.theta, self.layout = pack(params.copy(np.float32))
        self.is_weight = self.layout.weight_mask()
        self.loss_code = loops.LOSS_CODES[config.loss]
        self.grad = np.zeros(self.layout.size, dtype=np.float32)
        self._loss_total = 0.0

    def _batch_gradient(self, X: np.ndarray, labels: np.ndarray) -> float:
        """self.grad <- the summed (unscaled) gradients of the batch; returns summed loss."""
        raise NotImplementedError

    def gradient(self, X: np.ndarray, labels: np.ndarray) -> tuple[network.Params, float]:
        """dJ/dW and dJ/db of the batch (1/n and the L2 term included) and the batch's mean
        loss (without the L2 term), leaving the parameters as they are."""
        total = self._batch_gradient(X, labels)
        loops.apply_step(self.theta, self.grad, self.is_weight, np.float32(1.0 / len(X)),
                         np.float32(self.config.lam), np.float32(0.0))
        return unpack(self.grad, self.layout), total / len(X)

    def epoch_data(self, X: np.ndarray, labels: np.ndarray, order: np.ndarray) -> tuple:
        return np.ascontiguousarray(X[order], dtype=np.float32), labels[order].astype(np.int64)

    def step(self, X: np.ndarray, labels: np.ndarray) -> None:
        self._loss_total += self._batch_gradient(X, labels)
        loops.apply_step(self.theta, self.grad, self.is_weight, np.float32(1.0 / len(X)),
                         np.float32(self.config.lam), np.float32(self.config.lr))

    def finish_epoch(self) -> float:
        total, self._loss_total = self._loss_total, 0.0
        return total

    def params(self) -> network.Params:
        return unpack(self.theta, self.layout)

    def predict(self, X: np.ndarray) -> np.ndarray:
        return network.predict(self.params(), X.astype(np.float32))


class NaiveRunner(LoopRunner):
    """All examples on the calling thread."""

    def __init__(self, params: network.Params, config: TrainConfig):
        super().__init__(params, config)
        self.acts = np.zeros(self.layout.act_size, dtype=np.float32)
        self.deltas = np.zeros(self.layout.act_size, dtype=np.float32)

    def _batch_gradient(self, X: np.ndarray, labels: np.ndarray) -> float:
        return loops.share_gradient(self.theta, self.layout.layers, self.layout.acts, X, labels,
                                    0, len(X), self.loss_code, self.acts, self.deltas,
                                    self.grad)
