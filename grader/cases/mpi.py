"""Part 3 test cases: what each MPI job runs, and the inputs of every rank.

Each item runs as one MPI job of RANKS processes; a case names how many of them take
part (1 to 4), and the worker carves a communicator of that size out of the job. The
grader builds every rank's inputs here, from the grading run's secret (`derived`, as for
Part 1's operands), and writes one file per rank (`rank_inputs`): a rank reads its own
file before the submission is imported and removes it, so no rank holds what another
was given. What only one rank may know stays in that rank's file: the minibatch of a
scatter case is in its root's file only, the training set in rank 0's only. Nothing of
this module is staged into the jail: the ranks cannot rebuild the inputs of others.
"""

from __future__ import annotations

import numpy as np

from grader.cases.gemm import derived
from nnkit.mnist import Split

RANKS = 4  # processes per job; cases use communicators of 1..RANKS of them

# item -> the kind of job that grades it (grader/worker/mpi.py): scatter_batch, then
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


def minibatches(rows: int, mode: dict) -> list[int]:
    """The rows of every minibatch one process trains on, in order: `rows` training rows
    in minibatches of mode["batch"], the last one short, for mode["epochs"] epochs."""
    batch = mode["batch"]
    return [min(batch, rows - s) for s in range(0, rows, batch)] * mode["epochs"]


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


def _rng(secret: int, *labels: str | int) -> np.random.Generator:
    return np.random.default_rng(derived(secret, "mpi", *labels))


def scatter_inputs(case: dict, secret: int) -> tuple[np.ndarray, np.ndarray]:
    """The minibatch root holds: float32 images and int64 labels."""
    rng = _rng(secret, "scatter", case["seed"])
    X = rng.normal(size=(case["rows"], case["features"])).astype(np.float32)
    return X, rng.integers(0, 10, size=case["rows"]).astype(np.int64)


def gradient_inputs(case: dict, rank: int, secret: int) -> list[np.ndarray]:
    """One rank's gradients: values of mixed sizes, as real gradients have."""
    rng = _rng(secret, "allreduce", case["seed"], rank)
    return [(rng.normal(size=shape) * 10.0 ** rng.integers(-3, 2)).astype(np.float32)
            for shape in case["shapes"]]


def ring_input(case: dict, rank: int, secret: int) -> np.ndarray:
    rng = _rng(secret, "ring", case["seed"], rank)
    return rng.uniform(-1.0, 1.0, size=case["length"]).astype(np.float32)


def training_data(secret: int) -> Split:
    """The training rows of the training items: the sample (TRAIN_DATA) in an order
    drawn from the secret, every pixel moved by up to 1/64 (a rank that reads the
    sample from the kit learns nothing of what rank 0 holds)."""
    from nnkit import dataset

    train = dataset.load(**TRAIN_DATA).train
    rng = _rng(secret, "train")
    order = rng.permutation(len(train))
    noise = rng.uniform(0.0, 1.0 / 64, size=train.images.shape).astype(np.float32)
    return Split((train.images[order] + noise).astype(np.float32),
                 train.labels[order].astype(np.int64))


def rank_inputs(kind: str, cases: list[dict], secret: int,
                ranks: int = RANKS) -> list[dict[str, np.ndarray]]:
    """What each rank of a job of `kind` is given, one dict per rank: `case-N/X` and
    `case-N/labels` (scatter, its root only), `case-N/g0`... (allreduce), `case-N/buffer`
    (ring) for the cases the rank takes part in; `train/images` and `train/labels` (the
    training kinds, rank 0 only: the others get their rows through scatter_batch)."""
    per_rank: list[dict[str, np.ndarray]] = [{} for _ in range(ranks)]
    if kind in ("train", "average"):
        data = training_data(secret)
        per_rank[0].update({"train/images": data.images, "train/labels": data.labels})
        return per_rank
    for n, case in enumerate(cases):
        if kind == "scatter":
            X, labels = scatter_inputs(case, secret)
            per_rank[case["root"]].update({f"case-{n}/X": X, f"case-{n}/labels": labels})
            continue
        for r in range(case["ranks"]):
            if kind == "allreduce":
                for i, g in enumerate(gradient_inputs(case, r, secret)):
                    per_rank[r][f"case-{n}/g{i}"] = g
            elif kind == "ring":
                per_rank[r][f"case-{n}/buffer"] = ring_input(case, r, secret)
            else:
                raise ValueError(f"unknown MPI job kind {kind!r}")
    return per_rank
