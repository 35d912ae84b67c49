"""The ranks of a Part 3 grading job: `mpiexec -n 4 python -m grader.worker_mpi JOB.json`.

Every rank runs the job's cases in order. For a case of p ranks the first p ranks of the
job form a communicator of their own and call the submission's functions on it; the
others wait (asleep, not spinning: an idle rank must not steal a core from the working
ones). Each rank writes what it got, raw, to `case-N-rank-R.npz`, or the error it met to
`case-N-rank-R.err`, and then stops the whole job (MPI_Abort): the other ranks may be
blocked waiting for it, and a blocked job would only end at the time limit. Nothing here
judges a result: the grader does, from these files (grader/part3.py).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from grader.mpi_cases import gradient_inputs, ring_input, scatter_inputs
from grader.worker import describe_error
from nnkit.mpi_train import DATA_MODULE, RING_MODULE
from nnkit.submission import load_function


def _host(value: Any, what: str) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype == object:
        raise TypeError(f"{what} is {type(value).__name__}, not a numeric array")
    return array


def run_scatter(case: dict, comm: Any, submission: Path) -> dict[str, np.ndarray]:
    scatter = load_function(submission, DATA_MODULE, "scatter_batch")
    X, labels = scatter_inputs(case) if comm.Get_rank() == case["root"] else (None, None)
    result = scatter(comm, X, labels, root=case["root"])
    if not isinstance(result, tuple | list) or len(result) != 2:
        raise TypeError("scatter_batch must return (X_local, labels_local)")
    return {"X": _host(result[0], "X_local"), "labels": _host(result[1], "labels_local")}


def run_allreduce(case: dict, comm: Any, submission: Path) -> dict[str, np.ndarray]:
    combine = load_function(submission, DATA_MODULE, "allreduce_gradients")
    rank = comm.Get_rank()
    result = combine(comm, gradient_inputs(case, rank), case["n_local"][rank],
                     sum(case["n_local"]))
    if not isinstance(result, tuple | list) or len(result) != len(case["shapes"]):
        raise TypeError(f"allreduce_gradients returned {type(result).__name__}, expected a "
                        f"list of {len(case['shapes'])} arrays")
    return {f"g{i}": _host(g, f"gradient {i}") for i, g in enumerate(result)}


def run_ring(case: dict, comm: Any, submission: Path) -> dict[str, np.ndarray]:
    from mpi4py import MPI

    from nnkit.collectives import CountingComm

    ring = load_function(submission, RING_MODULE, "ring_allreduce")
    buffer = ring_input(case, comm.Get_rank())
    library = buffer.copy()
    comm.Allreduce(MPI.IN_PLACE, library, op=MPI.SUM)  # MPI's answer, for the comparison
    counted = CountingComm(comm)
    ring(counted, buffer)
    return {"got": buffer, "mpi": library, "calls": np.array(sorted(counted.calls), dtype=str)}


def _training(case: dict, comm: Any, submission: Path, every: int) -> dict[str, np.ndarray]:
    from nnkit import dataset, network
    from nnkit.mpi_train import HostEngine, folder_functions, train_mpi
    from nnkit.training import TrainConfig

    rank = comm.Get_rank()
    data = dataset.load(**case["data"]) if rank == 0 else None  # rank 0 holds the data
    features = comm.bcast(data.features if rank == 0 else None, root=0)
    config = TrainConfig(**{**case["mode"], "hidden": tuple(case["mode"]["hidden"])})
    # The grader's network: the CPU reference on every rank, so that Part 3 is graded on
    # its own whatever the state of the submission's Part 2.
    engine = HostEngine(network.glorot_uniform(config.sizes(features), config.seed), config)
    train_mpi(comm, engine, data.train if rank == 0 else None, config,
              folder_functions(submission), average_every=every)
    return engine.host_params().named()


def run_train(case: dict, comm: Any, submission: Path) -> dict[str, np.ndarray]:
    return _training(case, comm, submission, 0)


def run_average(case: dict, comm: Any, submission: Path) -> dict[str, np.ndarray]:
    return _training(case, comm, submission, case["every"])


RUN = {"scatter": run_scatter, "allreduce": run_allreduce, "ring": run_ring,
       "train": run_train, "average": run_average}


def _wait_for_all(comm: Any) -> None:
    """A barrier that sleeps while it waits (MPI's own barrier spins on a core)."""
    request = comm.Ibarrier()
    while not request.Test():
        time.sleep(0.002)


def main(argv: list[str]) -> int:
    from mpi4py import MPI

    job = json.loads(Path(argv[1]).read_text())
    out, kind = Path(job["outdir"]), job["kind"]
    submission = Path(job["submission"]).resolve()
    world = MPI.COMM_WORLD
    for n, case in enumerate(job["cases"]):
        if world.Get_rank() == 0:
            (out / f"case-{n}.started").write_text("")
        inside = world.Get_rank() < case["ranks"]
        comm = world.Split(0 if inside else MPI.UNDEFINED, world.Get_rank())
        if inside:
            name = out / f"case-{n}-rank-{comm.Get_rank()}"
            try:
                arrays = RUN[kind](case, comm, submission)
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
    if world.Get_rank() == 0:
        (out / "done").write_text("")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
