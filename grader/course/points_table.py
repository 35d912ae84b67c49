"""handouts/points.md: a table of every graded item per part, generated from the config.

    python -m grader.course.points_table [--config grader/config.toml] [--check]

Each row names the item, what it checks, its points and the functions of starter/ it
checks (the same map `make check FUNCTION=...` uses). With --check nothing is written and
the exit status says whether handouts/points.md is up to date; a test does the same and
also checks the function names against starter/.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grader.scoring import DEFAULT_CONFIG, Config, load_config
from nnkit.submission import KIT_ROOT

HANDOUT = KIT_ROOT / "handouts" / "points.md"
PARTS = {"gemm": "Part 1, GEMM", "net": "Part 2, the network", "mpi": "Part 3, MPI"}
GEMM_FUNCTIONS = {"naive": "gemm_1_naive.py", "shared": "gemm_2_shared.py",
                  "register": "gemm_3_register.py", "hierarchical": "gemm_4_hierarchical.py"}
QUICK = {"gemm": "make check PART=gemm KERNEL=<kernel>", "net": "make check PART=net",
         "mpi": "make check PART=mpi"}


def item_functions() -> dict[str, list[str]]:
    """Item id -> the student functions its checks call (training items: every function
    of the part, through the network or the training loop)."""
    from grader.selection import function_items

    found: dict[str, list[str]] = {}
    for kernel in GEMM_FUNCTIONS:
        found[f"gemm.{kernel}.correctness"] = [f"gemm_{kernel}"]
        found[f"gemm.{kernel}.performance"] = [f"gemm_{kernel}"]
    for function, (_, item) in function_items().items():
        found.setdefault(item, []).append(function)
    found["net.agreement"] = found["net.accuracy"] = ["the whole network (Part 2)"]
    found["net.performance"] = ["the whole network (Part 2)"]
    found["mpi.data_parallel"] = ["scatter_batch", "allreduce_gradients"]
    found["mpi.averaging"] = ["scatter_batch", "allreduce_gradients"]
    found["mpi.combined"] = ["scatter_batch", "allreduce_gradients", "the whole network (Part 2)"]
    return found


def bonus_items(config: Config) -> list[str]:
    """The items of the bonus kernels (nnkit.gemm.BONUS_KERNELS), in config order."""
    from nnkit.gemm import BONUS_KERNELS

    return [i for i in config.items if i.split(".")[0] == "gemm"
            and i.split(".")[1] in BONUS_KERNELS]


def _rows(config: Config, ids: list[str], functions: dict[str, list[str]]) -> list[str]:
    rows = ["| item | what is checked | points | functions |", "| --- | --- | ---: | --- |"]
    for item in ids:
        names = ", ".join(f"`{f}`" if f.isidentifier() else f for f in functions.get(item, []))
        credit = " (partial)" if config.credit(item) == "partial" else ""
        rows.append(f"| `{item}` | {config.title(item)} | {config.points(item):g}{credit} "
                    f"| {names} |")
    return rows


def _split(config: Config, graded: list[str]) -> list[str]:
    """The total by kind of item, in points and in percent of it: the assignment's weights
    (correctness 47%, performance 20%, the reports 33%) with the default config."""
    kinds = {"Code correctness (Parts 1-3)": [i for i in graded
                                              if not i.endswith(".performance")],
             "Performance (speed items, GPU)": [i for i in graded if i.endswith(".performance")],
             "Reports (graded by hand)": list(config.manual)}
    total = sum(config.points(i) for ids in kinds.values() for i in ids) or 1.0
    rows = ["| kind | points | share of the total |", "| --- | ---: | ---: |"]
    for kind, ids in kinds.items():
        points = sum(config.points(i) for i in ids)
        rows.append(f"| {kind} | {points:g} | {100 * points / total:.0f}% |")
    return rows


def render(config: Config) -> str:
    functions = item_functions()
    bonus = bonus_items(config)
    lines = ["# Points", "",
             "Every item the grader scores, with its points (from `grader/config.toml`; this",
             "page is generated from it by `grader/course/points_table.py`). `make check`",
             "runs them all; a quick check of one part or function is given under each",
             "table. Speed items are scored on a GPU only, against the instructors'",
             "solution timed in the same run. The reports are graded by hand: see",
             "[reports.md](reports.md).", "",
             "An item earns its points when every one of its cases passes; one marked",
             "(partial) earns its points times the share of its cases that pass, rounded to",
             "0.01. A case that breaks the rules (a library product, results your kernels did",
             "not compute, the grader's source rules) leaves any item with no points.", ""]
    total = 0.0
    graded: list[str] = []
    for part, heading in PARTS.items():
        ids = [i for i in config.items if i.split(".")[0] == part
               and (config.bonus or i not in bonus)]
        graded += ids
        points = sum(config.points(i) for i in ids)
        total += points
        lines += [f"## {heading}: {points:g} points", "", *_rows(config, ids, functions)]
        lines += ["", f"Quick check: `{QUICK[part]}`"
                  + (" or `make check FUNCTION=<function>`." if part != "gemm" else "."), ""]
    if config.manual:
        points = sum(config.points(i) for i in config.manual)
        total += points
        lines += [f"## The reports, graded by hand: {points:g} points", "",
                  "The instructors grade these from your reports ([reports.md](reports.md));",
                  "until they have, your feedback shows them as not graded yet, outside",
                  "every total.", "",
                  "| item | what is graded | points |", "| --- | --- | ---: |",
                  *(f"| `{i}` | {config.title(i)} | {config.points(i):g} |"
                    for i in config.manual), ""]
    lines += ["## How the total splits", "", *_split(config, graded), ""]
    if bonus and not config.bonus:
        lines += ["## Bonus: Part 1's version 4 (not counted in this course's total)", "",
                  "Graded only when the instructors turn the bonus on (`[bonus] enabled` in",
                  "the config); check yours with `make check PART=gemm KERNEL=hierarchical`.", "",
                  *_rows(config, bonus, functions), ""]
    lines += [f"Total of the graded items: {total:g} points.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.course.points_table",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    parser.add_argument("--out", type=Path, default=HANDOUT)
    parser.add_argument("--check", action="store_true", help="only say whether it is stale")
    args = parser.parse_args(argv)
    text = render(load_config(args.config))
    if args.check:
        if not args.out.is_file() or args.out.read_text() != text:
            print(f"{args.out} is out of date: run python -m grader.course.points_table",
                  file=sys.stderr)
            return 1
        return 0
    args.out.write_text(text)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
