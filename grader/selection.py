"""What a grading run covers besides its parts and kernels (`Selection`): a quick check of
one function (`make check FUNCTION=...`), and whether the solution is there to time the
speed items against (the student kit has none). Passed from the command line to the
pipeline; nothing else of the grader changes with it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from grader.results import NOT_GRADED, ItemResult
from grader.worker.net import FUNCTIONS as NET_FUNCTIONS

# Part 3's functions and the item that checks each one on its own.
MPI_FUNCTIONS = {"shard_counts": "mpi.scatter", "scatter_batch": "mpi.scatter",
                 "allreduce_gradients": "mpi.allreduce", "chunk_bounds": "mpi.ring",
                 "ring_allreduce": "mpi.ring"}
# Items checking several functions, whose checks name the function in their case.
SHARED_ITEMS = {"net.kernels", "net.sgd"}

NO_SOLUTION = ("not graded here: speed is scored against the solution, timed by the "
               "instructors; time your kernels with `python -m nnkit bench-gemm --impl starter`")
NO_SOLUTION_NET = ("not graded here: speed is scored against the solution's network, timed "
                   "by the instructors; time yours with `python -m nnkit bench-train`")


def function_items() -> dict[str, tuple[str, str]]:
    """Function name -> (part, item id) for every function a quick check accepts."""
    found = {name: ("net", item) for name, (_, item) in NET_FUNCTIONS.items()}
    found |= {name: ("mpi", item) for name, item in MPI_FUNCTIONS.items()}
    return found


@dataclass(frozen=True)
class Selection:
    function: str | None = None  # a quick check: only the item checking this function
    solution: bool = True  # is solution/ here to time the speed items against?

    def __post_init__(self) -> None:
        if self.function is not None and self.function not in function_items():
            raise ValueError(f"unknown function {self.function!r}; choose from "
                             f"{', '.join(function_items())}")

    @property
    def part(self) -> str | None:
        """The part of the function checked alone, if any."""
        return function_items()[self.function][0] if self.function else None

    @property
    def item(self) -> str | None:
        return function_items()[self.function][1] if self.function else None

    def needs_reference(self, part: str) -> bool:
        """A single function's item needs no trained reference (a Part 2 one would need
        full MNIST on a GPU); Part 3's items compute theirs when they run."""
        return part != self.part

    def keep(self, items: list[ItemResult], on_gpu: bool) -> list[ItemResult]:
        """Of a task's items, those this run shows: the function's item alone (and, where
        the item checks several functions, this one's checks) in a quick check; on a GPU,
        every speed item not graded for want of a solution says so."""
        kept = []
        for item in items:
            if self.item is not None and item.id != self.item:
                continue
            if self.item in SHARED_ITEMS:
                mine = [c for c in item.checks if self.function in str(c.get("case", ""))]
                item = replace(item, checks=mine or item.checks, message=(
                    f"{item.message} (the item's points count all its functions; the "
                    f"checks shown are {self.function}'s)"))
            if on_gpu and not self.solution and item.status == NOT_GRADED:
                if item.id == "net.performance":
                    item = replace(item, message=NO_SOLUTION_NET)
                elif item.id.startswith("gemm.") and item.id.endswith(".performance"):
                    item = replace(item, message=NO_SOLUTION)
            kept.append(item)
        return kept


EVERYTHING = Selection()  # a plain grading run
