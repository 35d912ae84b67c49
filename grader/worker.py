"""The process that runs submitted code: `python -m grader.worker JOB.json`.

It runs the submission's code on every case of the job (GEMM launchers, the network's
functions, training runs) and writes raw results only (arrays after the call, the seconds
each timed call took, error texts) into the job's folder, one file per case as soon as the
case ends, so that whatever finished before a crash or a timeout is kept. It computes no
verdict and no score: the parent does, from these files.
"""

from __future__ import annotations

import json
import sys
import threading
import traceback
from contextlib import nullcontext
from pathlib import Path

import numpy as np

CUBLAS = "cublas"  # the module name that selects cuBLAS instead of a submission
LIMITS: dict = {}  # the sandbox's limits of this worker, from the job (for messages only)


def describe_error(err: BaseException, submission: Path | None) -> str:
    """'Type: message', plus the last line of the submission's code on the way."""
    text = f"{type(err).__name__}: {err}".strip()
    where = ""
    if submission is not None:
        for frame in traceback.extract_tb(err.__traceback__):
            if Path(frame.filename).resolve().is_relative_to(submission):
                where = f" ({Path(frame.filename).name}, line {frame.lineno}: {frame.line})"
    return (text + where)[:1800] + _limit_hint(err)


def _limit_hint(err: BaseException) -> str:
    """Which of the sandbox's limits an error comes from, when it says so."""
    errno = getattr(err, "errno", None)
    if isinstance(err, MemoryError) and LIMITS.get("memory_mb"):
        return f" (the worker's memory limit is {LIMITS['memory_mb']} MB)"
    if (errno == 11 or "can't start new thread" in str(err)) and LIMITS.get("processes"):
        return (f" (the job may run {LIMITS['processes']} processes and threads at a time)")
    if errno == 27 and LIMITS.get("file_mb"):
        return f" (files are limited to {LIMITS['file_mb']} MB)"
    return ""


def _save_error(path: Path, err: BaseException, submission: Path | None) -> None:
    path.write_text(describe_error(err, submission))


def run_job(job: dict) -> None:
    from nnkit import timing
    from nnkit.backend import cuda, select

    out = Path(job["outdir"])
    backend = select()
    del cuda  # imported for its side effect: numba loads before anything submitted can
    timing.capture()  # the clocks, before submitted code could replace them
    submission = Path(job["submission"]).resolve() if job.get("submission") else None
    if submission is not None:
        # Last on the path (the worker runs with -P): the submission's modules can import
        # one another, and cannot stand in for an installed module.
        sys.path.append(str(submission))
    status = {"backend": backend.describe(), "on_gpu": backend.on_gpu}
    (out / "worker.json").write_text(json.dumps(status))
    kind = job.get("kind", "gemm")
    if kind == "gemm":
        run_gemm(job, out, submission)
    elif kind in ("net_units", "net_train"):
        from grader import worker_net

        run = worker_net.run_units if kind == "net_units" else worker_net.run_training
        run(job, out, submission, _save_error)
    else:
        raise ValueError(f"unknown job kind {kind!r}")


