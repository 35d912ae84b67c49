"""The cells of the benchmark: implementations trained for a fixed time at one batch size.

Each implementation trains from the given weights on the training split, batch after batch
in the kit's epoch order, for the time budget; then its test accuracy is taken. The same
run gives the speed: the budget is cut into rounds (each at least one step), and the
fastest round's seconds per image times the epoch size is the time per epoch. Nothing but
training steps is timed: the first step (compilation, thread start, allocation) runs
before the clock, and building an epoch's shuffled copy of the data stops the clock.

The implementations of one batch size take their rounds in turn (round 1 of each, then
round 2 of each, ...), so that a change in the machine's load during the measurement
touches all of them alike and the ratios between them stay fair: on a shared machine the
load moves within seconds.

Small epoch subsets are therefore enough: at batch 3200 on a CPU one step is a whole
round, which is why `--quick` can include it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
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


class Cell:
    """One implementation at one batch size: start(), then rounds, then finish()."""

    def __init__(self, impl: Impl, params: network.Params, config: TrainConfig, data: Dataset):
        self.impl, self.params, self.config, self.data = impl, params, config, data
        self.n = len(data.train)
        self.rates: list[float] = []
        self.images = self.steps = 0

    def _epoch(self, epoch: int) -> None:
        self.X, self.y = self.runner.epoch_data(self.data.train.images, self.data.train.labels,
                                                epoch_order(self.n, self.config.seed, epoch))
        self.slices, self.pos, self.epoch = batch_slices(self.n, self.config.batch), 0, epoch

    def start(self) -> None:
        """Build the runner and take the untimed warm-up step."""
        with threads_for(self.impl):
            self.runner = self.impl.make(self.params, self.config)
            self._epoch(0)
            first = slice(0, min(self.config.batch, WARMUP_IMAGES))
            self.runner.step(self.X[first], self.y[first])
            synchronize(self.impl)
        self.images, self.steps = first.stop, 1
        if first.stop == self.slices[0].stop:
            self.pos = 1
        else:  # the warm-up took part of the first batch: the rest of it comes next
            self.slices = [slice(first.stop, self.slices[0].stop), *self.slices[1:]]

    def round(self, seconds: float) -> None:
        """Train for `seconds` (at least one step) and record the time per image."""
        sync: Callable[[], None] = lambda: synchronize(self.impl)  # noqa: E731
        images, elapsed = 0, 0.0
        with threads_for(self.impl):
            start = time.perf_counter()
            while True:
                if self.pos == len(self.slices):  # a new epoch, made off the clock
                    sync()
                    elapsed += time.perf_counter() - start
                    self._epoch(self.epoch + 1)
                    sync()
                    start = time.perf_counter()
                s = self.slices[self.pos]
                self.runner.step(self.X[s], self.y[s])
                self.pos += 1
                self.steps += 1
                images += s.stop - s.start
                if elapsed + time.perf_counter() - start >= seconds:
                    break
            sync()
            elapsed += time.perf_counter() - start
        self.images += images
        self.rates.append(elapsed / images)

    def finish(self) -> Measurement:
        self.runner.finish_epoch()
        predicted = self.runner.predict(self.data.test.images)
        accuracy = float(np.mean(predicted == self.data.test.labels))
        return Measurement(min(self.rates), self.images, self.steps, len(self.rates), accuracy)


def measure_together(impls: list[Impl], params: network.Params, config: TrainConfig,
                     data: Dataset, seconds: float, rounds: int = 3,
                     on_round: Callable[[Impl], None] | None = None,
                     ) -> list[Measurement | None]:
    """Every implementation for about `seconds`, in `rounds` interleaved rounds. None for
    one that is not written yet (a stub raising NotImplementedError, as in the student
    kit), with the reason on stderr."""
    cells = []
    for impl in impls:
        cell = Cell(impl, params, config, data)
        try:
            cell.start()
        except NotImplementedError as err:
            print(f"bench: {impl.name} skipped: {err}", file=sys.stderr)
            continue
        cells.append(cell)
    for _ in range(rounds):
        for cell in cells:
            cell.round(seconds / rounds)
            if on_round:
                on_round(cell.impl)
    found = {cell.impl.name: cell.finish() for cell in cells}
    return [found.get(impl.name) for impl in impls]


def measure(impl: Impl, params: network.Params, config: TrainConfig, data: Dataset,
            seconds: float, rounds: int = 3) -> Measurement:
    """One implementation alone."""
    found = measure_together([impl], params, config, data, seconds, rounds)[0]
    if found is None:
        raise NotImplementedError(f"{impl.name} is not written yet")
    return found
