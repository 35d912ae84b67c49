"""The process that runs submitted code: `python -m grader.worker JOB.json`.

Set-up comes first, before any submitted code is imported: the backend and numba, the
clocks, the job's inputs (read, then removed from the job's folder), the launch recorder,
the library traps, a photograph of the trusted modules, and last the audit hook. Then the
job's kind runs the submission's code on every case and writes raw results only (arrays
after the call, launch counts, the replay's outputs, timings, error texts) into the job's
output folder, one file per case as soon as the case ends, so that whatever finished
before a crash or a timeout is kept. It computes no verdict and no score: the grader
does, from these files.
"""

from __future__ import annotations

import time

# Before the imports below: they are part of a job's cost (the CPU of the interpreter's
# own start is counted in the first phase).
_STARTED = time.time(), time.process_time()

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from grader.worker import CUBLAS, gemm, net  # noqa: E402
from grader.worker.common import (  # noqa: E402
    LIMITS,
    PHASES,
    Context,
    Profiled,
    confine,
    mark,
    read_inputs,
    write_phases,
)
from grader.worker.jobs import GemmJob, Job  # noqa: E402


def load_inputs(job: Job, workdir: Path) -> dict[str, np.ndarray]:
    """The arrays the grader wrote for this job (removed once read)."""
    return read_inputs(workdir / job.inputs) if job.inputs else {}


def set_up(job: Job, job_file: Path) -> Context:
    from grader.worker import blocksync, kernelsim, launches, tamper, traps, warps
    from grader.worker.window import Window
    from nnkit import timing
    from nnkit.backend import cuda, preload_numba_math, select

    out = Path(job.outdir)
    backend = select()
    del cuda  # imported for its side effect: numba loads before anything submitted can
    clock = timing.capture()  # the clocks, before submitted code could replace them
    if backend.on_gpu:
        import cupy  # noqa: F401 - loaded now: the submission cannot stand in for it

        preload_numba_math()
    mark("set-up libraries")
    inputs = load_inputs(job, job_file.parent)
    submission = Path(job.submission).resolve() if job.submission else None
    (out / "worker.json").write_text(json.dumps({"backend": backend.describe(),
                                                 "on_gpu": backend.on_gpu}))
    recorder, extra = launches.NullRecorder(), {"window": Window(job.window, clock)}
    if submission is not None:
        # Last on the path (the worker runs with -P): the submission's modules can import
        # one another, and cannot stand in for an installed module.
        sys.path.append(str(submission))
        recorder = launches.Recorder(submission, backend.on_gpu)
        recorder.install()
        if not backend.on_gpu:
            kernelsim.install()  # simulated kernels as restricted as compiled ones
            blocksync.install()  # and their blocks run without the simulator's polling
            warps.install()  # with the warp intrinsics the simulator lacks
        if isinstance(job, GemmJob) and job.module != CUBLAS:
            library_traps = traps.Traps(out / traps.RECORD, submission)
            library_traps.install()
            extra["traps"] = library_traps
    ctx = Context(job, out, submission, inputs, recorder, tamper.Snapshot((), ()), clock,
                  backend.on_gpu, extra)
    mark("set-up recorder")
    if submission is not None:
        ctx.snapshot = confine(submission, out, [Path(os.environ.get("TMPDIR", "/tmp"))])
    return ctx


def main(argv: list[str]) -> int:
    job_file = Path(argv[1])
    job = Job.from_json(json.loads(job_file.read_text()))
    try:
        job_file.unlink()  # what it says (seeds, which cases are replayed) stays private
    except OSError:
        pass
    LIMITS.update(job.limits)
    if job.thread_stack_kb:
        # Threads the submission starts, and numba's simulator where blocksync is not
        # installed (a Python thread per CUDA thread, up to 1,024 at once): with the default
        # 8 MiB stacks they would reserve 8 GiB of the address space the memory limit counts.
        threading.stack_size(job.thread_stack_kb * 1024)
    PHASES.append(("start", *_STARTED))
    mark("imports")
    with Profiled(job.cprofile, Path(job.outdir)):
        ctx = set_up(job, job_file)
        mark("set-up")
        kind = job.kind
        if kind == "gemm":
            gemm.run(ctx)
        elif kind in ("net_units", "net_train"):
            (net.run_units if kind == "net_units" else net.run_training)(ctx)
        elif kind == "net_speed":
            net.run_speed(ctx)
        else:
            raise ValueError(f"unknown job kind {kind!r}")
    mark("end")
    write_phases(ctx.out)
    (ctx.out / "done").write_text("")
    return 0


if __name__ == "__main__":
    status = main(sys.argv)
    # Every result is written and closed: leave without the interpreter's tear-down
    # (numba's and CuPy's exit handlers, the CUDA context), which took ~0.5 s a job.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
