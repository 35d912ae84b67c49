"""Benchmark, not a test: CPU seconds of the solution's GEMM kernels on the simulator's
correctness cases (under the race checker, as the grading worker runs them), with the
simulator's own block loop and with grader/worker/blocksync.py, alternating rounds in one
process. `python -m tests.bench_simulator [--rounds N]` prints a table (medians)."""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time

os.environ.setdefault("NNKIT_DEVICE", "sim")


def cpu_of_cases(launch, cases, secret: int, counter=None) -> float:
    """CPU seconds of `cases` under the race checker (and `counter`, a memcount.Counter)."""
    from grader.cases.gemm import build_operands
    from grader.worker import simcheck
    from nnkit.backend import synchronize, to_device
    from nnkit.gemm import gemm

    start = time.process_time()
    for case in cases:
        ops = build_operands(case, secret)
        A, B, C = ops.views(tuple(to_device(b) for b in (ops.A_buf, ops.B_buf, ops.C_buf)))
        with simcheck.instrument(counter=counter):
            gemm(launch, A, B, C, case.alpha, case.beta, trans_a=case.trans_a,
                 trans_b=case.trans_b)
        synchronize()
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    threading.stack_size(1024 * 1024)  # as the worker sets it in the simulator
    from grader.cases.gemm import correctness_cases
    from grader.worker import blocksync
    from nnkit.backend import select
    from nnkit.gemm import KERNELS
    from nnkit.submission import NAMED, load_function

    if select().on_gpu:
        raise SystemExit("set NNKIT_DEVICE=sim: this measures the CUDA simulator")
    print("| kernel | simulator's loop, CPU s | blocksync, CPU s | ratio |")
    print("| --- | --- | --- | --- |")
    for kernel, (module, function) in KERNELS.items():
        launch = load_function(NAMED["solution"], module, function)
        cases = correctness_cases(False, kernel)
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.rounds):
            for on in (False, True):
                (blocksync.install if on else blocksync.uninstall)()
                times[on].append(cpu_of_cases(launch, cases, secret=1))
        blocksync.uninstall()
        before, after = statistics.median(times[False]), statistics.median(times[True])
        print(f"| {kernel} | {before:.2f} | {after:.2f} | {after / before:.2f} |", flush=True)


if __name__ == "__main__":
    main()
