"""The rows each rank trained on (grader/checks/mpi.py rows_shared): every row once
between the ranks, and each rank its even share of every minibatch."""

import numpy as np

from grader.cases.mpi import minibatches
from grader.checks.mpi import even_share, rows_shared


def _counts(*rows: int) -> list[np.ndarray]:
    return [np.array([r], np.int64) for r in rows]


def test_minibatches_and_the_even_share():
    batches = minibatches(81, {"batch": 20, "epochs": 2})
    assert batches == [20, 20, 20, 20, 1] * 2
    assert even_share(batches, 3) == (2 * 4 * 6, 2 * (4 * 7 + 1))  # 7/7/6 and 1/0/0
    assert even_share([5], 1) == (5, 5)


def test_any_even_split_passes_and_an_uneven_one_fails():
    batches = [20, 1]  # shard_counts: 7/7/6, then 1/0/0
    assert rows_shared(_counts(7, 7, 7), batches) == ""  # the extra rows on another rank
    assert rows_shared(_counts(8, 7, 6), batches) == ""
    assert "rows between them" in rows_shared(_counts(21, 21, 21), batches)
    kept = rows_shared(_counts(21, 0, 0), batches)
    assert kept.startswith("rank 0 computed gradients of 21 of the 21 rows") and "6 to 8" in kept
    assert "no count" in rows_shared([None, *_counts(21)], batches)
