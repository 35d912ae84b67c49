"""Quick visible checks of the Part 3 functions, run under MPI (`make test` runs them).

    mpiexec -n 3 python -m nnkit.mpi_checks [--impl starter] [FUNCTION ...]

FUNCTION is any of shard_counts, scatter_batch, allreduce_gradients, chunk_bounds,
ring_allreduce (default: all). Every rank calls the functions of the implementation
folder on a few small cases on MPI.COMM_WORLD, and rank 0 prints one line per check and
exits with status 1 if any failed. Like nnkit.checks, these are a first step: the
grader's cases (`make check PART=mpi`) run on 1 to 4 ranks with more sizes, count the
bytes each rank sends and train the network with your functions.

Float tolerances: a sum of p float32 terms, in any order, is within gamma(p) * sum |term|
of the exact sum (gamma(n) = n u / (1 - n u), u = 2^-24); allreduce_gradients also
rounds each term once when it scales it, hence gamma(p + 1).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from nnkit.gemm_reference import gamma

DATA_MODULE = "mpi_1_data_parallel"
RING_MODULE = "mpi_2_ring"
FUNCTIONS = {"shard_counts": DATA_MODULE, "scatter_batch": DATA_MODULE,
             "allreduce_gradients": DATA_MODULE, "chunk_bounds": RING_MODULE,
             "ring_allreduce": RING_MODULE}


def _even_split(n: int, parts: int) -> list[int]:
    return [len(block) for block in np.array_split(np.arange(n), parts)]


def check_shard_counts(fn: Callable, comm: Any) -> None:
    for n, size in [(800, 3), (10, 4), (2, 3), (0, 2), (7, 1)]:
        got = [int(c) for c in fn(n, size)]
        if got != _even_split(n, size):
            raise AssertionError(f"shard_counts({n}, {size}) = {got}, expected "
                                 f"{_even_split(n, size)}")


def check_chunk_bounds(fn: Callable, comm: Any) -> None:
    for length, parts in [(10, 3), (2, 4), (0, 2), (1001, 4)]:
        want = [0, *np.cumsum(_even_split(length, parts)).tolist()]
        got = [int(b) for b in fn(length, parts)]
        if got != want:
            raise AssertionError(f"chunk_bounds({length}, {parts}) = {got}, expected {want}")


def check_scatter_batch(fn: Callable, comm: Any) -> None:
    rank, size = comm.Get_rank(), comm.Get_size()
    for n, d, root in [(7, 3, 0), (2, 4, size - 1), (size * 5 + 1, 49, 0)]:
        rng = np.random.default_rng(n * 100 + d)
        X = rng.uniform(-1, 1, (n, d)).astype(np.float32)
        y = rng.integers(0, 10, n).astype(np.int64)
        got_X, got_y = fn(comm, X if rank == root else None, y if rank == root else None,
                          root=root)
        lo = sum(_even_split(n, size)[:rank])
        count = _even_split(n, size)[rank]
        where = f"n={n}, d={d}, root={root}, rank {rank} of {size}"
        got_X, got_y = np.asarray(got_X), np.asarray(got_y)
        if got_X.shape != (count, d) or got_X.dtype != np.float32:
            raise AssertionError(f"{where}: X_local is {got_X.dtype} {got_X.shape}, expected "
                                 f"float32 {(count, d)}")
        if got_y.shape != (count,) or got_y.dtype != np.int64:
            raise AssertionError(f"{where}: labels_local is {got_y.dtype} {got_y.shape}, "
                                 f"expected int64 {(count,)}")
        rows = slice(lo, lo + count)
        if not (np.array_equal(got_X, X[rows]) and np.array_equal(got_y, y[rows])):
            raise AssertionError(f"{where}: not rows {lo} to {lo + count - 1} of the batch")


def check_allreduce_gradients(fn: Callable, comm: Any) -> None:
    rank, size = comm.Get_rank(), comm.Get_size()
    shapes = [(8, 49), (10, 8), (8,), (10,)]
    for counts in (_even_split(20, size), [1] + [0] * (size - 1)):
        n_total = sum(counts)
        grads = [[np.random.default_rng(10 * r + i).uniform(-1, 1, s).astype(np.float32)
                  for i, s in enumerate(shapes)] for r in range(size)]
        got = fn(comm, [g.copy() for g in grads[rank]], counts[rank], n_total)
        for i, shape in enumerate(shapes):
            terms = [np.float64(c / n_total) * grads[r][i] for r, c in enumerate(counts)]
            exact = np.sum(terms, axis=0)
            bound = gamma(size + 1) * np.sum(np.abs(terms), axis=0) + 1e-30
            array = np.asarray(got[i]) if i < len(got) else None
            where = f"shares {counts}, array {i}, rank {rank}"
            if array is None or array.shape != shape:
                raise AssertionError(f"{where}: expected an array of shape {shape}")
            bad = np.abs(array.astype(np.float64) - exact) > bound
            if bad.any():
                at = tuple(int(k) for k in np.argwhere(bad)[0])
                raise AssertionError(f"{where}: element {at} is {array[at]}, expected "
                                     f"{exact[at]:.7g} (the shares-weighted sum)")


def check_ring_allreduce(fn: Callable, comm: Any) -> None:
    rank, size = comm.Get_rank(), comm.Get_size()
    for length in (1, size + 1, 1001):
        parts = [np.random.default_rng(1000 * r + length).uniform(-1, 1, length)
                 .astype(np.float32) for r in range(size)]
        buffer = parts[rank].copy()
        fn(comm, buffer)
        exact = np.sum(np.array(parts, dtype=np.float64), axis=0)
        bound = gamma(size) * np.sum(np.abs(np.array(parts, dtype=np.float64)), axis=0)
        bad = np.abs(buffer.astype(np.float64) - exact) > bound
        if bad.any():
            at = int(np.argwhere(bad)[0][0])
            raise AssertionError(f"length {length}, rank {rank} of {size}: element {at} is "
                                 f"{buffer[at]}, expected {exact[at]:.7g}")


CHECKS = {"shard_counts": check_shard_counts, "scatter_batch": check_scatter_batch,
          "allreduce_gradients": check_allreduce_gradients,
          "chunk_bounds": check_chunk_bounds, "ring_allreduce": check_ring_allreduce}


def main(argv: list[str] | None = None) -> int:
    from mpi4py import MPI

    from nnkit.submission import load_function, resolve

    parser = argparse.ArgumentParser(prog="python -m nnkit.mpi_checks",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("functions", nargs="*", default=list(CHECKS), metavar="FUNCTION")
    parser.add_argument("--impl", default="starter", help="starter, or a folder")
    args = parser.parse_args(argv)
    unknown = [f for f in args.functions if f not in CHECKS]
    if unknown:
        parser.error(f"unknown {unknown}; choose from {', '.join(CHECKS)}")
    comm = MPI.COMM_WORLD
    folder: Path = resolve(args.impl)
    failed = 0
    for name in args.functions:
        try:
            CHECKS[name](load_function(folder, FUNCTIONS[name], name), comm)
            problem = None
        except Exception as err:  # noqa: BLE001 - reported, and the other checks go on
            problem = f"{type(err).__name__}: {err}"
            if not isinstance(err, AssertionError | NotImplementedError):
                problem += "\n" + "".join(traceback.format_exc(limit=-3))
        problems = comm.gather(problem, root=0)
        if comm.Get_rank() == 0:
            bad: dict[str, list[int]] = {}  # the same problem on several ranks: once
            for r, p in enumerate(problems):
                if p:
                    bad.setdefault(p, []).append(r)
            failed += bool(bad)
            print(f"{name} on {comm.Get_size()} rank(s): " + ("ok" if not bad else
                  "FAILED\n" + "\n".join(f"  rank(s) {', '.join(map(str, r))}: {p}"
                                          for p, r in bad.items())), flush=True)
    failed = comm.bcast(failed, root=0)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
