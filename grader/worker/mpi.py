"""The ranks of a Part 3 grading job: `mpiexec -n 4 python -P -m grader.worker.mpi JOB.json`.

Set-up, on every rank, before anything submitted is imported: MPI starts; the rank reads
its own inputs (`rank-R/inputs.npz`, written by the grader: what this rank alone is given)
and removes the file; it moves into its own copy of the submission (`rank-R/submission`,
with `rank-R/tmp` its only scratch folder); `MPI.COMM_WORLD` is replaced by an object
that refuses every use (the functions must use the communicator they are given); the
trusted modules are photographed and the audit hook armed (grader/worker/common.py's
confine()). From then on the submission's code cannot open another rank's files, its
copy, its scratch or the output folder, nor signal a process: what a rank learns of the
others comes through MPI.

Every rank then runs the job's cases in order. For a case of p ranks the first p ranks
of the job form a communicator of their own and call the submission's functions on it;
the others wait (asleep, not spinning: an idle rank must not steal a core from the
working ones). Each rank writes what it got, raw, to `case-N-rank-R.npz` (R its own rank:
a rank writes no other rank's file), or the error it met to `case-N-rank-R.err`, and then
stops the whole job (MPI_Abort): the other ranks may be blocked waiting for it, and a
blocked job would only end at the time limit. After the last case every rank writes
`rank-R.done`. The grader trusts the results of a job only when it exited with status 0
and every rank's marker is there. Nothing here judges a result: grader/parts/mpi.py does.

The ring item gets a communicator that offers point-to-point calls only and counts the
bytes each rank sends to each other rank (nnkit.collectives.call_point_to_point).

The combined item (kind "combined") trains the submission's Part 2 network, alone and on
two ranks under its Part 3 functions: for it, set-up also loads the backend (numba, and
CuPy on a GPU) and, in the simulator, restricts kernels as grader/worker/__main__.py does
for Part 2, before the submission is imported.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from grader.worker.common import (
    LIMITS,
    PHASES,
    Profiled,
    confine,
    describe_error,
    mark,
    read_inputs,
    write_phases,
)
from grader.worker.jobs import Job, MpiJob

_STARTED = time.time(), time.process_time()  # for phases.json (GRADER_PROFILE)

RANKS_NOTE = "the grader runs them on communicators of 1 to 4 ranks carved out of a larger job"


class WorldRefused(AttributeError):
    """MPI.COMM_WORLD used by graded code."""


class RefusedWorld:
    """What `MPI.COMM_WORLD` is while graded code runs: every attribute refused."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        raise WorldRefused(f"MPI.COMM_WORLD.{name}: Part 3's functions must use the "
                           f"communicator they are given (`comm`), never MPI.COMM_WORLD: "
                           f"{RANKS_NOTE}")

    def __repr__(self) -> str:
        return "<MPI.COMM_WORLD: not available to graded code>"


def _host(value: Any, what: str) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype == object:
        raise TypeError(f"{what} is {type(value).__name__}, not a numeric array")
    return array


