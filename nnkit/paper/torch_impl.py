"""PyTorch on the CPU or the GPU: the framework the paper's Theano stands for today.

The same network as the reference (sigmoid hidden layers; softmax with cross-entropy or
sigmoid with squared error; L2 on the weights only), trained with autograd and plain SGD,
in float32 with TF32 off. Optional: `available()` says why it cannot run when PyTorch is
missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from nnkit import network
from nnkit.training import TrainConfig


def available(device: str = "cpu") -> tuple[bool, str]:
    try:
        import torch
    except ImportError:
        return False, "PyTorch is not installed"
    if device == "cuda" and not torch.cuda.is_available():
        return False, "PyTorch sees no GPU"
    return True, f"PyTorch {torch.__version__}"


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """PyTorch's intra-op threads for the body (None: leave its default, all cores)."""
    import torch

    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class TorchRunner:
    """A Runner of nnkit.training on PyTorch tensors."""

    def __init__(self, params: network.Params, config: TrainConfig, device: str = "cpu"):
        import torch

        config.validate()
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        self.torch, self.config, self.device = torch, config, torch.device(device)
        as_tensor = lambda a: torch.tensor(a.astype(np.float32), device=self.device,  # noqa: E731
                                           requires_grad=True)
        self.weights = [as_tensor(W) for W in params.weights]
        self.biases = [as_tensor(b) for b in params.biases]
        self._losses: list = []

    def _losses_of(self, X: Any, labels: Any) -> Any:
        """Per-sample losses of the batch (autograd records the graph)."""
        F = self.torch.nn.functional
        A = X
        last = len(self.weights) - 1
        for layer, (W, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            Z = F.linear(A, W, b)
            A = Z if layer == last else self.torch.sigmoid(Z)
        if self.config.loss == "ce":
            return F.cross_entropy(A, labels, reduction="none")
        Y = F.one_hot(labels, A.shape[1]).to(A.dtype)
        return 0.5 * ((self.torch.sigmoid(A) - Y) ** 2).sum(dim=1)

    def _backward(self, X: Any, labels: Any) -> Any:
        for p in self.weights + self.biases:
            p.grad = None
        losses = self._losses_of(X, labels)
        l2 = sum((W * W).sum() for W in self.weights)
        (losses.mean() + 0.5 * self.config.lam * l2).backward()
        return losses.detach()

    def gradient(self, X: np.ndarray, labels: np.ndarray) -> tuple[network.Params, float]:
        """Host copies of the batch's gradients and its mean loss (no L2 term)."""
        Xt, yt = self.epoch_data(X, labels, np.arange(len(labels)))
        losses = self._backward(Xt, yt)
        host = lambda t: t.grad.detach().cpu().numpy()  # noqa: E731
        return network.Params([host(W) for W in self.weights],
                              [host(b) for b in self.biases]), float(losses.mean())

    def epoch_data(self, X: np.ndarray, labels: np.ndarray, order: np.ndarray) -> tuple:
        torch = self.torch
        return (torch.tensor(np.ascontiguousarray(X[order], dtype=np.float32),
                             device=self.device),
                torch.tensor(labels[order].astype(np.int64), device=self.device))

    def step(self, X: Any, labels: Any) -> None:
        losses = self._backward(X, labels)
        with self.torch.no_grad():
            for p in self.weights + self.biases:
                p -= self.config.lr * p.grad
        self._losses.append(losses.sum())

    def finish_epoch(self) -> float:
        total = float(sum(float(s) for s in self._losses))
        self._losses = []
        return total

    def params(self) -> network.Params:
        host = lambda t: t.detach().cpu().numpy().copy()  # noqa: E731
        return network.Params([host(W) for W in self.weights], [host(b) for b in self.biases])

    def predict(self, X: np.ndarray) -> np.ndarray:
        return network.predict(self.params(), X.astype(np.float32))
