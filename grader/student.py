"""`make check` of the student kit: grade your own modules as the instructors will.

    python -m grader.student [FOLDER] [grader options] [--function NAME]
                                                            (FOLDER defaults to starter)

It is `python -m grader` with starter/ as the default folder. The student kit holds no
solution, and on a GPU the speed items are scored against the solution timed in the same
run: there, the grader reports them as not graded, with a pointer to `python -m nnkit
bench-gemm` (Part 2: `bench-train`), instead of the whole run failing
(grader/selection.py).

--function NAME grades only the item that checks that function (a Part 2 or Part 3
function, `make check FUNCTION=softmax_cross_entropy`) and prints only its checks; the
GEMM kernels are chosen with the grader's own --parts gemm --kernels naive. The student
Makefile writes each such quick check into a folder of its own under build/check/, so
the full run's feedback is never overwritten.
"""

from __future__ import annotations

import sys

from grader.selection import function_items


def main(argv: list[str] | None = None) -> int:
    from grader.cli import build_parser
    from grader.cli import main as grade

    args = list(sys.argv[1:] if argv is None else argv)
    chosen = build_parser().parse_known_args(args)[0]
    if chosen.function and chosen.function not in function_items():
        print(f"grader.student: --function: unknown {chosen.function!r}; choose from "
              f"{', '.join(function_items())} (GEMM kernels: PART=gemm KERNEL=naive)",
              file=sys.stderr)
        return 2
    if not chosen.submissions:
        args.insert(0, "starter")
    return grade(args)


if __name__ == "__main__":
    sys.exit(main())
