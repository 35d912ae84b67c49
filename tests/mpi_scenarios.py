"""Run by tests/kit/test_mpi.py as `mpiexec -n 4 python tests/mpi_scenarios.py OUT.json`.

Exercises the kit's and the solution's MPI code on communicators of 1 to 4 of the job's
ranks and writes, from rank 0, what it measured: the tests decide. Tiny sizes throughout
(the shipped sample, a 49-8-10 network), so the whole job takes seconds.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np
from mpi4py import MPI

from nnkit import collectives, dataset, network
from nnkit.gemm_reference import FLT_MIN, gamma
from nnkit.model_parallel import train_model_parallel
from nnkit.mpi_train import (
    HostEngine,
    folder_functions,
    kit_functions,
    simulate_model_averaging,
    train_mpi,
)
from nnkit.submission import NAMED, load_function
from nnkit.training import ReferenceRunner, TrainConfig, train

WORLD = MPI.COMM_WORLD
RANK = WORLD.Get_rank()
DATA = {"source": "sample", "val_fraction": 0.1, "seed": 0, "pool": 4, "limit": 90}
CONFIG = TrainConfig(hidden=(8,), batch=20, epochs=2, lr=0.5, lam=1e-3)


def on_ranks(p: int) -> Any:
    """A communicator of the first p ranks (None on the others)."""
    comm = WORLD.Split(0 if RANK < p else MPI.UNDEFINED, RANK)
    return None if comm == MPI.COMM_NULL else comm


def everyone(value: Any) -> list:
    """value from every rank of the world, on every rank."""
    return WORLD.allgather(value)


def scatter_checks(fns: dict[str, Any]) -> dict:
    out: dict = {}
    for name, scatter in fns.items():
        ok = True
        for p in (1, 2, 3, 4):
            for n, d, root in ((800, 3, 0), (1, 2, 0), (3, 5, p - 1), (22, 4, p - 1)):
                comm = on_ranks(p)
                if comm is not None:
                    rng = np.random.default_rng(n + d)
                    X = rng.normal(size=(n, d)).astype(np.float32)
                    y = rng.integers(0, 10, n).astype(np.int64)
                    mine = comm.Get_rank() == root
                    X_r, y_r = scatter(comm, X if mine else None, y if mine else None,
                                       root=root)
                    counts = collectives.split_counts(n, p)
                    lo = collectives.offsets(counts)[comm.Get_rank()]
                    hi = lo + counts[comm.Get_rank()]
                    ok &= bool(np.array_equal(X_r, X[lo:hi]) and np.array_equal(y_r, y[lo:hi]))
                    if (n, p) == (800, 3):
                        rows = comm.gather(len(y_r), root=0)
                        if RANK == 0:
                            out[f"{name} 800 over 3"] = rows
                    comm.Free()
        out[name] = all(everyone(ok))
    return out


def ring_checks(rings: dict[str, Any]) -> dict:
    out: dict = {}
    for name, ring in rings.items():
        worst, worst_vs_mpi, bytes_ok = 0.0, 0.0, True
        for p in (1, 2, 3, 4):
            for length in (1, 2, 3, 5, 7, 1001, 70001):
                comm = on_ranks(p)
                if comm is not None:
                    r = comm.Get_rank()
                    inputs = [np.random.default_rng([length, k]).uniform(-1, 1, length)
                              .astype(np.float32) for k in range(p)]
                    buffer, library = inputs[r].copy(), inputs[r].copy()
                    comm.Allreduce(MPI.IN_PLACE, library, op=MPI.SUM)
                    # Through the grader's point-to-point communicator, which counts the
                    # bytes for each destination.
                    tally = collectives.call_point_to_point(ring, comm, buffer)
                    exact = np.sum([x.astype(np.float64) for x in inputs], axis=0)
                    bound = gamma(p - 1) * np.sum([np.abs(x.astype(np.float64))
                                                   for x in inputs], axis=0) + p * FLT_MIN
                    worst = max(worst, float((np.abs(buffer - exact) / bound).max()))
                    worst_vs_mpi = max(worst_vs_mpi,
                                       float((np.abs(buffer - library) / bound).max()))
                    # Each rank sends every chunk but two: chunk r+1 in the reduce-scatter,
                    # chunk r+2 in the all-gather, all of it to its right neighbour.
                    sizes = collectives.split_counts(length, p)
                    expect = 0 if p == 1 else 4 * (2 * length - sizes[(r + 1) % p]
                                                   - sizes[(r + 2) % p])
                    sent = tally["sent_to"]
                    bytes_ok &= sum(sent) == expect and (p == 1 or sent[(r + 1) % p] == expect)
                    bytes_ok &= set(tally["calls"]) <= collectives.POINT_TO_POINT_CALLS
                    bytes_ok &= tally["unknown"] == 0
                    comm.Free()
        out[name] = {"error_over_bound": max(everyone(worst)),
                     "vs_allreduce_over_bound": max(everyone(worst_vs_mpi)),
                     "bytes_and_calls_ok": all(everyone(bytes_ok))}
    return out


def mixing_checks() -> dict:
    out: dict = {}
    for strategy, p in (("butterfly", 2), ("butterfly", 4), ("hopping", 2), ("hopping", 4),
                        ("hopping", 3)):
        comm = on_ranks(p)
        worst, same_bits = 0.0, True
        if comm is not None:
            r = comm.Get_rank()
            inputs = [np.random.default_rng([9, k]).uniform(-1, 1, 37).astype(np.float32)
                      for k in range(p)]
            buffer = inputs[r].copy()
            simulated = [x.copy() for x in inputs]
            for stage in range(collectives.log2_ranks(p)):
                collectives.mix(strategy, comm, buffer, stage)
                simulated = collectives.simulate_mix(strategy, simulated, stage)
            same_bits = bool(np.array_equal(buffer, simulated[r]))
            mean = np.mean([x.astype(np.float64) for x in inputs], axis=0)
            worst = float(np.abs(buffer - mean).max())
            comm.Free()
        out[f"{strategy} {p}"] = {"same_as_simulation": all(everyone(same_bits)),
                                  "distance_from_mean": max(everyone(worst))}
    return out


def _max_relative(got: list[dict], want: list[network.Params]) -> float:
    worst = 0.0
    for arrays, ref in zip(got, want, strict=True):
        for key, value in ref.named().items():
            scale = float(np.abs(value).max())
            worst = max(worst, float(np.abs(arrays[key] - value).max()) / scale)
    return worst


def training_checks() -> dict:
    data = dataset.load(**DATA)  # every rank reads it here; the loop passes it to rank 0 only
    params = network.glorot_uniform(CONFIG.sizes(data.features), CONFIG.seed)
    runner = ReferenceRunner(params.copy(), CONFIG)
    train(runner, data, CONFIG, evaluate=False)
    serial = runner.params()
    solution = folder_functions(NAMED["solution"], need_ring=True)
    out: dict = {}

    def data_parallel(name: str, p: int, fns: Any, strategy: str = "allreduce",
                      every: int = 0, expected: list[network.Params] | None = None) -> None:
        comm = on_ranks(p)
        got = None
        if comm is not None:
            engine = HostEngine(params, CONFIG)
            train_mpi(comm, engine, data.train if comm.Get_rank() == 0 else None, CONFIG,
                      fns, strategy=strategy, average_every=every)
            got = engine.host_params().named()
            comm.Free()
        gathered = [g for g in everyone(got) if g is not None]
        if RANK == 0:
            out[name] = _max_relative(gathered, expected or [serial] * p)

    for p in (1, 2, 3, 4):
        data_parallel(f"data parallel, kit, {p} ranks", p, kit_functions())
    data_parallel("data parallel, solution, 3 ranks", 3, solution)
    data_parallel("data parallel, solution ring, 3 ranks", 3, solution, "ring")
    data_parallel("data parallel, kit ring, 4 ranks", 4, kit_functions(), "ring")
    data_parallel("averaging k=1, 3 ranks", 3, solution, every=1)
    for strategy, p, k in (("allreduce", 3, 2), ("ring", 2, 3), ("butterfly", 4, 2),
                           ("hopping", 3, 2)):
        simulated = simulate_model_averaging(params, data.train, CONFIG, p, k, strategy)
        data_parallel(f"averaging k={k} {strategy}, {p} ranks", p, solution, strategy, k,
                      simulated)
        if RANK == 0:
            out[f"simulated averaging k={k} {strategy}, {p} ranks vs serial"] = \
                _max_relative([serial.named()], [simulated[0]])
    for p in (1, 2, 3, 4):
        comm = on_ranks(p)
        got = None
        if comm is not None:
            final, _ = train_model_parallel(comm, data.train if comm.Get_rank() == 0 else None,
                                            CONFIG, params, strategy="ring" if p == 3
                                            else "allreduce")
            got = final.named() if final is not None else None
            comm.Free()
        if RANK == 0:
            out[f"model parallel, {p} ranks"] = _max_relative([got], [serial])
    return out


def main() -> None:
    solution = NAMED["solution"]
    results = {
        "scatter": scatter_checks({
            "solution": load_function(solution, "mpi_1_data_parallel", "scatter_batch"),
            "kit": collectives.scatter_batch}),
        "ring": ring_checks({
            "solution": load_function(solution, "mpi_2_ring", "ring_allreduce"),
            "kit": collectives.ring_allreduce}),
        "mixing": mixing_checks(),
        "training": training_checks(),
    }
    if RANK == 0:
        with open(sys.argv[1], "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
