"""Part 3: grading the MPI functions, from what the ranks of an MPI job wrote.

Each item runs as one MPI job (`mpiexec -n 4 python -m grader.worker_mpi`) from a private
copy of the submission, as a sandboxed worker of grader/runner.py under a wall-clock
limit. A job that outlives it (typically a deadlock: every rank waiting for a message no
rank sends) is killed with all its processes; the item fails with the case it was stuck
in, and the other items and submissions are graded as usual.

Part 3 runs on CPU ranks everywhere, with the CPU reference network computing each rank's
gradients: only the submission's MPI functions are graded here, so a Part 2 bug costs
Part 2's points only (and a GPU is not needed).

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
  units of 2^-23 per step: measured about 1e-7 after the 10 steps graded.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from grader import mpi_cases, safe_io
from grader.gemm_checks import error_text
from grader.part2 import AGREEMENT_TOL, relative_norms
from grader.results import FAIL, NOT_GRADED, PASS, ItemResult
from grader.runner import copy_submission, run_worker
from grader.safe_io import collapse_repeats
from grader.scoring import Config
from nnkit import dataset, network
from nnkit.collectives import (
    MPICH_YIELD,
    REDUCING_COLLECTIVES,
    find_mpiexec,
    mpiexec_command,
    offsets,
    rank_environment,
    split_counts,
)
from nnkit.gemm_reference import FLT_MIN, gamma

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

    def started(self, n: int) -> bool:
        return (self.outdir / f"case-{n}.started").exists()

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
            lines = [line for line in self.output_tail.strip().splitlines() if line.strip()]
            last = lines[-1][:300] if lines else "no output"
            return (f"no result: the MPI job ended with status {self.returncode} "
                    f"(a rank failed or exited): {last}")
        if not (self.outdir / "done").exists():
            return "no result: the job stopped early (the submission ended a process)"
        return "no result written"


def mpi_env() -> dict[str, str]:
    """What the ranks get on top of the sandbox's clean environment: one BLAS thread per
    rank, and waiting ranks that yield their core (4 ranks share the grading machine's
    cores with other jobs)."""
    env = rank_environment(polite=True)
    keys = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", *MPICH_YIELD)
    return {k: env[k] for k in keys}


def run_mpi_job(job: dict, workdir: Path, ranks: int, timeout: float,
                mpiexec: str | None = None) -> MpiRun:
    """Run grader.worker_mpi on `job` with `ranks` processes, from job['submission'], as a
    sandboxed worker (grader/runner.py): mpiexec goes before the interpreter, so that
    mpiexec, Hydra's proxy and every rank are confined, limited and killed as one job
    (Hydra puts each rank in a session of its own: a process group alone would not
    reach them)."""
    run = run_worker(job, workdir, timeout, on_gpu=False,
                     launcher=mpiexec_command(ranks, mpiexec), module="grader.worker_mpi",
                     extra_env=mpi_env())
    return MpiRun(run.outdir, run.returncode, run.timed_out, run.output_tail, run.seconds)


# --------------------------------------------------------------------------------------
# The oracle, computed once per grading run


@dataclass
class Reference:
    train: network.Params  # one process training on the same batches
    averaging: list[list[network.Params]]  # per averaging case, every rank's model


def reference() -> Reference:
    from nnkit.mpi_train import simulate_model_averaging
    from nnkit.training import ReferenceRunner, TrainConfig, train

    data = dataset.load(**mpi_cases.TRAIN_DATA)
    mode = mpi_cases.TRAIN_MODE
    config = TrainConfig(**{**mode, "hidden": tuple(mode["hidden"])})
    params = network.glorot_uniform(config.sizes(data.features), config.seed)
    runner = ReferenceRunner(params.copy(), config)
    train(runner, data, config, evaluate=False)
    every_rank = [simulate_model_averaging(params, data.train, config, case["ranks"],
                                           case["every"])
                  for case in mpi_cases.cases("average")]
    return Reference(runner.params(), every_rank)


# --------------------------------------------------------------------------------------
# Verdicts


@dataclass
class Outcome:
    label: str
    passed: bool
    message: str


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


def check_scatter(case: dict, got: list[dict[str, np.ndarray]]) -> tuple[bool, str]:
    X, labels = mpi_cases.scatter_inputs(case)
    counts = split_counts(case["rows"], case["ranks"])
    for r, (count, start) in enumerate(zip(counts, offsets(counts), strict=True)):
        rows = f"rows {start}..{start + count - 1}" if count else "no rows"
        want_X, want_y = X[start:start + count], labels[start:start + count]
        X_r, y_r = got[r]["X"], got[r]["labels"]
        if X_r.dtype != np.float32 or y_r.dtype != np.int64:
            return False, f"rank {r} got {X_r.dtype} images and {y_r.dtype} labels, " \
                          "expected float32 and int64"
        if X_r.shape != want_X.shape or y_r.shape != want_y.shape:
            return False, (f"rank {r} got images {X_r.shape} and labels {y_r.shape}, "
                           f"expected {want_X.shape} and {want_y.shape} ({rows})")
        if X_r.tobytes() != want_X.tobytes() or y_r.tobytes() != want_y.tobytes():
            return False, f"rank {r} got the right shapes but not {rows} of the batch"
    return True, f"every rank got its rows ({'/'.join(map(str, counts))})"


def _within(got: np.ndarray, exact: np.ndarray, bound: np.ndarray,
            what: str) -> tuple[bool, str, float]:
    if got.dtype != np.float32 or got.shape != exact.shape:
        return False, f"{what} came back as {got.dtype}{got.shape}, expected " \
                      f"float32{exact.shape}", np.inf
    if not np.isfinite(got).all():
        return False, f"{what} holds NaN or infinity", np.inf
    error = np.abs(got.astype(np.float64) - exact)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = np.where(error == 0, 0.0, error / bound)  # a zero bound allows no error
    ratio = float(ratios.max()) if ratios.size else 0.0
    bad = int((error > bound).sum())
    if bad:
        worst = int(np.argmax(error - bound))
        return False, (f"{what}: {bad} of {got.size} elements outside the float32 bound "
                       f"(element {worst}: got {got.flat[worst]:.9g}, expected "
                       f"{exact.flat[worst]:.9g})"), ratio
    return True, "", ratio


def check_allreduce(case: dict, got: list[dict[str, np.ndarray]]) -> tuple[bool, str]:
    p, shares = case["ranks"], case["n_local"]
    total = sum(shares)
    inputs = [mpi_cases.gradient_inputs(case, r) for r in range(p)]
    worst = 0.0
    for i in range(len(case["shapes"])):
        terms = [shares[r] / total * inputs[r][i].astype(np.float64) for r in range(p)]
        exact = np.sum(terms, axis=0)
        bound = gamma(p + 2) * np.sum(np.abs(terms), axis=0) + p * FLT_MIN
        for r in range(p):
            ok, message, ratio = _within(got[r][f"g{i}"], exact, bound,
                                         f"rank {r}, gradient {i}")
            if not ok:
                plain = np.mean([x[i].astype(np.float64) for x in inputs], axis=0)
                if np.allclose(got[r][f"g{i}"], plain, rtol=1e-5, atol=0) and \
                        not np.allclose(plain, exact, rtol=1e-5, atol=0):
                    message += ": that is the plain average, without the n_local / n_total " \
                               "weights"
                return False, message
            worst = max(worst, ratio)
    return True, f"every rank within the bound (largest error / bound {worst:.2f})"


def check_ring(case: dict, got: list[dict[str, np.ndarray]]) -> tuple[bool, str]:
    p = case["ranks"]
    inputs = [mpi_cases.ring_input(case, r).astype(np.float64) for r in range(p)]
    exact = np.sum(inputs, axis=0)
    bound = gamma(p - 1) * np.sum(np.abs(inputs), axis=0) + (p - 1) * FLT_MIN
    worst, gap = 0.0, 0.0
    for r in range(p):
        used = sorted(set(got[r]["calls"].tolist()) & REDUCING_COLLECTIVES)
        if used:
            return False, (f"rank {r} called comm.{used[0]}: the ring must use "
                           "point-to-point messages only")
        ok, message, ratio = _within(got[r]["got"], exact, bound, f"rank {r}'s buffer")
        if not ok:
            if p > 1 and np.array_equal(got[r]["got"], inputs[r].astype(np.float32)):
                message += " (the buffer is unchanged: sum in place, into `buffer`)"
            return False, message
        worst = max(worst, ratio)
        library = got[r]["mpi"].astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            gaps = np.abs(got[r]["got"] - library) / np.where(bound > 0, bound, 1.0)
        gap = max(gap, float(gaps.max()) if gaps.size else 0.0)
    return True, (f"every rank within the bound (largest error / bound {worst:.2f}; "
                  f"|ring - Allreduce| / bound at most {gap:.2f})")


def check_params(got: list[dict[str, np.ndarray]],
                 expected: list[network.Params]) -> tuple[bool, str]:
    worst, where = 0.0, ""
    for r, (arrays, ref) in enumerate(zip(got, expected, strict=True)):
        for key, want in ref.named().items():
            have = arrays.get(key)
            if have is None or have.shape != want.shape or have.dtype != np.float32:
                return False, f"rank {r}: {key} missing or not float32{want.shape}"
            if not np.isfinite(have).all():
                return False, f"rank {r}: {key} holds NaN or infinity"
            rel = relative_norms(have, want)[0]
            if rel > worst:
                worst, where = rel, f"rank {r}'s {key}"
    if worst > AGREEMENT_TOL:
        return False, (f"{where} differs by {worst:.2e} (relative max-norm), over the "
                       f"{AGREEMENT_TOL:g} tolerance")
    return True, f"every rank's W and b within {worst:.1e} (relative max-norm)"


def _verdict(kind: str, n: int, case: dict, got: list[dict[str, np.ndarray]],
             ref: Reference) -> tuple[bool, str]:
    if kind == "scatter":
        return check_scatter(case, got)
    if kind == "allreduce":
        return check_allreduce(case, got)
    if kind == "ring":
        return check_ring(case, got)
    if kind == "train":
        return check_params(got, [ref.train] * case["ranks"])
    return check_params(got, ref.averaging[n])


def _copy(submission: Path, workdir: Path) -> Path:
    if workdir.exists():
        shutil.rmtree(workdir)
    return copy_submission(submission, workdir / "submission")


def grade_item(item_id: str, submission: Path, workroot: Path, config: Config,
               ref: Reference) -> list[ItemResult]:
    """One Part 3 item: its MPI job, then a verdict per case from the ranks' files."""
    title, points = config.title(item_id), config.points(item_id)
    kind = mpi_cases.ITEMS[item_id]
    mpiexec = config.mpiexec or find_mpiexec()
    if mpiexec is None:
        return [ItemResult(item_id, title, points, None, NOT_GRADED,
                           "not graded: no mpiexec on this machine (pip install mpich, or "
                           "load the site's MPI)")]
    cases = mpi_cases.cases(kind)
    copy = _copy(submission, workroot / f"mpi_{kind}")
    run = run_mpi_job({"kind": kind, "submission": str(copy), "cases": cases},
                      workroot / f"mpi_{kind}", mpi_cases.RANKS, config.seconds_mpi, mpiexec)
    outcomes = []
    for n, case in enumerate(cases):
        name = mpi_cases.label(kind, case)
        got, problem = _rank_results(run, n, case["ranks"], config.seconds_mpi)
        if problem:
            outcomes.append(Outcome(name, False, problem))
            continue
        passed, message = _verdict(kind, n, case, got, ref)
        outcomes.append(Outcome(name, passed, message))
    collapse_repeats(outcomes)  # an error text once per item, not once per case
    failures = [o for o in outcomes if not o.passed]
    ok = not failures
    message = (f"all {len(outcomes)} cases pass" if ok else
               f"{len(failures)} of {len(outcomes)} cases fail; first: {failures[0].label}: "
               f"{failures[0].message}")
    return [ItemResult(item_id, title, points, points if ok else 0.0, PASS if ok else FAIL,
                       message,
                       checks=[{"case": o.label, "passed": o.passed, "message": o.message}
                               for o in outcomes],
                       figures={"job_seconds": round(run.seconds, 2),
                                "timed_out": run.timed_out})]
