"""Benchmark, not a test: CPU seconds of grading a submission in the CUDA simulator, per
part and for all parts, as `python -m grader` does it (sandbox, workers and all).

Each grading runs in a fresh grader process with `--jobs 1`, so that the CPU time of the
processes it reaps (user + system, RUSAGE_CHILDREN) is that grading's alone, and with
GRADER_PROFILE set, so that each job's share can be told from the grader's own (its
imports, the references, the checks). Prints two tables: per part (CPU, wall, the jobs'
CPU, the grader's) and per job (where its time went).

    python -m tests.bench_sim_grading [--submissions solution starter] [--parts gemm net mpi]
        [--kit OTHER_CHECKOUT]

--kit grades with another checkout of the kit (its grader, run by this interpreter): the
"before" of a before/after comparison. Its per-job CPU needs a grader whose profile lines
carry `cpu_children`; the totals do not.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KIT_ROOT = Path(__file__).resolve().parents[1]
SEED = "20251124"
ALL = "gemm,net,mpi"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def grade(submission: str, parts: str, scratch: Path, kit: Path = KIT_ROOT) -> dict:
    """Grade one submission's parts in a fresh grader; its CPU, wall time and profile."""
    profile = scratch / f"profile-{submission.replace('/', '_')}-{parts}.jsonl"
    profile.unlink(missing_ok=True)
    env = {**os.environ, "NNKIT_DEVICE": "sim", "GRADER_PROFILE": str(profile)}
    before, start = _children_cpu(), time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "grader", submission, "--parts", parts, "--jobs", "1",
         "--seed", SEED, "--out", str(scratch / f"out-{parts}")],
        cwd=kit, env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - start, _children_cpu() - before
    if done.returncode != 0:
        raise SystemExit(f"grading {submission} ({parts}) failed:\n{done.stderr[-2000:]}")
    jobs = [json.loads(line) for line in profile.read_text().splitlines()] \
        if profile.exists() else []
    return {"cpu": cpu, "wall": wall, "jobs": jobs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--submissions", nargs="+", default=["solution"])
    parser.add_argument("--parts", nargs="+", default=["gemm", "net", "mpi"])
    parser.add_argument("--no-all", action="store_true",
                        help="leave out the grading of all parts in one run")
    parser.add_argument("--kit", type=Path, default=KIT_ROOT,
                        help="the checkout whose grader grades (default: this one)")
    args = parser.parse_args()
    runs = [*args.parts, *([] if args.no_all else [ALL])]
    with tempfile.TemporaryDirectory(prefix="bench-sim-grading-") as tmp:
        results = {(s, p): grade(s, p, Path(tmp), args.kit.resolve())
                   for s in args.submissions for p in runs}
    print(f"kit: {args.kit.resolve()}")
    print("| submission | parts | CPU s | wall s | jobs | jobs' CPU s | grader's CPU s |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for (sub, parts), r in results.items():
        jobs_cpu = sum(j.get("cpu_children", 0.0) for j in r["jobs"])
        print(f"| {sub} | {parts} | {r['cpu']:.1f} | {r['wall']:.1f} | {len(r['jobs'])} "
              f"| {jobs_cpu:.1f} | {r['cpu'] - jobs_cpu:.1f} |")
    print()
    print("| submission | job | CPU s | wall s | worker phases: CPU s |")
    print("| --- | --- | ---: | ---: | --- |")
    for (sub, parts), r in results.items():
        if parts == ALL and len(runs) > 1:
            continue  # the same jobs as the per-part runs
        for j in r["jobs"]:
            name = j["kind"] + (f" {j['module']}" if j.get("module") else "")
            phases = ", ".join(f"{k} {v:.2f}" for k, v in j.get("steps_cpu", {}).items())
            print(f"| {sub} | {name} | {j.get('cpu_children', 0.0):.2f} "
                  f"| {j['worker_seconds']:.2f} | {phases} |")


if __name__ == "__main__":
    main()
