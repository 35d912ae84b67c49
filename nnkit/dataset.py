"""Training data as every implementation sees it: splits, reduced variants, batch order.

The batch order is a pure function of (seed, epoch), so the CPU reference and a GPU run
given the same seed see exactly the same minibatches, which is what lets the grader
compare their parameters after training.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nnkit.mnist import IMAGE_SIDE, SAMPLE_DIR, Split, load_split

SAMPLE = "sample"  # the source name of the excerpt shipped with the package


@dataclass(frozen=True)
class Dataset:
    train: Split
    val: Split
    test: Split

    @property
    def features(self) -> int:
        return self.train.images.shape[1]


def pool_images(images: np.ndarray, factor: int) -> np.ndarray:
    """Average factor x factor patches of 28x28 images: (n, 784) -> (n, (28/factor)^2)."""
    if factor == 1:
        return images
    if IMAGE_SIDE % factor:
        raise ValueError(f"pool factor must divide {IMAGE_SIDE}, got {factor}")
    side = IMAGE_SIDE // factor
    grid = images.reshape(len(images), side, factor, side, factor)
    return grid.mean(axis=(2, 4)).reshape(len(images), side * side).astype(images.dtype)


def _reduce(split: Split, pool: int, limit: int | None) -> Split:
    images, labels = split.images[:limit], split.labels[:limit]
    return Split(pool_images(images, pool), labels)


def load(source: str | Path | None = None, val_fraction: float = 0.1, seed: int = 0,
         pool: int = 1, limit: int | None = None) -> Dataset:
    """MNIST from a folder (default: data/mnist) or SAMPLE, with a seeded validation split.

    limit keeps the first `limit` images of each file (before the split); pool averages
    pixels (both for runs in the CUDA simulator, where full MNIST is far too slow).
    """
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"validation fraction must be in [0, 1), got {val_fraction}")
    folder = SAMPLE_DIR if str(source) == SAMPLE else source
    train_all = _reduce(load_split("train", folder), pool, limit)
    test = _reduce(load_split("test", folder), pool, limit)
    order = np.random.default_rng(seed).permutation(len(train_all))
    n_val = int(round(val_fraction * len(train_all)))
    val_idx, train_idx = np.sort(order[:n_val]), np.sort(order[n_val:])
    pick = lambda idx: Split(train_all.images[idx], train_all.labels[idx])  # noqa: E731
    return Dataset(pick(train_idx), pick(val_idx), test)


def epoch_order(n: int, seed: int, epoch: int) -> np.ndarray:
    """The permutation of the n training rows used in this epoch."""
    return np.random.default_rng([seed, epoch]).permutation(n)


def batch_slices(n: int, batch: int) -> list[slice]:
    """Consecutive batches of `batch` rows; the last one holds the remainder."""
    if batch < 1:
        raise ValueError(f"batch size must be at least 1, got {batch}")
    return [slice(start, min(start + batch, n)) for start in range(0, n, batch)]