def run_gemm(job: dict, out: Path, submission: Path | None) -> None:
    """Correctness cases (`case-N`) then timed cases (`perf-N`) of one GEMM launcher.

    A submitted launcher runs with the library matrix products trapped (grader/anticheat.py)
    from before its module is imported until the job ends."""
    from grader.anticheat import RECORD, Traps
    from grader.cases import GemmCase, build_operands
    from nnkit.backend import copy_into, synchronize, to_device, to_host
    from nnkit.gemm import cublas_gemm, gemm
    from nnkit.submission import load_function
    from nnkit.timing import spin_up

    traps = None
    if job["module"] != CUBLAS:
        traps = Traps(out / RECORD, submission)
        traps.install()
    try:
        if job["module"] == CUBLAS:
            launch = cublas_gemm
        else:
            launch = load_function(submission, job["module"], job["function"])
    except BaseException as err:  # noqa: BLE001 - any failure of student code is reported
        _save_error(out / "load.err", err, submission)
        return

    def prepare(case: GemmCase) -> tuple:
        """Host operands, their device copies, and the views the kernel is given."""
        ops = build_operands(case)
        bufs = tuple(to_device(b) for b in (ops.A_buf, ops.B_buf, ops.C_buf))
        return ops, bufs, ops.views(bufs)

    watch = simulator_watch()
    last = None  # the previous case and its device buffers, for a case that reuses them
    for n, spec in enumerate(job["cases"]):
        case = GemmCase.from_json(spec)
        try:
            if case.reuse and last is not None and _same_layout(last[0], case):
                ops = build_operands(case)
                bufs = last[1]
                for buf, host in zip(bufs, (ops.A_buf, ops.B_buf, ops.C_buf), strict=True):
                    copy_into(buf, to_device(host))
                A, B, C = ops.views(bufs)
            else:
                _, bufs, (A, B, C) = prepare(case)
            last = (case, bufs)
            with watch(out / f"case-{n}.findings.json"):
                gemm(launch, A, B, C, case.alpha, case.beta,
                     trans_a=case.trans_a, trans_b=case.trans_b)
            synchronize()
            host = [to_host(b) for b in bufs]
            np.savez(out / f"case-{n}.npz", A=host[0], B=host[1], C=host[2])
        except BaseException as err:  # noqa: BLE001
            _save_error(out / f"case-{n}.err", err, submission)

    if job.get("perf"):
        with traps.paused() if traps else nullcontext():
            spin_up()  # every worker meets the GPU at the same clock
    for n, spec in enumerate(job.get("perf", [])):
        case = GemmCase.from_json(spec)
        try:
            timings, C_last, samples = _timed_case(launch, case, job["repeats"], job["warmup"])
            np.savez(out / f"perf-{n}.npz", C=C_last, samples=samples)
            (out / f"perf-{n}.json").write_text(
                json.dumps({"host": timings.host, "device": timings.device}))
        except BaseException as err:  # noqa: BLE001
            _save_error(out / f"perf-{n}.err", err, submission)


def _same_layout(a, b) -> bool:
    return (a.M, a.N, a.K, a.trans_a, a.trans_b, a.guard) == (b.M, b.N, b.K, b.trans_a,
                                                               b.trans_b, b.guard)


def _timed_case(launch, case, repeats: int, warmup: int) -> tuple:
    """Time the launcher on one case. Before every call (outside the timer) A gets new
    values and C its starting ones; after it, a sample of C is kept for the grader to
    check, so that no call can skip its work by replaying an earlier result.
    Returns (timings, C after the last call, samples: one row per call)."""
    from grader.cases import build_operands, perturbed_a, sample_positions
    from nnkit.backend import copy_into, to_device, to_host
    from nnkit.gemm import gemm
    from nnkit.timing import time_calls

    ops = build_operands(case)
    bufs = tuple(to_device(b) for b in (ops.A_buf, ops.B_buf, ops.C_buf))
    A, B, C = ops.views(bufs)
    pristine_C = to_device(ops.C_buf)
    rows, cols = sample_positions(case)
    samples: list[np.ndarray] = []

    def before() -> None:
        copy_into(bufs[0], to_device(perturbed_a(ops.A_buf, len(samples))))
        copy_into(bufs[2], pristine_C)

    def after() -> None:
        samples.append(to_host(bufs[2])[ops.interior][rows, cols])

    timings = time_calls(lambda: gemm(launch, A, B, C, case.alpha, case.beta),
                         repeats=repeats, warmup=warmup, before_each=before, after_each=after)
    return timings, to_host(bufs[2]), np.stack(samples)


def simulator_watch():
    """In the simulator: a context manager factory that runs a launch under the race and
    index checker and writes its findings to the given file. On a GPU: does nothing."""
    from contextlib import contextmanager

    from nnkit.backend import select

    if select().on_gpu:
        return lambda path: nullcontext()
    from grader import simcheck

    @contextmanager
    def watch(path: Path):
        with simcheck.instrument() as findings:
            try:
                yield
            finally:
                path.write_text(json.dumps([f.to_json() for f in findings]))

    return watch


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[1]).read_text())
    LIMITS.update(job.get("limits", {}))
    if job.get("thread_stack_kb"):
        # The simulator runs a Python thread per CUDA thread, up to 1,024 at once: with the
        # default 8 MiB stacks they would reserve 8 GiB of the address space the memory
        # limit counts.
        threading.stack_size(int(job["thread_stack_kb"]) * 1024)
    run_job(job)
    (Path(job["outdir"]) / "done").write_text("")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
