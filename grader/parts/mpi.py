"""Part 3: grading the MPI functions, from what the ranks of an MPI job wrote.

The items but the ring run in one MPI job (`mpiexec -n 4 python -P -m grader.worker.mpi`,
grade_items; grader/parts/mpi_job.py runs it), as a sandboxed worker of
grader/isolation/runner.py under a wall-clock limit, one item after the other, and the
ring in one of its own (TOGETHER says why). A job that does not complete has
every item graded again in a job of its own (grade_item, also what a run of one item
uses), so that a deadlock, an error or a refused call costs its own item only. Every rank
gets a private copy of the submission, a scratch folder and a file of inputs of its own
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

import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from grader.cases import mpi as mpi_cases
from grader.checks import anticheat, refusals
from grader.checks.mpi import (
    check_allreduce,
    check_params,
    check_ring,
    check_scatter,
    rows_shared,
    split_hint,
)
from grader.checks.policy.scope import unreached_lines
from grader.parts.common import check_rows, failure_message, fresh_copy, graded_item
from grader.parts.mpi_job import MpiRun, rank_results, run_mpi_job
from grader.results import NOT_GRADED, CaseOutcome, ItemResult
from grader.safe_io import collapse_repeats
from grader.scoring import Config
from nnkit import network
from nnkit.collectives import find_mpiexec
from nnkit.mpi_checks import DATA_MODULE, RING_MODULE

# Rules that are notes, not failures, in the data-parallel module: its functions get the
# real communicator, uncounted, so another one (a default of MPI.COMM_WORLD, comm.Abort on
# an error) forges nothing; a collective outside `comm` deadlocks or fails the cases of
# fewer ranks. The exception is scatter_batch, which gets a counting communicator: in its
# reach (grader/checks/policy/scope.py) the rule fails the scatter item. The ring's
# communicator counts bytes: there another communicator or a collective fails the item,
# within ring_allreduce's reach; elsewhere in the ring's module (a demo main() that only
# the unchecked `if __name__ == "__main__":` block calls) they are notes.
DATA_NOTES = frozenset({"mpi-comm"})
RING_NOTES = frozenset({"mpi-comm", "mpi-collective", "mpi-request"})
SCATTER_FUNCTION, RING_FUNCTION = "scatter_batch", "ring_allreduce"
# The items graded in one job (grade_items), in this order: the scatter first, since its
# counting communicator must meet no communicator an earlier item could leave behind (a
# Dup kept in a module or a library's attribute); the others get the real one. The ring,
# whose communicator allows point-to-point calls only, runs in a job of its own, where no
# earlier item can hand it a communicator that allows more (red team, round six).
TOGETHER = ["mpi.scatter", "mpi.allreduce", "mpi.data_parallel", "mpi.averaging"]
SCATTER_ITEM = TOGETHER[0]
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


@dataclass
class Prepared:
    """One item ready to run: what its job is given, and the source policy's verdict."""

    item_id: str
    kind: str  # grader/cases/mpi.py's ITEMS: the worker's run function
    cases: list[dict]
    inputs: list[dict[str, np.ndarray]]  # per rank
    rules: anticheat.PolicyVerdict


def _prepare(item_id: str, submission: Path, workroot: Path, config: Config) -> Prepared:
    kind = mpi_cases.ITEMS[item_id]
    cases = mpi_cases.cases(kind)
    inputs = mpi_cases.rank_inputs(kind, cases, config.secret)
    # The source policy (Part 3's rules: the communicator as given, a point-to-point ring,
    # only the allowed imports), read from a copy made before the job runs.
    copy = fresh_copy(workroot / f"mpi_{kind}_policy", submission)
    # The counting communicators: another communicator (or in the ring, a collective)
    # within the graded function's reach fails its item; elsewhere it is a note.
    module, notes, note_lines = DATA_MODULE, DATA_NOTES, None
    if kind == "scatter":
        note_lines = unreached_lines(copy, DATA_MODULE, SCATTER_FUNCTION)
    elif kind == "ring":
        module, notes = RING_MODULE, RING_NOTES
        note_lines = unreached_lines(copy, RING_MODULE, RING_FUNCTION)
    rules = anticheat.policy_verdict(copy, module, "mpi", config.policy, notes, note_lines)
    return Prepared(item_id, kind, cases, inputs, rules)


