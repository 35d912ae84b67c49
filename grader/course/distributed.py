"""Grading a class on several machines: each process grades a share, then one merges.

Under MPI (each rank takes every size-th submission, rank 0 merges after a barrier):

    mpiexec -n 8 python -m grader.course.distributed SUBMISSION ... --out grades [grader options]

As a Slurm job array, or by hand, one shard per task, then a merge:

    python -m grader.course.distributed --shard $SLURM_ARRAY_TASK_ID --shards 8 SUBS... --out grades
    python -m grader.course.distributed --merge grades

Each shard writes its reports to <out>/shard-<k>/ with the usual grader; merging gathers
the per-submission JSON reports into <out>/grades.csv, feedback and summary, exactly as a
single run would have written them. Performance ratios stay meaningful because every
shard times the solution and cuBLAS on its own machine, in its own run. Under MPI, the
ranks on one machine split its GPUs between them: run at most one rank per GPU.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from grader.isolation import gpus
from grader.reports import report
from grader.results import ItemResult, SubmissionResult


def share(submissions: list[str], shard: int, shards: int) -> list[str]:
    """The submissions of one shard: every shards-th of the sorted list, from `shard`."""
    if shards < 1 or not 0 <= shard < shards:
        raise ValueError(f"shard {shard} of {shards}: need 0 <= shard < shards")
    return sorted(submissions)[shard::shards]


def _load(data: dict) -> SubmissionResult:
    items = [ItemResult(**{k: v for k, v in item.items() if k in ItemResult.__annotations__})
             for item in data["items"]]
    return SubmissionResult(data["name"], data.get("path", ""), data.get("backend", ""), items)


def merge(out: Path) -> list[SubmissionResult]:
    """Combine every <out>/shard-*/ into the reports of one run, in <out> (merged with
    what <out> already holds, as a single run would)."""
    from grader.pipeline import write_class_reports

    book = report.Gradebook(out)
    results = []
    for path in sorted(out.glob("shard-*/*.json")):
        data = report.read_report(path)
        if data is None:
            continue
        data["id"] = path.stem
        book.add({**data, "notes": list(data.get("notes") or [])})
        results.append(_load(data))
    write_class_reports(book, rebuild_all=True)
    results.sort(key=lambda r: r.name)
    return results


def main(argv: list[str] | None = None) -> int:
    from grader.cli import build_parser
    from grader.cli import main as grade

    parser = argparse.ArgumentParser(prog="python -m grader.course.distributed",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--shard", type=int, default=None, help="this task's share (0-based)")
    parser.add_argument("--shards", type=int, default=None, help="how many shares in all")
    parser.add_argument("--merge", type=Path, default=None,
                        help="only merge the shards already written under this folder")
    args, rest = parser.parse_known_args(argv)
    if args.merge:
        results = merge(args.merge)
        print(report.table(results, results[0].backend if results else ""))
        return 0
    grading = build_parser().parse_args(rest)
    if grading.bugs or not grading.submissions:
        parser.error("name the submission folders to share out (--bugs is not supported)")
    comm = None
    if args.shard is None:  # under mpiexec: the rank is the shard
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        shard, shards = comm.Get_rank(), comm.Get_size()
        # Ranks on one machine split its GPUs between them (before any worker starts).
        local = comm.Split_type(MPI.COMM_TYPE_SHARED)
        ids = gpus.visible_ids()
        if ids:
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(
                gpus.local_share(ids, local.Get_rank(), local.Get_size()))
    else:
        shard, shards = args.shard, args.shards or 1
    try:
        mine = share(grading.submissions, shard, shards)
    except ValueError as err:
        parser.error(str(err))
    options = ["--config", str(grading.config), "--parts", grading.parts,
               "--kernels", grading.kernels, "--jobs", str(grading.jobs),
               "--out", str(grading.out / f"shard-{shard}")]
    status = grade([*mine, *options, *(["--details"] if grading.details else [])]) if mine else 0
    if comm is not None:
        statuses = comm.gather(status, root=0)
        if shard == 0:
            merge(grading.out)
            status = max(statuses)
    return status


if __name__ == "__main__":
    sys.exit(main())
