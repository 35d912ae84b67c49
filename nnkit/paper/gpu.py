"""The network on the GPU: the solution's kernels, and CuPy on cuBLAS.

- `solution_runner`: the kit's DeviceRunner around solution/net_2_backprop.py with one of
  the solution's GEMMs (naive, shared, register) or cuBLAS under its own kernels. The
  solution implements softmax with cross-entropy only; for the paper's squared error the
  output layer is one more kernel here (`sigmoid_mse`) and the rest of the backward pass
  is the solution's kernels and GEMM, composed the same way.
- `cupy_runner`: nnkit.paper.arraynet over CuPy, so every product is a cuBLAS call and
  every elementwise step a CuPy kernel: what a framework without fusion does.

Both work in the CUDA simulator (the first one with numba's simulated arrays), which is
how the tests check them on tiny nets; timings mean something only on a GPU.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from nnkit import network
from nnkit.backend import copy, cuda, empty
from nnkit.paper.arraynet import ArrayRunner, numpy_ops
from nnkit.submission import load_module, resolve
from nnkit.training import DeviceRunner, TrainConfig, make_gemm

ROWS_PER_BLOCK = 128


@cuda.jit
def sigmoid_mse_kernel(Z, labels, dZ, losses, inv_n):
    i = cuda.grid(1)
    if i < Z.shape[0]:
        total = np.float32(0.0)
        for j in range(Z.shape[1]):
            p = np.float32(1.0) / (np.float32(1.0) + math.exp(-Z[i, j]))
            diff = p - (np.float32(1.0) if j == labels[i] else np.float32(0.0))
            total += np.float32(0.5) * diff * diff
            dZ[i, j] = diff * p * (np.float32(1.0) - p) * inv_n
        losses[i] = total


def sigmoid_mse(Z: Any, labels: Any, dZ: Any, losses: Any) -> None:
    """Row by row: P = sigmoid(Z), losses[i] = 0.5 ||P_i - onehot||^2 and
    dZ = (P - Y) P (1 - P) / n, the delta of the mean loss (the reference's "mse")."""
    n = Z.shape[0]
    grid = (n + ROWS_PER_BLOCK - 1) // ROWS_PER_BLOCK
    sigmoid_mse_kernel[grid, ROWS_PER_BLOCK](Z, labels, dZ, losses, np.float32(1.0 / n))


# The body below is the Part 2 backward pass with another output delta, so it sits between
# solution markers: the student kit ships it as a stub (grader/course/dist.py), to be written as an
# optional exercise; until then the GPU versions run with cross-entropy only.
def mse_backward_pass(kernels: Any, weights: list, biases: list, acts: list, labels: Any,
                      lam: float, gemm: Callable) -> tuple[list, list, Any]:
    """(grads_W, grads_b, losses) for the squared error: the output delta from sigmoid_mse,
    every layer below it with the implementation's kernels (its net_1_kernels module) and
    the GEMM it is given, as its own cross-entropy backward does."""
    ### BEGIN SOLUTION
    n = acts[0].shape[0]
    dZ = empty(acts[-1].shape)
    losses = empty((n,))
    sigmoid_mse(acts[-1], labels, dZ, losses)
    out_W, out_b = [], []
    for depth in range(len(weights)):
        W, A = weights[-1 - depth], acts[-2 - depth]
        grad = copy(W)  # beta = lam adds the L2 term inside the GEMM
        gemm(dZ, A, grad, 1.0, lam, trans_a=True)
        bias_grad = empty((W.shape[0],))
        kernels.column_sums(dZ, bias_grad)
        out_W.insert(0, grad)
        out_b.insert(0, bias_grad)
        if depth + 1 < len(weights):
            below = empty(A.shape)
            gemm(dZ, W, below, 1.0, 0.0)
            kernels.sigmoid_backward(below, A)
            dZ = below
    return out_W, out_b, losses
    ### END SOLUTION


def mse_backward(kernels: Any) -> Callable:
    """mse_backward_pass with the implementation's kernels bound: a backward(weights,
    biases, acts, labels, lam, gemm) like the implementation's own."""
    return partial(mse_backward_pass, kernels)


class SolutionRunner(DeviceRunner):
    """DeviceRunner for either loss: cross-entropy through the implementation's own
    backward, squared error through mse_backward over its kernels."""

    def __init__(self, folder: Path, params: network.Params, config: TrainConfig,
                 gemm_fn: Callable):
        # DeviceRunner refuses "mse" (the students' backward is cross-entropy only); it is
        # built for "ce" and given the squared error's backward afterwards.
        super().__init__(folder, params, replace(config, loss="ce"), gemm_fn)
        self.config = config
        if config.loss == "mse":
            self.backward = mse_backward(load_module(folder, "net_1_kernels"))


def solution_runner(gemm: str, params: network.Params, config: TrainConfig,
                    impl: str = "solution") -> SolutionRunner:
    """The implementation's network with GEMM `gemm` (naive, shared, register, cublas,
    or host: NumPy, for tests in the simulator)."""
    folder = resolve(impl)
    return SolutionRunner(folder, params, config, make_gemm(gemm, folder))


def cupy_runner(params: network.Params, config: TrainConfig) -> ArrayRunner:
    import cupy

    return ArrayRunner(numpy_ops(cupy), params, config)
