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
from grader.checks.gemm import error_text
from grader.isolation.runner import copy_submission, run_worker
from grader.parts.net import AGREEMENT_TOL, relative_norms
from grader.results import FAIL, NOT_GRADED, PASS, ItemResult
from grader.safe_io import collapse_repeats
from grader.scoring import Config
from grader.worker import guard
from nnkit import network
from nnkit.collectives import (
    MPICH_YIELD,
    POINT_TO_POINT_CALLS,
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
        """The job's last words: Hydra's banner about a rank that died, when there is one
        ('BAD TERMINATION ...; RANK 1 PID 7 ...; KILLED BY SIGNAL: 9 (Killed)'), else the
        last line of output."""
        lines = [line.strip() for line in self.output_tail.strip().splitlines() if line.strip()]
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
                mpiexec: str | None = None) -> MpiRun:
    """Run grader.worker.mpi on `cases` with `ranks` processes, as a sandboxed worker
    (grader/isolation/runner.py): mpiexec goes before the interpreter, so that mpiexec, Hydra's
    proxy and every rank are confined, limited and killed as one job (Hydra puts each
    rank in a session of its own: a process group alone would not reach them).

    workdir/rank-R/ holds what rank R alone is given: a copy of the submission, a scratch
    folder and `inputs.npz` (inputs[R]), which the rank removes once read."""
    workdir = Path(workdir)
    if workdir.exists():
        shutil.rmtree(workdir)
    for r in range(ranks):
        home = workdir / f"rank-{r}"
        copy_submission(submission, home / "submission")  # links copied as links
        (home / "tmp").mkdir()
        np.savez(home / "inputs.npz", **(inputs[r] if r < len(inputs) else {}))
    job = {"kind": kind, "cases": cases, "ranks_dir": str(workdir.resolve()),
           "submission": str((workdir / "rank-0" / "submission").resolve())}
    run = run_worker(job, workdir, timeout, on_gpu=False,
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


def check_scatter(case: dict, got: list[dict[str, np.ndarray]],
                  batch: tuple[np.ndarray, np.ndarray]) -> tuple[bool, str]:
    X, labels = batch
    counts = split_counts(case["rows"], case["ranks"])
    for r, (count, start) in enumerate(zip(counts, offsets(counts), strict=True)):
        rows = f"rows {start}..{start + count - 1}" if count else "no rows"
        want_X, want_y = X[start:start + count], labels[start:start + count]
        X_r, y_r = got[r].get("X"), got[r].get("labels")
        if X_r is None or y_r is None:
            return False, f"rank {r} wrote no images or labels"
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


def check_allreduce(case: dict, got: list[dict[str, np.ndarray]],
                    inputs: list[list[np.ndarray]]) -> tuple[bool, str]:
    """inputs[r]: rank r's gradients (mpi_cases.gradient_inputs)."""
    p, shares = case["ranks"], case["n_local"]
    total = sum(shares)
    worst = 0.0
    for i in range(len(case["shapes"])):
        terms = [shares[r] / total * inputs[r][i].astype(np.float64) for r in range(p)]
        exact = np.sum(terms, axis=0)
        bound = gamma(p + 2) * np.sum(np.abs(terms), axis=0) + p * FLT_MIN
        for r in range(p):
            if f"g{i}" not in got[r]:
                return False, f"rank {r} wrote no gradient {i}"
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


def ring_bytes_needed(length: int, ranks: int, itemsize: int = 4) -> int:
    """The fewest bytes every rank of an all-reduce of `length` values must send to the
    other ranks, and receive from them: the bytes of the whole buffer (p > 1).

    Any all-reduce: each of a rank's `length` values enters every other rank's result, so
    each must leave the rank in some message (a value per element at least); and each of
    its `length` results depends on values only the others hold, so it must receive a
    value per element at least. This is more than the (p - 1) / p of the buffer that the
    all-gather half alone moves, and no correct algorithm moves less.

    The ring meets it with chunks of any sizes c_0 ... c_(p-1) (sum n, uneven when p does
    not divide n, empty when n < p): in the reduce-scatter rank r sends every chunk but
    c_(r+1), in the all-gather every chunk but c_(r+2), so it sends 2n - c_(r+1) - c_(r+2)
    elements and receives what rank r - 1 sends, 2n - c_r - c_(r+1). Two distinct chunks
    hold at most n elements (p = 2: exactly n), so both are at least n: one element each
    way for p = 2 and n = 1, 2n - 2 ceil(n / p) for n >= p > 2."""
    return length * itemsize if ranks > 1 else 0


def _bytes_moved(got: list[dict[str, np.ndarray]], p: int) -> tuple[np.ndarray | None, str]:
    """The p x p matrix of bytes each rank handed MPI for each other rank, from the ranks'
    tallies (diagonal: to itself, not counted as moved)."""
    rows = []
    for r in range(p):
        sent = got[r].get("sent_to")
        if sent is None or sent.shape != (p,) or not np.issubdtype(sent.dtype, np.integer):
            return None, f"rank {r}'s count of bytes is missing"
        rows.append(sent.astype(np.int64))
    matrix = np.array(rows)
    np.fill_diagonal(matrix, 0)
    return matrix, ""


def check_ring(case: dict, got: list[dict[str, np.ndarray]],
               inputs: list[np.ndarray]) -> tuple[bool, str]:
    """inputs[r]: rank r's buffer (mpi_cases.ring_input)."""
    p, length = case["ranks"], case["length"]
    wide = [x.astype(np.float64) for x in inputs]
    exact = np.sum(wide, axis=0)
    bound = gamma(p - 1) * np.sum(np.abs(wide), axis=0) + (p - 1) * FLT_MIN
    worst, gap = 0.0, 0.0
    for r in range(p):
        used = sorted(set(got[r]["calls"].tolist()) - POINT_TO_POINT_CALLS)
        if used:
            return False, (f"rank {r} called comm.{used[0]}: the ring must use "
                           "point-to-point messages only")
        ok, message, ratio = _within(got[r]["got"], exact, bound, f"rank {r}'s buffer")
        if not ok:
            if p > 1 and np.array_equal(got[r]["got"], inputs[r]):
                message += " (the buffer is unchanged: sum in place, into `buffer`)"
            return False, message
        worst = max(worst, ratio)
        library = got[r]["mpi"].astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            gaps = np.abs(got[r]["got"] - library) / np.where(bound > 0, bound, 1.0)
        gap = max(gap, float(gaps.max()) if gaps.size else 0.0)
    matrix, problem = _bytes_moved(got, p)
    if matrix is None:
        return False, problem
    need, notes = ring_bytes_needed(length, p), []
    for r in range(p):
        sent, received = int(matrix[r].sum()), int(matrix[:, r].sum())
        unknown = int(got[r].get("unknown", 0))
        if sent >= need and received >= need:
            continue
        if unknown or any(int(got[q].get("unknown", 0)) for q in range(p)):
            # The kit could not read the size of some message: its own failure, not the
            # submission's. The bytes are not checked rather than held against it.
            said = "; ".join(got[r].get("problems", np.array([], str)).tolist()) or "?"
            notes.append(f"bytes of rank {r} not checked: the grader could not count "
                         f"{unknown} of its messages (the grader's failure: {said})")
            continue
        return False, (f"rank {r} sent {sent} bytes to the other ranks and received "
                       f"{received} through the communicator it was given; an all-reduce "
                       f"of {length} float32 values on {p} ranks must move at least {need} "
                       "bytes each way on every rank (each of its values must reach the "
                       "others, and each sum needs values only the others hold): the ring "
                       "must move the data with point-to-point messages of `comm`")
    sent = [int(matrix[r].sum()) for r in range(p)]
    note = f"; {'; '.join(notes)}" if notes else ""
    return True, (f"every rank within the bound (largest error / bound {worst:.2f}; "
                  f"|ring - Allreduce| / bound at most {gap:.2f}; bytes sent by rank "
                  f"{'/'.join(map(str, sent))}){note}")


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
    if kind == "train":
        return check_params(got, [ref.train] * case["ranks"])
    return check_params(got, ref.averaging[n])


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
    run = run_mpi_job(kind, cases, submission, workroot / f"mpi_{kind}", mpi_cases.RANKS,
                      limit, inputs, mpiexec)
    outcomes = []
    for n, case in enumerate(cases):
        name = mpi_cases.label(kind, case)
        got, problem = _rank_results(run, n, case["ranks"], limit)
        if problem:
            outcomes.append(Outcome(name, False, problem))
            continue
        try:
            passed, message = _verdict(kind, n, case, got, inputs, ref)
        except (KeyError, ValueError, TypeError, IndexError) as err:
            passed, message = False, f"malformed result ({type(err).__name__}: {err})"
        outcomes.append(Outcome(name, passed, message))
    collapse_repeats(outcomes)  # an error text once per item, not once per case
    failures = [o for o in outcomes if not o.passed]
    stopped, incomplete = guard.stop_message(run.outdir), run.incomplete(limit)
    ok = not failures and not stopped and not incomplete
    if stopped:
        message = stopped
    elif failures:
        message = (f"{len(failures)} of {len(outcomes)} cases fail; first: "
                   f"{failures[0].label}: {failures[0].message}")
    elif incomplete:
        message = (f"the MPI job did not complete, so its results are not trusted: "
                   f"{incomplete}")
    else:
        message = f"all {len(outcomes)} cases pass"
    return [ItemResult(item_id, title, points, points if ok else 0.0, PASS if ok else FAIL,
                       message,
                       checks=[{"case": o.label, "passed": o.passed, "message": o.message}
                               for o in outcomes],
                       figures={"job_seconds": round(run.seconds, 2),
                                "timed_out": run.timed_out, "exit_status": run.returncode,
                                "complete": run.complete()})]
