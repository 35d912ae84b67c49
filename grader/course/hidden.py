"""Cases of the notebooks' hidden test cells (nbgrader's `### BEGIN HIDDEN TESTS`).

Instructor-only: `nbgrader generate_assignment` strips these regions from the released
notebooks, `nbgrader autograde` puts them back, and `make dist-student` never ships this
file (tests/course/test_dist.py checks that no case here reaches the distribution). Each entry
is a list of cases in nnkit.checks' format, chosen where the visible ones are easy:
transposed operands, a 1 x 1 problem, sizes just past a block's edge, negative scalars.
"""

from __future__ import annotations

HIDDEN: dict[str, list] = {
    "gemm_naive": [(1, 1, 1, -1.5, 0.0), (33, 9, 65, 0.5, -2.0, "ABt")],
    "gemm_shared": [(1, 1, 1, -1.5, 0.0), (20, 33, 9, 0.5, -2.0, "ABt")],
    "gemm_register": [(1, 1, 1, -1.5, 0.0), (17, 65, 9, 0.5, -2.0, "ABt")],
    "gemm_hierarchical": [(1, 1, 1, -1.5, 0.0), (129, 5, 17, 0.5, -2.0, "ABt")],
    "bias_sigmoid": [(33, 40), (2, 3)],
    "add_bias": [(33, 40), (2, 3)],
    "sigmoid_backward": [(33, 40), (2, 3)],
    "column_sums": [(40, 33, -2.0), (3, 70, 1.0)],
    "softmax_cross_entropy": [(70, 10), (3, 4)],
    "sgd_update": [(300,), (4, 3, 2)],
    "forward": [([9, 5, 6, 3], 17)],
    "backward": [([9, 5, 6, 3], 17)],
    "sgd_step": [([9, 5, 6, 3], 17)],
}