def run_scatter(n: int, case: dict, comm: Any, submission: Path,
                inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    from nnkit.collectives import counting_proxy
    from nnkit.mpi_train import DATA_MODULE
    from nnkit.submission import load_function

    scatter = load_function(submission, DATA_MODULE, "scatter_batch")
    root = comm.Get_rank() == case["root"]  # only its file holds the minibatch
    X = inputs[f"case-{n}/X"] if root else None
    labels = inputs[f"case-{n}/labels"] if root else None
    counted, handed = counting_proxy(comm)  # what root hands out: rows, not the batch
    result = scatter(counted, X, labels, root=case["root"])
    if not isinstance(result, tuple | list) or len(result) != 2:
        raise TypeError("scatter_batch must return (X_local, labels_local)")
    return {"X": _host(result[0], "X_local"), "labels": _host(result[1], "labels_local"),
            "handed": np.array(handed(), dtype=np.int64)}


def run_allreduce(n: int, case: dict, comm: Any, submission: Path,
                  inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    from nnkit.mpi_train import DATA_MODULE
    from nnkit.submission import load_function

    combine = load_function(submission, DATA_MODULE, "allreduce_gradients")
    rank = comm.Get_rank()
    grads = [inputs[f"case-{n}/g{i}"] for i in range(len(case["shapes"]))]
    result = combine(comm, grads, case["n_local"][rank], sum(case["n_local"]))
    if not isinstance(result, tuple | list) or len(result) != len(case["shapes"]):
        raise TypeError(f"allreduce_gradients returned {type(result).__name__}, expected a "
                        f"list of {len(case['shapes'])} arrays")
    return {f"g{i}": _host(g, f"gradient {i}") for i, g in enumerate(result)}


def run_ring(n: int, case: dict, comm: Any, submission: Path,
             inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    from mpi4py import MPI

    from nnkit.collectives import call_point_to_point
    from nnkit.mpi_train import RING_MODULE
    from nnkit.submission import load_function

    ring = load_function(submission, RING_MODULE, "ring_allreduce")
    buffer = inputs[f"case-{n}/buffer"].copy()
    library = buffer.copy()
    comm.Allreduce(MPI.IN_PLACE, library, op=MPI.SUM)  # MPI's answer, for the comparison
    count = call_point_to_point(ring, comm, buffer)
    return {"got": buffer, "mpi": library,
            "sent_to": np.array(count["sent_to"], dtype=np.int64),
            "unknown": np.array(count["unknown"], dtype=np.int64),
            "wide": np.array(count["wide"], dtype=np.int64),
            "calls": np.array(sorted(count["calls"]), dtype=str),
            "problems": np.array(count["problems"], dtype=str)}


def _training(n: int, case: dict, comm: Any, submission: Path, inputs: dict[str, np.ndarray],
              every: int) -> dict[str, np.ndarray]:
    from nnkit import network
    from nnkit.mnist import Split
    from nnkit.mpi_train import HostEngine, folder_functions, train_mpi
    from nnkit.training import TrainConfig

    rank = comm.Get_rank()
    # Rank 0 holds the training set (only its file has it); the others get their rows
    # through the submission's scatter_batch.
    data = Split(inputs["train/images"], inputs["train/labels"]) if rank == 0 else None
    features = comm.bcast(data.images.shape[1] if rank == 0 else None, root=0)
    config = TrainConfig(**{**case["mode"], "hidden": tuple(case["mode"]["hidden"])})
    # The grader's network: the CPU reference on every rank, so that Part 3 is graded on
    # its own whatever the state of the submission's Part 2.
    engine = HostEngine(network.glorot_uniform(config.sizes(features), config.seed), config)
    rows = [0]  # the rows this rank computed gradients of (the grader adds the ranks' up)
    gradients = engine.gradients

    def counted(X: Any, labels: Any) -> Any:
        rows[0] += int(np.shape(X)[0]) if np.ndim(X) else 0
        return gradients(X, labels)

    engine.gradients = counted
    train_mpi(comm, engine, data, config, folder_functions(submission), average_every=every)
    return {**engine.host_params().named(), "rows": np.array(rows, np.int64)}


def run_train(n: int, case: dict, comm: Any, submission: Path,
              inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return _training(n, case, comm, submission, inputs, 0)


def run_average(n: int, case: dict, comm: Any, submission: Path,
                inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return _training(n, case, comm, submission, inputs, case["every"])


def _train_alone(engine: Any, data: Any, config: Any) -> None:
    """One process, no Part 3 code: the batches of train_mpi in its order, each step with
    the gradient of the whole batch (what train_mpi does with a perfect all-reduce)."""
    from nnkit.dataset import batch_slices, epoch_order

    n = len(data)
    for epoch in range(config.epochs):
        order = epoch_order(n, config.seed, epoch)
        X, labels = data.images[order].astype(np.float32), data.labels[order].astype(np.int64)
        for s in batch_slices(n, config.batch):
            grads, _ = engine.gradients(X[s], labels[s])
            engine.step(grads, config.lr)


# The network functions audited per call (the order of the `calls` and `silent` arrays).
NETWORK_CALLS = ("forward", "backward", "sgd_step")


def run_combined(n: int, case: dict, comm: Any, submission: Path,
                 inputs: dict[str, np.ndarray], recorder: Any = None) -> dict[str, np.ndarray]:
    """The submission's Part 2 network (its kernels, forward, backward and sgd_step, on
    the trusted GEMM) trained alone (a case of one rank) or under its Part 3 functions.

    Its calls are audited as Part 2's training job audits them (grader/worker/net.py's
    Audited): every call's launches of the submission's own kernels are counted, and the
    calls numbered in the case's `audit_calls` (drawn from the run's secret) are recorded
    in full and replayed. Besides the parameters: `calls` and `silent`, per function of
    NETWORK_CALLS, how many calls this rank made and how many launched none of the
    submission's kernels; `rows`, the rows of the labels backward was given; and per
    call recorded in full, `audit_missing` (outputs the replay did not reproduce at all)
    and `audit_worst` (the largest relative difference of the others)."""
    from grader.worker.net import audited_functions
    from nnkit import network
    from nnkit.backend import select
    from nnkit.mnist import Split
    from nnkit.mpi_train import DeviceEngine, folder_functions, train_mpi
    from nnkit.training import TrainConfig, make_gemm

    rank = comm.Get_rank()
    data = Split(inputs["train/images"], inputs["train/labels"]) if rank == 0 else None
    features = comm.bcast(data.images.shape[1] if rank == 0 else None, root=0)
    config = TrainConfig(**{**case["mode"], "hidden": tuple(case["mode"]["hidden"])})
    # Observed, so that the products of a call recorded in full are replayed too.
    gemm = recorder.gemm_observer(make_gemm("cublas" if select().on_gpu else "host",
                                            submission))
    engine = DeviceEngine(submission, network.glorot_uniform(config.sizes(features),
                                                             config.seed), config, gemm)
    audits: list[dict] = []
    full = {int(x) for x in case.get("audit_calls", [])}
    counted = audited_functions(engine, recorder, full, audits, labels_arg=3)
    mark(f"case-{n}-engine")
    if case["ranks"] == 1:
        _train_alone(engine, data, config)
    else:
        train_mpi(comm, engine, data, config, folder_functions(submission))
    mark(f"case-{n}-training")
    return {**engine.host_params().named(),
            "calls": np.array([counted[k].calls for k in NETWORK_CALLS], np.int64),
            "silent": np.array([counted[k].silent for k in NETWORK_CALLS], np.int64),
            "rows": np.array([counted["backward"].rows], np.int64),
            "audit_missing": np.array([a["missing"] for a in audits], np.int64),
            "audit_worst": np.array([a["worst_relative_difference"] for a in audits],
                                    np.float64)}


RUN = {"scatter": run_scatter, "allreduce": run_allreduce, "ring": run_ring,
       "train": run_train, "average": run_average, "combined": run_combined}


def _device_set_up(job: MpiJob, submission: Path) -> Any:
    """The combined item runs the submission's kernels: the backend chosen, numba (and
    CuPy on a GPU) loaded, the launch recorder installed and, in the simulator, kernels
    restricted as compiled ones are (grader/worker/__main__.py does the same for Part 2),
    all before anything submitted is imported. Returns the recorder (None for the other
    kinds, which run no kernel and skip this)."""
    if job.kind != "combined":
        return None
    import threading

    from grader.worker import blocksync, kernelsim, launches, warps
    from nnkit.backend import cuda, preload_numba_math, select

    del cuda  # imported for its side effect: numba loads before the submission can
    if select().on_gpu:
        import cupy  # noqa: F401 - loaded now: the submission cannot stand in for it

        preload_numba_math()
    else:
        if job.thread_stack_kb:  # a Python thread per simulated CUDA thread
            threading.stack_size(job.thread_stack_kb * 1024)
        kernelsim.install()
        blocksync.install()
        warps.install()
    import grader.worker.net  # noqa: F401 - its Audited wrapper, loaded before the submission
    import nnkit.dataset
    import nnkit.gemm  # noqa: F401

    recorder = launches.Recorder(submission, select().on_gpu)
    recorder.install()
    return recorder


def _wait_for_all(comm: Any) -> None:
    """A barrier that sleeps while it waits (MPI's own barrier spins on a core)."""
    request = comm.Ibarrier()
    while not request.Test():
        time.sleep(0.002)


def set_up(job: MpiJob, MPI: Any, rank: int) -> tuple[Path, dict[str, np.ndarray], Any, Any]:
    """This rank's submission copy and inputs, then confinement (see the module's text).
    Returns (submission, inputs, snapshot of the trusted modules, launch recorder or
    None)."""
    home = Path(job.ranks_dir) / f"rank-{rank}"
    inputs = read_inputs(home / "inputs.npz")
    submission = (home / "submission").resolve()
    scratch = home / "tmp"
    scratch.mkdir(exist_ok=True)
    os.environ["TMPDIR"] = tempfile.tempdir = str(scratch)
    os.chdir(submission)
    # The kit's modules, loaded before the submission can stand in for any of them; and
    # numpy.random, which numpy loads on first use (the other workers have it from numba).
    import numpy.random  # noqa: F401

    import nnkit.collectives
    import nnkit.mnist
    import nnkit.mpi_train
    import nnkit.network
    import nnkit.submission
    import nnkit.training  # noqa: F401
    recorder = _device_set_up(job, submission)
    # Last on the path (the worker runs with -P): the submission's modules can import
    # one another, and cannot stand in for an installed module.
    sys.path.append(str(submission))
    MPI.COMM_WORLD = RefusedWorld()  # the kit keeps its own reference (main's `world`)
    return submission, inputs, confine(submission, Path(job.outdir), [scratch]), recorder


def _run_cases(job: MpiJob, world: Any, MPI: Any, out: Path, run: Any, submission: Path,
               inputs: dict[str, np.ndarray], snapshot: Any) -> None:
    """Every case of the job in order, on communicators of its first ranks (the module's
    text); a rank that fails writes its error and stops the whole job."""
    rank = world.Get_rank()
    for n, case in enumerate(job.cases):
        if rank == 0:
            (out / f"case-{n}.started").write_text("")
        inside = rank < case["ranks"]
        comm = world.Split(0 if inside else MPI.UNDEFINED, rank)
        if inside:
            name = out / f"case-{n}-rank-{rank}"  # comm's rank: the job's, as key = rank
            try:
                arrays = run(n, case, comm, submission, inputs)
                snapshot.check()
                np.savez(name.with_suffix(".npz"), **arrays)
            except BaseException as err:  # noqa: BLE001 - any failure of student code
                # Written aside, then renamed: another rank's Abort may kill this one at
                # any moment, and the grader must never read half a message.
                partial = name.with_suffix(".err-partial")
                partial.write_text(describe_error(err, submission))
                os.replace(partial, name.with_suffix(".err"))
                sys.stdout.flush()
                world.Abort(3)
            comm.Free()
        _wait_for_all(world)
        mark(f"case-{n}")


def main(argv: list[str]) -> int:
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    job_file = Path(argv[1])
    job = Job.from_json(json.loads(job_file.read_text()))
    if not isinstance(job, MpiJob):
        raise ValueError(f"not an MPI job: {job.kind}")
    LIMITS.update(job.limits)
    out, run = Path(job.outdir), RUN[job.kind]  # taken before the submission runs
    PHASES.append(("start", *_STARTED))
    mark("mpi")
    submission, inputs, snapshot, recorder = set_up(job, MPI, rank)
    mark("set-up")
    if recorder is not None:
        run = functools.partial(run, recorder=recorder)
    _wait_for_all(world)  # every rank has read the job and its inputs
    if rank == 0:
        job_file.unlink(missing_ok=True)
    with Profiled(job.cprofile and rank == 0, out):
        _run_cases(job, world, MPI, out, run, submission, inputs, snapshot)
    try:
        snapshot.check()
    except BaseException as err:  # noqa: BLE001 - tampering after the last result
        (out / f"rank-{rank}.err").write_text(describe_error(err, submission))
        world.Abort(3)
    if rank == 0:  # where the time went, for profiling only (nothing graded reads it)
        mark("end")
        write_phases(out)
    (out / f"rank-{rank}.done").write_text("")
    return 0


if __name__ == "__main__":
    # Run as grader.worker.mpi, not as __main__: the trusted modules' check
    # (grader/worker/tamper.py) watches the globals of the former, so a submission that
    # rebinds one of this module's names (np, a run_* function) is caught before any result
    # is written.
    from grader.worker import mpi as worker

    status = worker.main(sys.argv)
    # Every result is written: finalize MPI, then leave without numba's and CuPy's exit
    # handlers (seconds for the combined item's ranks). Not os._exit, as
    # grader/worker/__main__.py leaves: MPICH's launcher then killed the other ranks now
    # and then.
    import atexit

    from mpi4py import MPI

    MPI.Finalize()
    atexit._clear()
    sys.exit(status)
