"""One cell of the benchmark: an implementation trained for a fixed time at one batch size.

The implementation trains from the given weights on the training split, batch after batch
in the kit's epoch order, until the time budget is spent; then its test accuracy is taken.
The same run gives the speed: the budget is cut into rounds (each at least one step), and
the fastest round's seconds per image times the epoch size is the time per epoch. Nothing
but training steps is timed: the first step (compilation, thread start, allocation) runs
before the clock, and building an epoch's shuffled copy of the data stops the clock.

Small epoch subsets are therefore enough: at batch 3200 on a CPU one step is the whole
measurement, which is why `--quick` can include it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from nnkit import network
from nnkit.dataset import Dataset, batch_slices, epoch_order
from nnkit.paper.impls import Impl, synchronize, threads_for
from nnkit.training import TrainConfig

WARMUP_IMAGES = 8  # the untimed first step: enough to compile and start every thread


@dataclass
class Measurement:
    seconds_per_image: float  # fastest round
    images: int  # trained on during the budget (the warm-up step included)
    steps: int
    rounds: int
    test_accuracy: float


def measure(impl: Impl, params: network.Params, config: TrainConfig, data: Dataset,
            seconds: float, rounds: int = 3) -> Measurement:
    """Train `impl` for about `seconds` (at least one step a round) and time it."""
    n = len(data.train)
    slices = batch_slices(n, config.batch)
    with threads_for(impl):
        runner = impl.make(params, config)
        epoch = 0
        X, y = runner.epoch_data(data.train.images, data.train.labels,
                                 epoch_order(n, config.seed, epoch))
        first = slice(0, min(config.batch, WARMUP_IMAGES))
        runner.step(X[first], y[first])
        synchronize(impl)
        images, steps, pos = first.stop, 1, 1 if first.stop == slices[0].stop else 0
        if pos == 0:  # the warm-up took part of the first batch: the rest of it comes next
            slices = [slice(first.stop, slices[0].stop), *slices[1:]]
        rates, spent = [], 0.0
        while len(rates) < rounds and spent < seconds:
            round_images, elapsed = 0, 0.0
            start = time.perf_counter()
            while True:
                if pos == len(slices):  # a new epoch: its shuffled copy is made off the clock
                    synchronize(impl)
                    elapsed += time.perf_counter() - start
                    epoch += 1
                    slices = batch_slices(n, config.batch)
                    X, y = runner.epoch_data(data.train.images, data.train.labels,
                                             epoch_order(n, config.seed, epoch))
                    pos = 0
                    synchronize(impl)
                    start = time.perf_counter()
                s = slices[pos]
                runner.step(X[s], y[s])
                pos += 1
                steps += 1
                round_images += s.stop - s.start
                if elapsed + time.perf_counter() - start >= seconds / rounds:
                    break
            synchronize(impl)
            elapsed += time.perf_counter() - start
            spent += elapsed
            images += round_images
            rates.append(elapsed / round_images)
        runner.finish_epoch()
    accuracy = float(np.mean(runner.predict(data.test.images) == data.test.labels))
    return Measurement(min(rates), images, steps, len(rates), accuracy)
