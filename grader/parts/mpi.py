"""Part 3: grading the MPI functions, from what the ranks of an MPI job wrote.

Each item runs as one MPI job (`mpiexec -n 4 python -P -m grader.worker.mpi`), as a
sandboxed worker of grader/isolation/runner.py under a wall-clock limit. Every rank gets a private
copy of the submission, a scratch folder and a file of inputs of its own
(grader/cases/mpi.py builds them from the run's secret); grader/worker/mpi.py says how a
rank is confined. A job that outlives its limit (typically a deadlock: every rank waiting
for a message no rank sends) is killed with all its processes; the item fails with the
case it was stuck in, and the other items and submissions are graded as usual.

Results count only from a complete job: exit status 0 and every rank's completion marker
(`rank-R.done`, written by the kit after the last case). A job the audit hook stopped, one
where a rank died, exited early or was killed, fails its item, whatever files it left.
The ring item also checks what moved: every rank must send, and receive, at least the
bytes of the buffer through the point-to-point communicator it was given (see
ring_bytes_needed).

Part 3 runs on CPU ranks everywhere, with the CPU reference network computing each rank's
gradients: only the submission's MPI functions are graded here, so a Part 2 bug costs
Part 2's points only (and a GPU is not needed). The one exception, mpi.combined, trains
the submission's own network under its MPI functions (grader/parts/mpi_combined.py, with
run_mpi_job's on_gpu): there a Part 2 bug costs that item too.

Bounds, all from float32 rounding (u = 2^-24, gamma(k) = k u / (1 - k u), FLT_MIN the
smallest normal float32 for results that underflow):

- scatter: rows are copied, not computed: every element must come back bit for bit;
- weighted all-reduce, p ranks with shares w_r = n_r / n: the share is rounded once, the
  product once, and p terms are summed in some order: |got - sum_r w_r g_r| <=
  gamma(p + 2) * sum_r w_r |g_r| + p FLT_MIN, elementwise;
- ring all-reduce: a sum of p float32 numbers in any order: |got - sum_r x_r| <=
  gamma(p - 1) * sum_r |x_r| + p FLT_MIN (p = 1: unchanged). MPI's Allreduce meets the same
  bound, so ring and Allreduce agree to within twice it;
- training: Part 2's criterion, relative max-norm of the difference <= 1e-4 for every W and
  b of every rank, against one process training on the same batches (model averaging:
  against a simulation of the same averaging in one process). The runs differ only in the
  order of float32 sums (each rank sums its rows, then the ranks' sums are combined), a few
  units of 2^-23 per step: measured about 1e-7 after the 10 steps graded. The training
  rows are the shipped sample reordered and perturbed by the run's secret
  (mpi_cases.training_data), in rank 0's file alone: the other ranks get theirs through
  the submission's scatter_batch or not at all.
"""

from __future__ import annotations

import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from grader import safe_io
from grader.cases import mpi as mpi_cases
from grader.checks import anticheat, refusals
from grader.checks.gemm import error_text
from grader.checks.mpi import (
    check_allreduce,
    check_params,
    check_ring,
    check_scatter,
    rows_shared,
    split_hint,
)
from grader.checks.policy.scope import unreached_lines
from grader.isolation.runner import copy_submission, run_worker
from grader.parts.common import check_rows, failure_message, fresh_copy, graded_item
from grader.results import NOT_GRADED, CaseOutcome, ItemResult
from grader.safe_io import collapse_repeats
from grader.scoring import Config
from grader.worker.jobs import MpiJob
from nnkit import network
from nnkit.collectives import (
    MPICH_YIELD,
    find_mpiexec,
    mpiexec_command,
    rank_environment,
)
from nnkit.mpi_checks import DATA_MODULE, RING_MODULE

# Rules that are notes, not failures, in the data-parallel module: its functions get the
# real communicator, uncounted, so another one (a default of MPI.COMM_WORLD, comm.Abort on
# an error) forges nothing; a collective outside `comm` deadlocks or fails the cases of
# fewer ranks. The exception is scatter_batch, which gets a counting communicator: in its
# reach (grader/checks/policy/scope.py) the rule fails the scatter item. The ring's
# communicator counts bytes: there the rule fails the item.
DATA_NOTES = frozenset({"mpi-comm"})
SCATTER_FUNCTION = "scatter_batch"
RANK_BYTES = 16 << 20  # what one rank's result may hold (the largest case: some 1.2 MB)
RANK_ARRAYS = 32

# --------------------------------------------------------------------------------------
# Running an MPI job


