"""Hints for wrong results (grader/checks/hints.py): each mistake, made by hand on the
float32 result of a real case, gets its hint; a right result, a randomly wrong one and the
mistake spoiled by one stray element get none (no misleading hint)."""

from __future__ import annotations

import numpy as np
import pytest

from grader.cases.gemm import GemmCase, build_operands
from grader.checks import hints
from nnkit.gemm_reference import error_bound, reference


def _case(M: int, N: int, K: int, alpha: float = 2.0, beta: float = 5.0):
    """(A, B, C, alpha, beta) of a case as the kernel gets it (C NaN when beta = 0)."""
    ops = build_operands(GemmCase(M, N, K, alpha, beta, seed=11), 7)
    A, B, C = ops.views()
    return A, B, C, alpha, beta


def _f32(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float64).astype(np.float32)


def _d(A, B, C, alpha, beta, k: int | None = None) -> np.ndarray:
    """alpha * A[:, :k] @ B[:k] + beta * C, rounded to float32 as a kernel returns it."""
    A, B = A[:, :k] if k is not None else A, B[:k] if k is not None else B
    return _f32(reference(A, B, C, alpha, beta))


def _hint(got, A, B, C, alpha, beta) -> str | None:
    return hints.gemm_hint(got, A, B, C, alpha, beta)


# -- each pattern gets its hint -----------------------------------------------------------

def test_beta_c_missing():
    A, B, C, al, be = _case(17, 5, 3)
    assert "β·C is missing" in _hint(_d(A, B, C, al, 0.0), A, B, C, al, be)


def test_beta_ignored():
    A, B, C, al, be = _case(20, 9, 70, -1.5, 5.0)
    assert "β is ignored" in _hint(_d(A, B, C, al, 1.0), A, B, C, al, be)


def test_c_scaled_by_alpha():  # examples/bugs/naive_beta_ignored.toml: alpha * (acc + C)
    A, B, C, al, be = _case(17, 5, 3)
    got = _f32(al * (_f32(A.astype(np.float64) @ B) + C.astype(np.float64)))
    assert "scaled by α instead of β" in _hint(got, A, B, C, al, be)


def test_alpha_twice():
    A, B, C, al, be = _case(33, 40, 37)
    assert "α is applied twice" in _hint(_d(A, B, C, al * al, be), A, B, C, al, be)


def test_constant_factor():
    A, B, C, al, be = _case(17, 65, 36, 0.5, -2.0)
    got = _f32(3.0 * reference(A, B, C, al, be))
    hint = _hint(got, A, B, C, al, be)
    assert "3 times the expected value" in hint and "once too often" not in hint


def test_constant_factor_alpha_names_alpha():  # alpha applied to the whole result again
    A, B, C, al, be = _case(17, 65, 36, 3.0, -2.0)
    got = _f32(al * reference(A, B, C, al, be))
    assert "(α once too often?)" in _hint(got, A, B, C, al, be)


def test_last_partial_k_tile_left_out():  # examples/bugs/shared_tile_off_by_one.toml
    A, B, C, al, be = _case(33, 40, 37)
    hint = _hint(_d(A, B, C, al, be, k=32), A, B, C, al, be)
    assert "stops at k = 32 of K = 37" in hint


def test_first_k_left_out():
    A, B, C, al, be = _case(20, 9, 70)
    got = _f32(reference(A[:, 1:], B[1:], C, al, be))
    assert "starts at k = 1" in _hint(got, A, B, C, al, be)


def test_edge_rows_and_columns_wrong():
    A, B, C, al, be = _case(33, 40, 37)
    got = _d(A, B, C, al, be)
    got[32:, :] += 1.0  # the partial last tile of rows (tile 32) ...
    got[:, 32:] -= 1.0  # ... and of columns
    hint = _hint(got, A, B, C, al, be)
    assert "past the last full tile are wrong (rows 32 of 33 and columns 32..39 of 40)" in hint


def test_edge_columns_never_written():
    A, B, C, al, be = _case(3, 67, 17, 2.0, 0.0)
    got = _d(A, B, C, al, be)
    got[:, 64:] = np.nan  # C starts NaN when beta = 0: these were never written
    hint = _hint(got, A, B, C, al, be)
    assert "past the last full tile are never written (columns 64..66 of 67)" in hint


def test_only_first_block_right():
    A, B, C, al, be = _case(40, 70, 5)
    got = _d(A, B, C, al, be)
    right = got[:8, :32].copy()
    got[:] = C  # never written
    got[:8, :32] = right
    hint = _hint(got, A, B, C, al, be)
    assert "only the block [0:8, 0:32] is right" in hint and "never written" in hint
    assert "grid is too small" in hint


