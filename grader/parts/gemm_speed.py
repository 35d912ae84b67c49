"""Part 1's timed task on a GPU: the correctness tasks of a submission's kernels hand
their verdicts here (`Verdicts`), and one fresh worker, with the GPU to itself, times the
kernels that passed one after the other (`grade_speed`). One start of Python, numba and
CUDA per submission instead of one per kernel; the speed items are decided as before
(grader/parts/gemm.py: performance_item)."""

from __future__ import annotations

import threading
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

from grader.cases.gemm import job_inputs, perf_cases
from grader.checks import anticheat
from grader.isolation import gpus
from grader.isolation.runner import run_worker, stopping
from grader.parts.common import all_or_nothing, fresh_copy
from grader.parts.gemm import Reference, job_spec, perf_seed, performance_item, time_limit
from grader.results import ItemResult
from grader.scoring import Config
from grader.worker.jobs import TimedKernel
from nnkit.gemm import KERNELS


class Verdicts:
    """The correctness verdicts of one submission's kernels, handed from their tasks to
    the submission's timed task, which times only the kernels that passed."""

    def __init__(self, kernels: list[str]) -> None:
        self.kernels = list(kernels)
        self._got: dict[str, tuple[bool, list]] = {}
        self._cond = threading.Condition()

    def record(self, kernel: str, correct: bool, written: list | None = None) -> None:
        with self._cond:
            self._got.setdefault(kernel, (correct, list(written or [])))
            self._cond.notify_all()

    def wait(self) -> dict[str, tuple[bool, list]] | None:
        """Every kernel's (correct, library products written in its source), or None
        when the grading run is being stopped."""
        with self._cond:
            while len(self._got) < len(self.kernels):
                if stopping():
                    return None
                self._cond.wait(timeout=0.5)
            return dict(self._got)


def grade_speed(kernels: list[str], submission: Path, workroot: Path, config: Config,
                per_gpu: dict[str, Reference], verdicts: Verdicts,
                slots: gpus.GpuSlots | None, on_gpu: bool = True) -> list[ItemResult]:
    """The performance items of a submission's kernels (GPU): once their correctness is
    known, the kernels that passed are timed one after the other in one fresh worker
    that has the GPU to itself. A library product called during the timed calls costs
    the kernel its correctness item too (returned here, replacing the first)."""
    got = verdicts.wait()
    if got is None:
        return []
    timed = [k for k in kernels if got[k][0]]
    outdir, run = None, None
    # Held to the end: the checks below (float64 products of the timed shapes) must not
    # run beside another submission's timed job, which they would slow down.
    with slots.hold() if slots else nullcontext():
        reference = gpus.for_current(per_gpu)  # the GPU the timed job runs on
        if timed:
            run = _timed_run(timed, submission, workroot / "timed", config, on_gpu)
            outdir = run.outdir
            missing = [k for k in timed if not _any_perf_file(outdir, k)]
            if len(timed) > 1 and missing and run.returncode not in (0, None):
                # The job died before these kernels: each again, alone, so that one
                # kernel's crash never costs the others their timing.
                for k in missing:
                    alone = _timed_run([k], submission, workroot / f"timed-{k}", config,
                                       on_gpu)
                    _adopt(alone.outdir, outdir, k)
        return _speed_items(kernels, got, outdir, run, config, reference)


def _speed_items(kernels: list[str], got: dict, outdir: Path | None, run, config: Config,
                 reference: Reference | None) -> list[ItemResult]:
    items = []
    early = anticheat.read_hits(outdir) if outdir else []  # while the modules loaded
    for kernel in kernels:
        correct, written = got[kernel]
        if outdir is not None and correct:
            called = early + anticheat.read_hits(outdir, f"{kernel}-{anticheat.RECORD}")
            if called:
                correct = False
                item_id = f"gemm.{kernel}.correctness"
                items.append(all_or_nothing(
                    item_id, config, False, "uses a library matrix product where the GEMM "
                    f"must be hand-written (in the timed calls): {anticheat.summary(called)}",
                    figures={"library_products": {
                        "called": [f.describe() for f in called],
                        "in_source": [f.describe() for f in written]}}))
        items.append(performance_item(kernel, correct, run, perf_cases(), config, reference,
                                      prefix=f"{kernel}-"))
    return items


def _any_perf_file(outdir: Path, kernel: str) -> bool:
    return any((outdir / f"{kernel}-{name}").exists()
               for name in ("load.err", "perf-0.json", "perf-0.err"))


def _adopt(source: Path, dest: Path, kernel: str) -> None:
    """Move one kernel's files of a job of its own into the first job's results."""
    for path in source.glob(f"{kernel}-*"):
        path.replace(dest / path.name)


def _timed_run(kernels: list[str], submission: Path, workdir: Path, config: Config,
               on_gpu: bool = True):
    """The timed cases of `kernels`, in a fresh worker with the GPU to itself (on_gpu
    False: in the simulator, for the tests)."""
    copy = fresh_copy(workdir, submission)
    perf = perf_cases()
    job = replace(job_spec(copy, kernels[0], [], perf, config), module=None, function=None,
                  perf_seed=None,
                  timed=[TimedKernel(k, KERNELS[k][0], KERNELS[k][1], perf_seed(config, k))
                         for k in kernels])
    # One timing window per kernel (grader/isolation/windows.py): the GPU alone for its
    # timed calls only, or for the whole job where other jobs cannot be frozen.
    return run_worker(job, workdir, time_limit(config, on_gpu) * len(kernels), on_gpu,
                      inputs=job_inputs([], perf, config.secret), windows=len(kernels))