@dataclass
class MpiRun:
    outdir: Path
    returncode: int | None
    timed_out: bool
    output_tail: str
    seconds: float
    ranks: int

    def started(self, n: int) -> bool:
        return (self.outdir / f"case-{n}.started").exists()

    def unfinished(self) -> list[int]:
        """Ranks that wrote no completion marker."""
        return [r for r in range(self.ranks) if not (self.outdir / f"rank-{r}.done").exists()]

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
            err = self.outdir / f"rank-{r}.err"
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
                mpiexec: str | None = None, on_gpu: bool = False) -> MpiRun:
    """Run grader.worker.mpi on `cases` with `ranks` processes, as a sandboxed worker
    (grader/isolation/runner.py): mpiexec goes before the interpreter, so that mpiexec, Hydra's
    proxy and every rank are confined, limited and killed as one job (Hydra puts each
    rank in a session of its own: a process group alone would not reach them).

    workdir/rank-R/ holds what rank R alone is given: a copy of the submission, a scratch
    folder and `inputs.npz` (inputs[R]), which the rank removes once read. on_gpu: the
    ranks may use the GPU this thread holds (the combined item's network); the other
    items' ranks run on CPUs."""
    workdir = Path(workdir)
    if workdir.exists():
        shutil.rmtree(workdir)
    for r in range(ranks):
        home = workdir / f"rank-{r}"
        copy_submission(submission, home / "submission")  # links copied as links
        (home / "tmp").mkdir()
        np.savez(home / "inputs.npz", **(inputs[r] if r < len(inputs) else {}))
    job = MpiJob(kind=kind, cases=cases, ranks_dir=str(workdir.resolve()),
                 submission=str((workdir / "rank-0" / "submission").resolve()))
    run = run_worker(job, workdir, timeout, on_gpu=on_gpu,
                     launcher=mpiexec_command(ranks, mpiexec), module="grader.worker.mpi",
                     extra_env=mpi_env())
    return MpiRun(run.outdir, run.returncode, run.timed_out, run.output_tail, run.seconds,
                  ranks)


# --------------------------------------------------------------------------------------
# The oracle, computed once per grading run


@dataclass
class Reference:
    train: network.Params  # one process training on the same batches
    averaging: list[list[network.Params]]  # per averaging case, every rank's model
    secret: int = 0  # of the training data (mpi_cases.training_data)


def reference(secret: int = 0) -> Reference:
    """The training items' oracle, on the training data the run's secret draws."""
    from nnkit.dataset import Dataset
    from nnkit.mnist import Split
    from nnkit.mpi_train import simulate_model_averaging
    from nnkit.training import ReferenceRunner, TrainConfig, train

    split = mpi_cases.training_data(secret)
    empty = Split(split.images[:0], split.labels[:0])
    data = Dataset(split, empty, empty)
    mode = mpi_cases.TRAIN_MODE
    config = TrainConfig(**{**mode, "hidden": tuple(mode["hidden"])})
    params = network.glorot_uniform(config.sizes(data.features), config.seed)
    runner = ReferenceRunner(params.copy(), config)
    train(runner, data, config, evaluate=False)
    every_rank = [simulate_model_averaging(params, data.train, config, case["ranks"],
                                           case["every"])
                  for case in mpi_cases.cases("average")]
    return Reference(runner.params(), every_rank, secret)


_references: dict[int, Reference] = {}
_references_lock = threading.Lock()


def reference_for(secret: int, ref: Reference | None) -> Reference:
    """`ref` when it was computed for this secret, else one computed (once) for it."""
    if ref is not None and ref.secret == secret:
        return ref
    with _references_lock:
        if secret not in _references:
            _references[secret] = reference(secret)
        return _references[secret]


# --------------------------------------------------------------------------------------
# Verdicts


def _rank_results(run: MpiRun, n: int, ranks: int,
                  limit: float) -> tuple[list[dict[str, np.ndarray]] | None, str | None]:
    """Every rank's arrays for case n, or None and why not."""
    for r in range(ranks):
        err = run.outdir / f"case-{n}-rank-{r}.err"
        if os.path.lexists(err):
            return None, f"rank {r} raised {error_text(err)}"
    results = []
    for r in range(ranks):
        path = run.outdir / f"case-{n}-rank-{r}.npz"
        if not os.path.lexists(path):
            return None, f"rank {r}: {run.missing(n, limit)}"
        try:
            results.append(safe_io.load_npz(path, max_bytes=RANK_BYTES,
                                            max_members=RANK_ARRAYS))
        except (OSError, ValueError) as err:
            return None, f"rank {r}: unreadable result ({safe_io.clean_text(err, 300)})"
    return results, None