def test_transposed_result():
    A, B, C, al, be = _case(9, 9, 4)
    assert "transpose" in _hint(_d(A, B, C, al, be).T.copy(), A, B, C, al, be)


def test_result_stored_column_by_column():
    A, B, C, al, be = _case(17, 5, 3)
    got = _d(A, B, C, al, be).T.reshape(17, 5).copy()
    assert "column by column" in _hint(got, A, B, C, al, be)


def test_a_read_with_swapped_indices():
    A, B, C, al, be = _case(12, 7, 12)
    got = _f32(reference(A.T, B, C, al, be))
    assert "A is read as A[k, i]" in _hint(got, A, B, C, al, be)


def test_b_read_with_swapped_indices():
    A, B, C, al, be = _case(1, 67, 67, 2.0, 0.0)
    got = _f32(reference(A, B.T, C, al, be))
    assert "B is read as B[j, k]" in _hint(got, A, B, C, al, be)


def test_all_nan_with_beta_zero():
    A, B, C, al, be = _case(17, 5, 3, 2.0, 0.0)
    got = np.full((17, 5), np.nan, np.float32)  # 0 * NaN, or C never written
    assert _hint(got, A, B, C, al, be) == hints.ALL_NAN_BETA0


def test_scattered_nan_with_beta_zero():
    A, B, C, al, be = _case(17, 5, 3, 2.0, 0.0)
    got = _d(A, B, C, al, be)
    got[[1, 5, 9], [0, 3, 2]] = np.nan
    assert "when β = 0 do not read C" in _hint(got, A, B, C, al, be)


def test_nan_from_a_read_past_the_edge():
    A, B, C, al, be = _case(17, 5, 3)
    got = _d(A, B, C, al, be)
    got[[1, 5, 9], [0, 3, 2]] = np.nan
    assert "a load past the edge of A or B" in _hint(got, A, B, C, al, be)


def test_c_unchanged():
    A, B, C, al, be = _case(17, 5, 3)
    assert _hint(C.copy(), A, B, C, al, be) == hints.UNCHANGED


def test_all_zero():
    A, B, C, al, be = _case(17, 5, 3)
    assert _hint(np.zeros((17, 5), np.float32), A, B, C, al, be) == hints.GEMM_ZERO


# -- no misleading hint ---------------------------------------------------------------------

SHAPES = [(17, 5, 3, 2.0, 5.0), (33, 40, 37, 2.0, 5.0), (3, 67, 17, 2.0, 0.0),
          (12, 12, 12, -1.5, 5.0), (1, 67, 67, 2.0, 0.0), (1, 1, 1, 1.0, 0.0)]


@pytest.mark.parametrize("shape", SHAPES)
def test_right_result_gets_no_hint(shape):
    A, B, C, al, be = _case(*shape)
    got = _d(A, B, C, al, be)
    # The largest error a right float32 kernel may make, in the direction of the bound.
    bound = error_bound(A, B, C, al, be)
    ref = reference(A, B, C, al, be)
    edged = _f32(ref + 0.9 * bound)
    assert _hint(got, A, B, C, al, be) is None
    if np.all(np.abs(edged - ref) <= bound):  # float32 rounding may push it over
        assert _hint(edged, A, B, C, al, be) is None


@pytest.mark.parametrize("shape", SHAPES)
def test_randomly_wrong_result_gets_no_hint(shape):
    A, B, C, al, be = _case(*shape)
    rng = np.random.default_rng(5)
    got = _d(A, B, C, al, be) + rng.uniform(0.5, 1.0, (shape[0], shape[1])).astype(np.float32)
    assert _hint(got, A, B, C, al, be) is None


def test_one_wrong_element_inside_gets_no_hint():
    A, B, C, al, be = _case(33, 40, 37)
    got = _d(A, B, C, al, be)
    got[5, 7] += 1.0
    assert _hint(got, A, B, C, al, be) is None


