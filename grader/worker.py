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
import traceback
from pathlib import Path

import numpy as np

CUBLAS = "cublas"  # the module name that selects cuBLAS instead of a submission


def describe_error(err: BaseException, submission: Path | None) -> str:
    """'Type: message', plus the last line of the submission's code on the way."""
    text = f"{type(err).__name__}: {err}".strip()
    where = ""
    if submission is not None:
        for frame in traceback.extract_tb(err.__traceback__):
            if Path(frame.filename).resolve().is_relative_to(submission):
                where = f" ({Path(frame.filename).name}, line {frame.lineno}: {frame.line})"
    return (text + where)[:2000]


def _save_error(path: Path, err: BaseException, submission: Path | None) -> None:
    path.write_text(describe_error(err, submission))


def run_job(job: dict) -> None:
    from nnkit.backend import select

    out = Path(job["outdir"])
    backend = select()
    submission = Path(job["submission"]).resolve() if job.get("submission") else None
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
    """Correctness cases (`case-N`) then timed cases (`perf-N`) of one GEMM launcher."""
    from grader.cases import GemmCase, build_operands
    from nnkit.backend import copy_into, synchronize, to_device, to_host
    from nnkit.gemm import cublas_gemm, gemm
    from nnkit.submission import load_function
    from nnkit.timing import spin_up, time_calls

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
    for n, spec in enumerate(job["cases"]):
        case = GemmCase.from_json(spec)
        try:
            _, bufs, (A, B, C) = prepare(case)
            with watch(out / f"case-{n}.findings.json"):
                gemm(launch, A, B, C, case.alpha, case.beta,
                     trans_a=case.trans_a, trans_b=case.trans_b)
            synchronize()
            host = [to_host(b) for b in bufs]
            np.savez(out / f"case-{n}.npz", A=host[0], B=host[1], C=host[2])
        except BaseException as err:  # noqa: BLE001
            _save_error(out / f"case-{n}.err", err, submission)

    if job.get("perf"):
        spin_up()  # every worker meets the GPU at the same clock
    for n, spec in enumerate(job.get("perf", [])):
        case = GemmCase.from_json(spec)
        try:
            ops, bufs, (A, B, C) = prepare(case)
            pristine_C = to_device(ops.C_buf)

            def restore_c() -> None:
                copy_into(bufs[2], pristine_C)  # noqa: B023 - used within this iteration only

            def call() -> None:
                gemm(launch, A, B, C, case.alpha, case.beta)  # noqa: B023

            timings = time_calls(call, repeats=job["repeats"], warmup=job["warmup"],
                                 before_each=restore_c)
            np.savez(out / f"perf-{n}.npz", C=to_host(bufs[2]))
            (out / f"perf-{n}.json").write_text(
                json.dumps({"host": timings.host, "device": timings.device}))
        except BaseException as err:  # noqa: BLE001
            _save_error(out / f"perf-{n}.err", err, submission)


def simulator_watch():
    """In the simulator: a context manager factory that runs a launch under the race and
    index checker and writes its findings to the given file. On a GPU: does nothing."""
    from contextlib import contextmanager, nullcontext

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
    run_job(job)
    (Path(job["outdir"]) / "done").write_text("")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