def _verdict(kind: str, n: int, case: dict, got: list[dict[str, np.ndarray]],
             inputs: list[dict[str, np.ndarray]], ref: Reference) -> tuple[bool, str]:
    if kind == "scatter":
        mine = inputs[case["root"]]
        return check_scatter(case, got, (mine[f"case-{n}/X"], mine[f"case-{n}/labels"]))
    if kind == "allreduce":
        return check_allreduce(case, got, [
            [inputs[r][f"case-{n}/g{i}"] for i in range(len(case["shapes"]))]
            for r in range(case["ranks"])])
    if kind == "ring":
        return check_ring(case, got, [inputs[r][f"case-{n}/buffer"]
                                      for r in range(case["ranks"])])
    counts = [r.get("rows") for r in got]
    batches = mpi_cases.minibatches(inputs[0]["train/labels"].shape[0], case["mode"])
    shared = rows_shared(counts, batches)
    if shared:
        return False, shared
    if kind == "train":
        return check_params(got, [ref.train] * case["ranks"])
    ok, message = check_params(got, ref.averaging[n])
    return ok, message if ok else message + split_hint(counts, batches)


def grade_item(item_id: str, submission: Path, workroot: Path, config: Config,
               ref: Reference | None) -> list[ItemResult]:
    """One Part 3 item: its MPI job, then a verdict per case from the ranks' files."""
    title, points = config.title(item_id), config.points(item_id)
    kind = mpi_cases.ITEMS[item_id]
    mpiexec = config.mpiexec or find_mpiexec()
    if mpiexec is None:
        return [ItemResult(item_id, title, points, None, NOT_GRADED,
                           "not graded: no mpiexec on this machine (pip install mpich, or "
                           "load the site's MPI)")]
    if kind in ("train", "average"):
        ref = reference_for(config.secret, ref)
    cases = mpi_cases.cases(kind)
    inputs = mpi_cases.rank_inputs(kind, cases, config.secret)
    limit = config.seconds_mpi
    # The source policy (Part 3's rules: the communicator as given, a point-to-point ring,
    # only the allowed imports), read from a copy made before the job runs.
    copy = fresh_copy(workroot / f"mpi_{kind}_policy", submission)
    # scatter_batch gets a counting communicator, not the real one: another communicator
    # within its reach fails the scatter item (it would hand out rows uncounted).
    note_lines = unreached_lines(copy, DATA_MODULE, SCATTER_FUNCTION) if kind == "scatter" \
        else None
    rules = anticheat.policy_verdict(copy, RING_MODULE if kind == "ring" else DATA_MODULE,
                                     "mpi", config.policy,
                                     DATA_NOTES if kind != "ring" else frozenset(), note_lines)
    run = run_mpi_job(kind, cases, submission, workroot / f"mpi_{kind}", mpi_cases.RANKS,
                      limit, inputs, mpiexec)
    outcomes = []
    for n, case in enumerate(cases):
        name = mpi_cases.label(kind, case)
        got, problem = _rank_results(run, n, case["ranks"], limit)
        if problem:
            outcomes.append(CaseOutcome(name, False, problem))
            continue
        try:
            passed, message = _verdict(kind, n, case, got, inputs, ref)
        except (KeyError, ValueError, TypeError, IndexError) as err:
            passed, message = False, f"malformed result ({type(err).__name__}: {err})"
        outcomes.append(CaseOutcome(name, passed, message))
    collapse_repeats(outcomes)  # an error text once per item, not once per case
    failures = [o for o in outcomes if not o.passed]
    stopped, incomplete = refusals.stop_message(run.outdir), run.incomplete(limit)
    if stopped:
        message = stopped
    elif failures:
        message = failure_message(failures, len(outcomes))
    elif incomplete:
        message = (f"the MPI job did not complete, so its results are not trusted: "
                   f"{incomplete}")
    else:
        message = f"all {len(outcomes)} cases pass"
    # A guard's stop, a job that did not complete or a rule broken: no case is trusted.
    problem = stopped or incomplete or None
    figures = {"job_seconds": round(run.seconds, 2), "timed_out": run.timed_out,
               "exit_status": run.returncode, "complete": run.complete()}
    if rules.found:
        figures["policy"] = rules.found
    if rules.failure:
        message = problem = rules.failure + (f"; {message}" if failures or stopped else "")
    elif rules.note:
        message += "; " + rules.note
    return [graded_item(item_id, config, outcomes, message, problem,
                        checks=check_rows(outcomes), figures=figures)]
