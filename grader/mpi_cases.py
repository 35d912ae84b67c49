"""Part 3 test cases: what each MPI job runs, and inputs built alike on both sides (the
ranks that call the student's functions, the parent that checks what they wrote).

Each item runs as one MPI job of RANKS processes; a case names how many of them take
part (1 to 4), and the worker carves a communicator of that size out of the job. Inputs
are pure functions of the case and the rank, so the parent rebuilds them instead of
trusting copies written by processes that ran student code.
"""

from __future__ import annotations

import numpy as np

RANKS = 4  # processes per job; cases use communicators of 1..RANKS of them

# item -> the kind of job that grades it (grader/worker_mpi.py): scatter_batch, then
# allreduce_gradients alone, both in training (gradient all-reduce and model averaging),
# and ring_allreduce
ITEMS = {
    "mpi.scatter": "scatter",
    "mpi.allreduce": "allreduce",
    "mpi.data_parallel": "train",
    "mpi.ring": "ring",
    "mpi.averaging": "average",
}

# Training: Part 2's reduced configuration (81 sample images pooled to 7x7, 49-8-10,
# batch 20). Batches of 20 split unevenly over 3 ranks (7/7/6), and the last batch of
# every epoch holds one image, so with 2, 3 or 4 ranks some ranks get no rows at all.
TRAIN_DATA = {"source": "sample", "val_fraction": 0.1, "seed": 0, "pool": 4, "limit": 90}
TRAIN_MODE = {"hidden": [8], "batch": 20, "epochs": 2, "lr": 0.5, "lam": 1e-3, "loss": "ce",
              "seed": 0}
GRADIENT_SHAPES = [[8, 49], [10, 8], [8], [10]]  # dW1, dW2, db1, db2 of that network


def cases(kind: str) -> list[dict]:
    if kind == "scatter":
        specs = [(1, 5, 3, 0), (2, 7, 4, 0), (3, 800, 6, 0), (3, 2, 5, 2), (4, 3, 5, 0),
                 (4, 1, 3, 3), (4, 22, 49, 1)]
        return [{"ranks": p, "rows": n, "features": d, "root": root, "seed": 100 + i}
                for i, (p, n, d, root) in enumerate(specs)]
    if kind == "allreduce":
        shares = [[9], [10, 10], [1, 0], [7, 7, 6], [267, 267, 266], [5, 5, 5, 4], [1, 0, 0, 0]]
        return [{"ranks": len(s), "n_local": s, "shapes": GRADIENT_SHAPES, "seed": 200 + i}
                for i, s in enumerate(shares)]
    if kind == "ring":
        lengths = {1: [5], 2: [1, 3, 1001, 100001], 3: [1, 2, 4, 3001, 100000],
                   4: [1, 2, 3, 5, 1001, 100002]}
        return [{"ranks": p, "length": n, "seed": 300 + 10 * p + i}
                for p, ns in lengths.items() for i, n in enumerate(ns)]
    if kind == "train":
        return [{"ranks": p, "data": TRAIN_DATA, "mode": TRAIN_MODE} for p in (1, 2, 3, 4)]
    if kind == "average":
        return [{"ranks": p, "every": k, "data": TRAIN_DATA, "mode": TRAIN_MODE}
                for p, k in ((2, 2), (3, 3), (4, 2))]
    raise ValueError(f"unknown MPI job kind {kind!r}")


def label(kind: str, case: dict) -> str:
    """A case in words, for the feedback."""
    p = case["ranks"]
    if kind == "scatter":
        return f"{case['rows']} rows x {case['features']} over {p} rank(s), root {case['root']}"
    if kind == "allreduce":
        return f"{p} rank(s) with {case['n_local']} rows"
    if kind == "ring":
        return f"{case['length']} floats on {p} rank(s)"
    if kind == "train":
        return f"{p} rank(s)"
    return f"{p} rank(s), averaging every {case['every']} minibatches"


def scatter_inputs(case: dict) -> tuple[np.ndarray, np.ndarray]:
    """The minibatch root holds: float32 images and int64 labels."""
    rng = np.random.default_rng(case["seed"])
    X = rng.normal(size=(case["rows"], case["features"])).astype(np.float32)
    return X, rng.integers(0, 10, size=case["rows"]).astype(np.int64)


def gradient_inputs(case: dict, rank: int) -> list[np.ndarray]:
    """One rank's gradients: values of mixed sizes, as real gradients have."""
    rng = np.random.default_rng([case["seed"], rank])
    return [(rng.normal(size=shape) * 10.0 ** rng.integers(-3, 2)).astype(np.float32)
            for shape in case["shapes"]]


def ring_input(case: dict, rank: int) -> np.ndarray:
    rng = np.random.default_rng([case["seed"], rank])
    return rng.uniform(-1.0, 1.0, size=case["length"]).astype(np.float32)
