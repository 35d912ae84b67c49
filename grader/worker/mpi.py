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

A job of kind "items" runs several items, one after the other, each into files of its
own (`<kind>-case-N-rank-R.npz`, `<kind>-rank-R.done` after its last case), from the
inputs under `<kind>/` in the rank's file: one start of MPI and of every rank's Python for
four of Part 3's items instead of four (grader/parts/mpi.py TOGETHER, which grades them
again one job each when such a job does not complete).

The ring item gets a communicator that offers point-to-point calls only and counts the
bytes each rank sends to each other rank (nnkit.collectives.call_point_to_point).

The combined item (kind "combined") trains the submission's Part 2 network, alone and on
two ranks under its Part 3 functions: for it, set-up also loads the backend (numba, and
CuPy on a GPU) and, in the simulator, restricts kernels as grader/worker/__main__.py does
for Part 2, before the submission is imported (grader/worker/mpi_combined.py).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
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
from grader.worker.mpi_combined import device_set_up, run_combined

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
            "pending": np.array(count["pending"], dtype=np.int64),
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


RUN = {"scatter": run_scatter, "allreduce": run_allreduce, "ring": run_ring,
       "train": run_train, "average": run_average, "combined": run_combined}


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
    recorder = device_set_up(job, submission)
    # Last on the path (the worker runs with -P): the submission's modules can import
    # one another, and cannot stand in for an installed module.
    sys.path.append(str(submission))
    MPI.COMM_WORLD = RefusedWorld()  # the kit keeps its own reference (main's `world`)
    return submission, inputs, confine(submission, Path(job.outdir), [scratch]), recorder


def _afresh(submission: Path, scratch: Path) -> None:
    """Before the next item of a job of kind "items": the submission's modules imported
    again at their first use, and its scratch folder empty, as in a job of its own (a
    module's counter or cache, a file left in the scratch folder, carry nothing from one
    item to the next)."""
    from nnkit.submission import package_name

    package, folder = package_name(submission), str(submission) + os.sep
    for name, module in list(sys.modules.items()):
        try:  # (a module's own __getattr__ is not asked: its __dict__ is read)
            where = module.__dict__.get("__file__")
        except Exception:  # noqa: BLE001 - not a module: leave it
            continue
        # The private package (whose attributes keep its modules), its modules, and the
        # folder's modules imported by their plain names (the folder is on sys.path).
        if name == package or name.startswith(package + ".") or (
                isinstance(where, str) and where.startswith(folder)):
            del sys.modules[name]
    for entry in scratch.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def _run_cases(cases: list[dict], world: Any, MPI: Any, out: Path, run: Any,
               submission: Path, inputs: dict[str, np.ndarray], snapshot: Any,
               prefix: str = "") -> None:
    """Every case in order, on communicators of the job's first ranks (the module's
    text), each file's name after `prefix`; a rank that fails writes its error and stops
    the whole job."""
    rank = world.Get_rank()
    for n, case in enumerate(cases):
        if rank == 0:
            (out / f"{prefix}case-{n}.started").write_text("")
        inside = rank < case["ranks"]
        comm = world.Split(0 if inside else MPI.UNDEFINED, rank)
        if inside:
            name = out / f"{prefix}case-{n}-rank-{rank}"  # comm's rank: the job's (key = rank)
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
    # The run functions, taken before the submission runs.
    out = Path(job.outdir)
    items = [(item["kind"], RUN[item["kind"]], item["cases"]) for item in job.items] \
        if job.kind == "items" else [(None, RUN[job.kind], job.cases)]
    PHASES.append(("start", *_STARTED))
    mark("mpi")
    with Profiled(job.cprofile and rank == 0, out):  # before set-up arms the guard
        submission, inputs, snapshot, recorder = set_up(job, MPI, rank)
        mark("set-up")
        _wait_for_all(world)  # every rank has read the job and its inputs
        if rank == 0:
            job_file.unlink(missing_ok=True)
        for number, (kind, run, cases) in enumerate(items):
            if recorder is not None:
                run = functools.partial(run, recorder=recorder)
            if kind is None:
                _run_cases(cases, world, MPI, out, run, submission, inputs, snapshot)
                continue
            if number:
                _afresh(submission, Path(job.ranks_dir) / f"rank-{rank}" / "tmp")
            key = f"{kind}/"
            mine = {k[len(key):]: v for k, v in inputs.items() if k.startswith(key)}
            _run_cases(cases, world, MPI, out, run, submission, mine, snapshot, f"{kind}-")
            snapshot.check()
            (out / f"{kind}-rank-{rank}.done").write_text("")
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