SQUARE = (40, 40, 37)
SPOILABLE = {  # name: (shape M, N, K, the mistake)
    "beta missing": (SQUARE, lambda A, B, C, al, be: _d(A, B, C, al, 0.0)),
    "beta ignored": (SQUARE, lambda A, B, C, al, be: _d(A, B, C, al, 1.0)),
    "alpha twice": (SQUARE, lambda A, B, C, al, be: _d(A, B, C, al * al, be)),
    "factor 3": (SQUARE, lambda A, B, C, al, be: _f32(3.0 * reference(A, B, C, al, be))),
    "k stops at 32": (SQUARE, lambda A, B, C, al, be: _d(A, B, C, al, be, k=32)),
    "k from 1": (SQUARE, lambda A, B, C, al, be: _f32(reference(A[:, 1:], B[1:], C, al, be))),
    "transposed": (SQUARE, lambda A, B, C, al, be: _d(A, B, C, al, be).T.copy()),
    "column by column": ((17, 5, 3),
                         lambda A, B, C, al, be: _d(A, B, C, al, be).T.reshape(17, 5)),
    "A swapped": ((12, 7, 12), lambda A, B, C, al, be: _f32(reference(A.T, B, C, al, be))),
    "B swapped": ((9, 12, 12), lambda A, B, C, al, be: _f32(reference(A, B.T, C, al, be))),
}


@pytest.mark.parametrize("name", SPOILABLE)
def test_pattern_with_one_stray_element_gets_no_hint(name):
    """The mistake plus one element wrong some other way is not that mistake: no hint
    (the element sits in the interior, so no region pattern fits either)."""
    shape, mistake = SPOILABLE[name]
    A, B, C, al, be = _case(*shape)
    got = mistake(A, B, C, al, be).copy()
    assert _hint(got, A, B, C, al, be) is not None  # the unspoiled pattern is recognised
    got[3, 3] += 100.0
    assert _hint(got, A, B, C, al, be) is None


def test_edge_strip_mostly_right_gets_no_hint():
    """A few wrong elements in the last rows are not 'the edge tiles left out'."""
    A, B, C, al, be = _case(33, 40, 37)
    got = _d(A, B, C, al, be)
    got[32, 3] += 1.0
    got[32, 20] += 1.0
    assert _hint(got, A, B, C, al, be) is None


def test_first_block_pattern_needs_a_rectangle():
    A, B, C, al, be = _case(40, 70, 5)
    got = C.copy()
    got[:8, :32] = _d(A, B, C, al, be)[:8, :32]
    got[3, 3] = C[3, 3]  # one element inside the block not right either: no rectangle
    assert _hint(got, A, B, C, al, be) is None


# -- array_hint: the patterns that need no operands -----------------------------------------

def _plain(shape=(9, 13)):
    rng = np.random.default_rng(3)
    expected = rng.uniform(-1, 1, shape)
    return expected, np.full(shape, 1e-6)


def test_array_hint_patterns():
    expected, bound = _plain()
    assert "2 times the expected" in hints.array_hint(2 * expected, expected, bound)
    assert hints.array_hint(np.zeros_like(expected), expected, bound) == hints.ZERO
    square, sbound = _plain((7, 7))
    assert "transpose" in hints.array_hint(square.T, square, sbound)
    got = expected.copy()
    got[8:, :] = np.nan  # the last row, past a full tile of 8 rows, never written
    assert "never written (rows 8 of 9)" in hints.array_hint(got, expected, bound)


def test_array_hint_none_when_right_or_random():
    expected, bound = _plain()
    assert hints.array_hint(expected + 0.5 * bound, expected, bound) is None
    rng = np.random.default_rng(8)
    assert hints.array_hint(expected + rng.uniform(0.1, 1, expected.shape), expected,
                            bound) is None
    assert hints.array_hint(expected[:, :3], expected, bound) is None  # another shape


def test_network_outputs_get_a_hint_too():
    """grader/checks/net.py's elementwise comparison gives the same kind of hint."""
    from grader.checks.net import compare

    expected, bound = _plain()
    assert compare("out", expected.astype(np.float32), expected, bound) is None
    message = compare("out", (2 * expected).astype(np.float32), expected, bound)
    assert message.startswith("out: 117 of 117 elements wrong")
    assert message.endswith("; hint: every element is 2 times the expected value: a scale "
                            "factor applied wrongly or twice")
    rng = np.random.default_rng(1)
    noisy = (expected + rng.uniform(0.1, 1, expected.shape)).astype(np.float32)
    assert "hint" not in compare("out", noisy, expected, bound)


def test_an_accumulator_never_zeroed():
    """Bug round: a register kernel whose accumulators start with what memory held."""
    A, B, C, al, be = _case(20, 9, 70, -1.5, 5.0)
    got = _d(A, B, C, al, be)
    got[3:5, 2:4] += np.float32(3e31)
    assert "did not start at 0" in _hint(got, A, B, C, al, be)
