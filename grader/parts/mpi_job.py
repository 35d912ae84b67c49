"""Running a Part 3 job and reading what its ranks wrote: one MPI job
(`mpiexec -n R python -P -m grader.worker.mpi`) as a sandboxed worker of
grader/isolation/runner.py, its outcome (MpiRun: complete or not, and why not, in words
for the feedback), and each case's per-rank arrays. grader/parts/mpi.py and
grader/parts/mpi_combined.py give the verdicts.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from grader import safe_io
from grader.checks.gemm import error_text
from grader.isolation.runner import copy_submission, run_worker
from grader.worker.jobs import MpiJob
from nnkit.collectives import MPICH_YIELD, mpiexec_command, rank_environment

RANK_BYTES = 16 << 20  # what one rank's result may hold (the largest case: some 1.2 MB)
RANK_ARRAYS = 32



@dataclass
class MpiRun:
    """How an MPI job ended, and where its ranks' files are."""

    outdir: Path  # the files the job wrote, collected
    returncode: int | None  # mpiexec's exit status (None: it never started)
    timed_out: bool
    output_tail: str  # the end of the job's output: MPI's and Hydra's messages
    seconds: float
    ranks: int  # of the job
    prefix: str = ""  # of one item's files in a job of kind "items" ("ring-")

    def item(self, kind: str) -> MpiRun:
        """One item's part of a job of kind "items": its files, its ranks' markers."""
        return replace(self, prefix=f"{kind}-")

    def file(self, name: str) -> Path:
        """A file the ranks wrote for this run's item."""
        return self.outdir / f"{self.prefix}{name}"

    def started(self, n: int) -> bool:
        return self.file(f"case-{n}.started").exists()

    def unfinished(self) -> list[int]:
        """Ranks that wrote no completion marker."""
        return [r for r in range(self.ranks) if not self.file(f"rank-{r}.done").exists()]

    def complete(self) -> bool:
        """Exited 0, in time, every rank's marker there: the only job whose results count."""
        return self.returncode == 0 and not self.timed_out and not self.unfinished()

    def _last_line(self) -> str:
        """The job's last words: MPI's own abort message, when it stopped the job inside a
        call; else Hydra's banner about a rank that died, when there is one ('BAD
        TERMINATION ...; RANK 1 PID 7 ...; KILLED BY SIGNAL: 9 (Killed)'); else the last
        line of output."""
        lines = [line.strip() for line in self.output_tail.strip().splitlines() if line.strip()]
        # MPICH's words ("Abort(...): Fatal error in internal_Scatterv: ...", "Assertion
        # failed in file ..."): they name the call, where Hydra's banner only says a rank died.
        # Not "application called MPI_Abort": the worker's own abort after a rank raised
        # (its error is in the rank's file), which says nothing of MPI's calls.
        aborted = [line for line in lines if (line.startswith(("Abort(", "Assertion failed"))
                                              or "Fatal error in" in line)
                   and "application called MPI_Abort" not in line]
        if aborted:
            return (f"{aborted[0][:300]} (MPI stopped the job inside one of its calls: check "
                    "that each buffer's dtype matches the MPI type given with it, and that "
                    "every rank makes every collective call, even with no rows)")
        noise = ("CLEANING UP", "IGNORE THE BELOW", "FAQ page")
        banner = [line.strip("= ").strip() for line in lines
                  if line.startswith("=") and line.strip("= ")
                  and not any(n in line for n in noise)]
        if banner:
            return "; ".join(banner[-3:])[:300]
        lines = [line for line in lines if "FAQ page" not in line]
        return lines[-1][:300] if lines else "no output"

    def missing(self, n: int, limit: float) -> str:
        """Why case n left no result, in words for the feedback."""
        later = self.started(n + 1)
        if self.timed_out and self.started(n) and not later:
            return (f"the job was stopped at the {limit:g} s time limit while running this "
                    "case: the ranks were still waiting, most likely a deadlock (a rank "
                    "waits for a message no rank sends, or every rank sends first with a "
                    "blocking Send, which MPI completes only while it can buffer the "
                    "message)")
        if self.timed_out:
            return f"not run: the job was stopped at the {limit:g} s time limit earlier"
        if self.returncode not in (0, None):
            return (f"no result: the MPI job ended with status {self.returncode} "
                    f"(a rank failed or exited): {self._last_line()}")
        if self.unfinished():
            return "no result: the job stopped early (the submission ended a process)"
        return "no result written"

    def incomplete(self, limit: float) -> str:
        """Why the job's results are not trusted, in words ('' for a complete job)."""
        if self.complete():
            return ""
        if self.timed_out:
            return f"the job was stopped at the {limit:g} s time limit"
        said = []
        for r in range(self.ranks):
            err = self.outdir / f"rank-{r}.err"  # (the job's, not an item's)
            if err.exists():
                said.append(f"rank {r}: {safe_io.read_text(err, 600)}")
        if said:
            return "; ".join(said)
        if self.returncode != 0:
            return (f"the MPI job ended with status {self.returncode} (a rank failed, "
                    f"exited or was killed): {self._last_line()}")
        ranks = ", ".join(map(str, self.unfinished()))
        return (f"rank(s) {ranks} never finished (a process of the job exited early or "
                "was ended)")