def _not_graded(item_id: str, config: Config) -> list[ItemResult]:
    return [ItemResult(item_id, config.title(item_id), config.points(item_id), None,
                       NOT_GRADED, "not graded: no mpiexec on this machine (pip install "
                       "mpich, or load the site's MPI)")]


def grade_item(item_id: str, submission: Path, workroot: Path, config: Config,
               ref: Reference | None) -> list[ItemResult]:
    """One Part 3 item: its MPI job, then a verdict per case from the ranks' files."""
    mpiexec = config.mpiexec or find_mpiexec()
    if mpiexec is None:
        return _not_graded(item_id, config)
    item = _prepare(item_id, submission, workroot, config)
    if item.kind in ("train", "average"):
        ref = reference_for(config.secret, ref)
    run = run_mpi_job(item.kind, item.cases, submission, workroot / f"mpi_{item.kind}",
                      mpi_cases.RANKS, config.seconds_mpi, item.inputs, mpiexec)
    return _judge(item, run, config, ref)


def grade_items(item_ids: list[str], submission: Path, workroot: Path, config: Config,
                ref: Reference | None) -> list[ItemResult]:
    """Several Part 3 items in one MPI job (one start of MPI and of four interpreters
    instead of one per item), each judged from its own folder as grade_item judges it.
    Only a job that completed counts: exit status 0, every rank's markers, no stop by the
    audit hook. Otherwise every item is graded again in a job of its own, so that what one
    item did (a deadlock, an error, a refused call) is told and costs that item alone."""
    mpiexec = config.mpiexec or find_mpiexec()
    if mpiexec is None:
        return [r for i in item_ids for r in _not_graded(i, config)]
    if not set(item_ids) <= set(TOGETHER) or (SCATTER_ITEM in item_ids
                                              and item_ids[0] != SCATTER_ITEM):
        raise ValueError(f"only {', '.join(TOGETHER)} run together, the scatter first")
    items = [_prepare(i, submission, workroot, config) for i in item_ids]
    if any(item.kind in ("train", "average") for item in items):
        ref = reference_for(config.secret, ref)
    inputs = [{f"{item.kind}/{key}": value for item in items
               for key, value in item.inputs[r].items()} for r in range(mpi_cases.RANKS)]
    # A third of one item's limit: a job that runs over it only costs the time, as every
    # item is then graded again under its own limit (the solution's five take 1-3 s).
    run = run_mpi_job("items", [], submission, workroot / "mpi_items", mpi_cases.RANKS,
                      config.seconds_mpi / 3, inputs, mpiexec,
                      items=[{"kind": item.kind, "cases": item.cases} for item in items])
    if not run.complete() or refusals.stop_message(run.outdir) or any(
            not run.item(item.kind).complete() for item in items):
        return [r for i in item_ids for r in grade_item(i, submission, workroot, config, ref)]
    return [r for item in items for r in _judge(item, run.item(item.kind), config, ref)]


def _judge(item: Prepared, run: MpiRun, config: Config,
           ref: Reference | None) -> list[ItemResult]:
    """The item's verdict from what its job's ranks wrote."""
    kind, cases, inputs, rules = item.kind, item.cases, item.inputs, item.rules
    limit = config.seconds_mpi
    outcomes = []
    for n, case in enumerate(cases):
        name = mpi_cases.label(kind, case)
        got, problem = rank_results(run, n, case["ranks"], limit)
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
    return [graded_item(item.item_id, config, outcomes, message, problem,
                        checks=check_rows(outcomes), figures=figures)]
