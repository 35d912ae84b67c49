"""Benchmark, not a test: what counting memory traffic (grader/worker/memcount.py) adds to
a simulated grading, per GEMM kernel of the solution. CPU seconds of the kernel's
correctness cases under the race checker (what the worker runs today), of its counted
call without and with the counter, and the counted call's share of the cases' time.
`python -m tests.bench_simperf [--rounds N] [--guard]` prints a table (medians);
--guard arms the worker's audit hook first, as in a grading worker (its frame look-ups
are judged there)."""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
from pathlib import Path

os.environ.setdefault("NNKIT_DEVICE", "sim")


def _cpu(launch, cases, counted: bool) -> float:
    from grader.worker import memcount
    from tests.bench_simulator import cpu_of_cases

    return cpu_of_cases(launch, cases, 1, memcount.Counter() if counted else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--guard", action="store_true")
    parser.add_argument("--kernels", nargs="*", default=None)
    args = parser.parse_args()
    threading.stack_size(1024 * 1024)  # as the worker sets it in the simulator
    from grader.cases.gemm import correctness_cases, profile_case
    from grader.worker import blocksync, kernelsim
    from grader.worker.common import confine
    from nnkit.backend import select
    from nnkit.gemm import KERNELS
    from nnkit.submission import NAMED, load_function

    if select().on_gpu:
        raise SystemExit("set NNKIT_DEVICE=sim: this measures the CUDA simulator")
    kernelsim.install()
    blocksync.install()
    launches = {k: load_function(NAMED["solution"], *KERNELS[k])
                for k in args.kernels or list(KERNELS)}
    if args.guard:
        scratch = Path(tempfile.mkdtemp(prefix="bench-simperf-"))
        confine(NAMED["solution"], scratch, [scratch])
    print(f"audit hook armed: {args.guard}")
    print("| kernel | correctness cases, CPU s | counted call uncounted, CPU s "
          "| counted call, CPU s | counted / cases |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for kernel, launch in launches.items():
        cases, profile = correctness_cases(False, kernel), [profile_case(kernel)]
        runs: dict[str, list[float]] = {"cases": [], "plain": [], "counted": []}
        for _ in range(args.rounds):
            runs["cases"].append(_cpu(launch, cases, False))
            runs["plain"].append(_cpu(launch, profile, False))
            runs["counted"].append(_cpu(launch, profile, True))
        cases_s, plain_s, counted_s = (statistics.median(runs[k]) for k in runs)
        print(f"| {kernel} | {cases_s:.2f} | {plain_s:.2f} | {counted_s:.2f} "
              f"| {counted_s / cases_s:.2f} |", flush=True)


if __name__ == "__main__":
    main()
