"""The combined item (mpi.combined): the submission's Part 2 network trained under its
Part 3 functions on two ranks, as the assignment's program runs.

One MPI job of two ranks (grader/parts/mpi_job.py's run_mpi_job: the same sandbox, per-rank
inputs, counting communicator, audit hook and completion markers as Part 3's other items),
on the GPU this grading thread holds, or in the simulator in a reduced configuration
(grader/cases/mpi_combined.py). Its two cases train the submission's network alone and on
two ranks; grader/checks/mpi_combined.py compares both ranks with the one-process run and
with the CPU reference the grader trains here, and says which part is at fault.

The item applies Part 2's defences to the network, as Part 2's training item does: every
call of forward, backward and sgd_step on every rank must launch the submission's kernels,
the calls the case names (the first, the last and one drawn from the secret) are recorded
in full and replayed (grader/worker/net.py's Audited), and the network modules must pass
Part 2's source policy, read from a copy made before the job runs. Training data that
cannot be read leaves the item not graded, with the reason.
"""

from __future__ import annotations

import threading
from pathlib import Path

from grader import safe_io
from grader.cases import mpi_combined as cases
from grader.cases.net import BACKPROP_MODULE, KERNELS_MODULE
from grader.checks import anticheat, refusals
from grader.checks.mpi_combined import (
    check_combined,
    shared_rows,
    silent_calls,
    split_tolerance,
    unreplayed_calls,
)
from grader.parts.common import all_or_nothing, fresh_copy
from grader.parts.mpi import DATA_NOTES
from grader.parts.mpi_job import rank_results, run_mpi_job
from grader.results import NOT_GRADED, ItemResult
from grader.scoring import Config
from nnkit import network
from nnkit.collectives import find_mpiexec
from nnkit.mnist import MnistFormatError, Split
from nnkit.mpi_checks import DATA_MODULE

# The job trains a network twice (in the simulator, every kernel on the CPU: 4-9 s for
# the solution on 2 cores, against 1-3 s for Part 3's other jobs): twice their limit.
LIMIT_FACTOR = 2

_references: dict[tuple[int, str], tuple[Split, network.Params]] = {}
_lock = threading.Lock()


def mnist_folder() -> str | None:
    """MNIST's folder, absolute (the ranks run from their copies), or None if missing."""
    from nnkit.mnist import FILES, default_dir

    folder = default_dir()
    return str(folder.resolve()) if all((folder / f).is_file() for f in FILES.values()) else None


def reference(job_plan: dict, secret: int) -> tuple[Split, network.Params]:
    """The job's training rows, and the CPU reference trained on them in one process
    (float32, as Part 2's), computed once per grading run and configuration."""
    key = (secret, job_plan["description"])
    with _lock:
        if key not in _references:
            from nnkit.dataset import Dataset
            from nnkit.training import ReferenceRunner, TrainConfig, train

            split = cases.training_data(job_plan, secret)
            empty = Split(split.images[:0], split.labels[:0])
            mode = job_plan["mode"]
            config = TrainConfig(**{**mode, "hidden": tuple(mode["hidden"])})
            runner = ReferenceRunner(network.glorot_uniform(
                config.sizes(split.images.shape[1]), config.seed), config)
            train(runner, Dataset(split, empty, empty), config, evaluate=False)
            _references[key] = (split, runner.params())
        return _references[key]


def grade_combined(submission: Path, workroot: Path, config: Config,
                   on_gpu: bool) -> list[ItemResult]:
    item_id = cases.ITEM
    mpiexec = config.mpiexec or find_mpiexec()
    if mpiexec is None:
        return [ItemResult(item_id, config.title(item_id), config.points(item_id), None,
                           NOT_GRADED, "not graded: no mpiexec on this machine (pip install "
                                       "mpich, or load the site's MPI)")]
    job_plan = cases.plan(on_gpu, mnist_folder())
    try:
        data, ref = reference(job_plan, config.secret)
    except (MnistFormatError, OSError, ValueError) as err:
        # The data, not the submission: the item is not graded, and the class goes on.
        return [ItemResult(item_id, config.title(item_id), config.points(item_id), None,
                           NOT_GRADED, "not graded: the training data could not be read "
                           f"({safe_io.clean_text(err, 300)}; `make data` fetches MNIST again)")]
    job_cases = cases.cases(job_plan, config.secret)
    seconds = LIMIT_FACTOR * config.seconds_mpi
    # Part 2's source policy on the network modules, read from a copy made before the job
    # runs (a rank may rewrite the files of its own copy).
    copy = fresh_copy(workroot / "mpi_combined_policy", submission)
    rules = {module: anticheat.policy_verdict(copy, module, part, config.policy, notes)
             for module, part, notes in ((KERNELS_MODULE, "net", frozenset()),
                                         (BACKPROP_MODULE, "net", frozenset()),
                                         (DATA_MODULE, "mpi", DATA_NOTES))}
    run = run_mpi_job(cases.KIND, job_cases, submission, workroot / "mpi_combined",
                      cases.RANKS, seconds, cases.rank_inputs(data),
                      mpiexec, on_gpu=on_gpu)
    fan_in = max(ref.weights[i].shape[1] for i in range(len(ref.weights)))
    tolerance = split_tolerance(cases.steps(job_plan), fan_in)
    results, checks = [], []
    for n, case in enumerate(job_cases):
        got, problem = rank_results(run, n, case["ranks"], seconds)
        if problem:
            checks.append({"case": cases.label(case), "passed": False, "message": problem})
            break
        results.append(got)
    stopped, incomplete = refusals.stop_message(run.outdir), run.incomplete(seconds)
    broken = next(((f"your network: {r.failure}" if module != DATA_MODULE else r.failure)
                   for module, r in rules.items() if r.failure), "")
    if stopped:
        ok, message = False, stopped
    elif checks:
        ok, message = False, f"{checks[0]['case']}: {checks[0]['message']}"
    else:
        try:
            ok, message, checks = check_combined(results[0][0], results[1], ref, tolerance)
            silent = (silent_calls(results) or unreplayed_calls(results)
                      or shared_rows(results[0][0], results[1], cases.steps(job_plan)))
            if silent:
                ok, message = False, silent
        except (KeyError, ValueError, TypeError, IndexError) as err:
            ok, message = False, f"malformed result ({type(err).__name__}: {err})"
        if broken:  # after the run's own evidence, which says more when there is some
            message = broken if ok else f"{message}; {broken}"
            ok = False
        if ok and incomplete:
            ok, message = False, ("the MPI job did not complete, so its results are not "
                                  f"trusted: {incomplete}")
    return [all_or_nothing(item_id, config, ok, f"{message} ({job_plan['description']})",
                           checks=checks,
                           figures={"job_seconds": round(run.seconds, 2),
                                    "timed_out": run.timed_out, "exit_status": run.returncode,
                                    "complete": run.complete(), "tolerance": tolerance,
                                    "configuration": job_plan["description"]})]
