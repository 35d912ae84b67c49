"""Hints of the all-reduce item (grader/checks/mpi.py): the common slips are named."""

import numpy as np

from grader.checks.mpi import check_allreduce


def _case(grads: list[np.ndarray], shares: list[int], combine) -> tuple[bool, str]:
    case = {"ranks": len(shares), "n_local": shares, "shapes": [list(grads[0].shape)]}
    got = [{"g0": combine(grads, shares).astype(np.float32)} for _ in shares]
    return check_allreduce(case, got, [[g] for g in grads])


def test_the_plain_sum_and_the_undivided_weighted_sum_are_named():
    rng = np.random.default_rng(3)
    grads = [rng.standard_normal((4, 5)).astype(np.float32) for _ in range(3)]
    shares = [7, 7, 6]
    ok, said = _case(grads, shares, lambda g, s: np.sum(g, axis=0))
    assert not ok and "the plain sum of the ranks' gradients" in said
    ok, said = _case(grads, shares, lambda g, s: sum(n * x for n, x in zip(s, g, strict=True)))
    assert not ok and "not yet divided by n_total (20)" in said
    ok, said = _case(grads, shares, lambda g, s: np.mean(g, axis=0))
    assert not ok and "plain average" in said
    ok, said = _case(grads, shares, lambda g, s: sum(n / 20 * x.astype(np.float64)
                                                     for n, x in zip(s, g, strict=True)))
    assert ok, said


def test_an_averaging_failure_names_a_split_that_is_not_shard_counts():
    from grader.checks.mpi import split_hint

    batches = [20, 20, 1]
    mine = [np.array([n]) for n in (12, 14, 15)]  # the extra rows on the last ranks
    said = split_hint(mine, batches)
    assert "12/14/15" in said and "15/14/12" in said and "see mpi.scatter" in said
    assert split_hint([np.array([n]) for n in (15, 14, 12)], batches) == ""


def test_a_ring_whose_sums_never_reach_the_buffer_is_told_so():
    from grader.checks.mpi import ring_hint

    inputs = [np.arange(6, dtype=np.float32) + 10 * r for r in range(3)]
    exact = np.sum([x.astype(np.float64) for x in inputs], axis=0)
    got = [{"got": inputs[(r + 2) % 3].copy()} for r in range(3)]  # the left one's input
    said = ring_hint(got, inputs, 0, exact, np.full(6, 1e-3))
    assert "holds rank 2's input unchanged" in said and "in place" in said
