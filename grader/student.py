"""`make check` of the student kit: grade your own modules as the instructors will.

    python -m grader.student [FOLDER] [grader options] [--function NAME]
                                                            (FOLDER defaults to starter)

It is `python -m grader` with one difference: the student kit holds no solution, and on a
GPU the speed items are scored against the solution timed in the same run. There, they
are reported as not graded, with a pointer to `python -m nnkit bench-gemm` (Part 2:
`bench-train`), instead of the whole run failing. Where solution/ exists (the
instructors' kit) nothing changes.

--function NAME grades only the item that checks that function (a Part 2 or Part 3
function, `make check FUNCTION=softmax_cross_entropy`) and prints only its checks; the
GEMM kernels are chosen with the grader's own --parts gemm --kernels naive. The student
Makefile writes each such quick check into a folder of its own under build/check/, so
the full run's feedback is never overwritten.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from grader.parts import gemm as part1
from grader.parts import net as part2
from grader.results import ItemResult
from grader.worker.net import FUNCTIONS as NET_FUNCTIONS
from nnkit.submission import NAMED

# Part 3's functions and the item that checks each one on its own.
MPI_FUNCTIONS = {"shard_counts": "mpi.scatter", "scatter_batch": "mpi.scatter",
                 "allreduce_gradients": "mpi.allreduce", "chunk_bounds": "mpi.ring",
                 "ring_allreduce": "mpi.ring"}
# Items checking several functions, whose checks name the function in their case.
SHARED_ITEMS = {"net.kernels", "net.sgd"}


def function_items() -> dict[str, tuple[str, str]]:
    """Function name -> (part, item id) for every function --function accepts."""
    found = {name: ("net", item) for name, (_, item) in NET_FUNCTIONS.items()}
    found |= {name: ("mpi", item) for name, item in MPI_FUNCTIONS.items()}
    return found

NO_SOLUTION = ("not graded here: speed is scored against the solution, timed by the "
               "instructors; time your kernels with `python -m nnkit bench-gemm --impl starter`")


NO_SOLUTION_NET = ("not graded here: speed is scored against the solution's network, timed "
                   "by the instructors; time yours with `python -m nnkit bench-train`")


def without_solution() -> None:
    """Make Parts 1 and 2 skip the solution's timing and say why speed is not graded."""
    original = part1.performance_item
    original_net = part2.speed_item

    def net_speed(*args) -> ItemResult:
        item = original_net(*args)
        if args[-1] is None and item.points is None and item.message != part2.NO_GPU:
            item.message = NO_SOLUTION_NET
        return item

    part2.measure_speed_reference = lambda config, workroot, reference: None
    part2.speed_item = net_speed

    def performance(kernel, correct, run, perf, config, reference) -> ItemResult:
        item = original(kernel, correct, run, perf, config, reference)
        if reference is None and item.points is None:
            item.message = NO_SOLUTION
        return item

    part1.measure_reference = lambda config, workroot: None
    part1.performance_item = performance


def only_function(function: str) -> str:
    """Make the grader run only the task grading `function`'s item, keep only that item
    and, where the item checks several functions, only the checks of this one. Returns
    the part to grade."""
    from grader import cli, pipeline

    part, item_id = function_items()[function]
    original = pipeline.tasks

    def keep(items: list[ItemResult]) -> list[ItemResult]:
        kept = []
        for item in items:
            if item.id != item_id:
                continue
            if item_id in SHARED_ITEMS:
                mine = [c for c in item.checks if function in str(c.get("case", ""))]
                item = replace(item, checks=mine or item.checks, message=(
                    f"{item.message} (the item's points count all its functions; the "
                    f"checks shown are {function}'s)"))
            kept.append(item)
        return kept

    def tasks(*args, **kwargs):
        chosen = []
        for task in original(*args, **kwargs):
            if item_id in task.item_ids:
                run = task.run
                chosen.append(replace(task, item_ids=[item_id],
                                      run=lambda run=run: keep(run())))
        return chosen

    pipeline.tasks = tasks  # grade_all looks it up in pipeline's namespace
    references = cli.references

    def needed_references(parts, *args, **kwargs):
        # A single function's item needs no trained reference (a Part 2 one needs full
        # MNIST on a GPU); the training items of Part 3 compute theirs when they run.
        return references([p for p in parts if p != part], *args, **kwargs)

    cli.references = needed_references  # the command trains them before grading
    return part


def main(argv: list[str] | None = None) -> int:
    from grader.cli import build_parser
    from grader.cli import main as grade

    args = list(sys.argv[1:] if argv is None else argv)
    pick = argparse.ArgumentParser(add_help=False)
    pick.add_argument("--function", default=None)
    chosen, args = pick.parse_known_args(args)
    if chosen.function:
        if chosen.function not in function_items():
            print(f"grader.student: --function: unknown {chosen.function!r}; choose from "
                  f"{', '.join(function_items())} (GEMM kernels: PART=gemm KERNEL=naive)",
                  file=sys.stderr)
            return 2
        args += ["--parts", only_function(chosen.function)]
    if not build_parser().parse_args(args).submissions:
        args.insert(0, "starter")
    if not NAMED["solution"].is_dir():
        without_solution()
    return grade(args)


if __name__ == "__main__":
    sys.exit(main())
