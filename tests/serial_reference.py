"""Single-process training with the CPU reference, the oracle of the device-resident tests
(tests/device_scenarios.py under mpiexec, tests/kit/test_device_parallel.py in pytest)."""

from __future__ import annotations

from typing import Any

from nnkit import network
from nnkit.dataset import batch_slices, epoch_order
from nnkit.training import ReferenceRunner, TrainConfig


def serial_reference(data: Any, config: TrainConfig,
                     params: network.Params) -> tuple[network.Params, list[float]]:
    """Single-process training with the CPU reference, batch for batch as nnkit.training
    runs it, and its epoch losses; written out here so that nothing selects a CUDA backend
    (numba) in a process that only needs CuPy."""
    runner = ReferenceRunner(params.copy(), config)
    n, losses = len(data.train), []
    for epoch in range(config.epochs):
        X, y = runner.epoch_data(data.train.images, data.train.labels,
                                 epoch_order(n, config.seed, epoch))
        for s in batch_slices(n, config.batch):
            runner.step(X[s], y[s])
        losses.append(runner.finish_epoch() / n + network.l2_term(runner.params(), config.lam))
    return runner.params(), losses