def mpi_env() -> dict[str, str]:
    """What the ranks get on top of the sandbox's clean environment: one BLAS thread per
    rank, and waiting ranks that yield their core (4 ranks share the grading machine's
    cores with other jobs)."""
    env = rank_environment(polite=True)
    keys = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", *MPICH_YIELD)
    return {k: env[k] for k in keys}


def run_mpi_job(kind: str, cases: list[dict], submission: Path, workdir: Path, ranks: int,
                timeout: float, inputs: list[dict[str, np.ndarray]],
                mpiexec: str | None = None, on_gpu: bool = False,
                items: list[dict] | None = None) -> MpiRun:
    """Run grader.worker.mpi on `cases` with `ranks` processes, as a sandboxed worker
    (grader/isolation/runner.py): mpiexec goes before the interpreter, so that mpiexec, Hydra's
    proxy and every rank are confined, limited and killed as one job (Hydra puts each
    rank in a session of its own: a process group alone would not reach them).

    workdir/rank-R/ holds what rank R alone is given: a copy of the submission, a scratch
    folder and `inputs.npz` (inputs[R]), which the rank removes once read. on_gpu: the
    ranks may use the GPU this thread holds (the combined item's network); the other
    items' ranks run on CPUs. items (kind "items"): several items' {"kind", "cases"}, run
    one after the other, each rank's inputs under "<kind>/"."""
    workdir = Path(workdir)
    if workdir.exists():
        shutil.rmtree(workdir)
    for r in range(ranks):
        home = workdir / f"rank-{r}"
        copy_submission(submission, home / "submission")  # links copied as links
        (home / "tmp").mkdir()
        np.savez(home / "inputs.npz", **(inputs[r] if r < len(inputs) else {}))
    job = MpiJob(kind=kind, cases=cases, items=items or [], ranks_dir=str(workdir.resolve()),
                 submission=str((workdir / "rank-0" / "submission").resolve()))
    run = run_worker(job, workdir, timeout, on_gpu=on_gpu,
                     launcher=mpiexec_command(ranks, mpiexec), module="grader.worker.mpi",
                     extra_env=mpi_env())
    return MpiRun(run.outdir, run.returncode, run.timed_out, run.output_tail, run.seconds,
                  ranks)


def rank_results(run: MpiRun, n: int, ranks: int,
                  limit: float) -> tuple[list[dict[str, np.ndarray]] | None, str | None]:
    """Every rank's arrays for case n, or None and why not."""
    for r in range(ranks):
        err = run.file(f"case-{n}-rank-{r}.err")
        if os.path.lexists(err):
            return None, f"rank {r} raised {error_text(err)}"
    results = []
    for r in range(ranks):
        path = run.file(f"case-{n}-rank-{r}.npz")
        if not os.path.lexists(path):
            return None, f"rank {r}: {run.missing(n, limit)}"
        try:
            results.append(safe_io.load_npz(path, max_bytes=RANK_BYTES,
                                            max_members=RANK_ARRAYS))
        except (OSError, ValueError) as err:
            return None, f"rank {r}: unreadable result ({safe_io.clean_text(err, 300)})"
    return results, None
