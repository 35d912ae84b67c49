"""`make check` of the student kit: grade your own modules as the instructors will.

    python -m grader.student [FOLDER] [grader options]      (FOLDER defaults to starter)

It is `python -m grader` with one difference: the student kit holds no solution, and on a
GPU the speed items are scored against the solution timed in the same run. There, they
are reported as not graded, with a pointer to `python -m nnkit bench-gemm`, instead of
the whole run failing. Where solution/ exists (the instructors' kit) nothing changes.
"""

from __future__ import annotations

import sys

from grader.parts import gemm as part1
from grader.results import ItemResult
from nnkit.submission import NAMED

NO_SOLUTION = ("not graded here: speed is scored against the solution, timed by the "
               "instructors; time your kernels with `python -m nnkit bench-gemm --impl starter`")


def without_solution() -> None:
    """Make Part 1 skip the solution's timing and say why its speed is not graded."""
    original = part1.performance_item

    def performance(kernel, correct, run, perf, config, reference) -> ItemResult:
        item = original(kernel, correct, run, perf, config, reference)
        if reference is None and item.points is None:
            item.message = NO_SOLUTION
        return item

    part1.measure_reference = lambda config, workroot: None
    part1.performance_item = performance


def main(argv: list[str] | None = None) -> int:
    from grader.cli import build_parser
    from grader.cli import main as grade

    args = list(sys.argv[1:] if argv is None else argv)
    if not build_parser().parse_args(args).submissions:
        args.insert(0, "starter")
    if not NAMED["solution"].is_dir():
        without_solution()
    return grade(args)


if __name__ == "__main__":
    sys.exit(main())
