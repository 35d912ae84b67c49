"""The combined item (mpi.combined): what its MPI job trains, and the inputs of its ranks.

The job has two ranks and two cases, run one after the other:

- case 0, one process: rank 0 trains the submission's Part 2 network alone with the
  kit's training loop (no Part 3 code at all);
- case 1, two ranks: both ranks train the submission's Part 2 network under its Part 3
  functions (scatter_batch, allreduce_gradients) with the kit's data-parallel loop.

Both start from the same seeded parameters and see the same batches in the same order.
The training rows are drawn from the grading run's secret (reordered, every pixel moved
by up to 1/64, as for Part 3's other training items) and given to rank 0 alone: rank 1
gets its rows through the submission's scatter_batch or not at all.

Matrix products go through the trusted GEMM (cuBLAS on a GPU, NumPy in the simulator), as
in Part 2's grading: a Part 1 bug costs nothing here.
"""

from __future__ import annotations

import numpy as np

from grader.cases.gemm import derived
from grader.cases.mpi import minibatches
from nnkit import dataset
from nnkit.mnist import Split

KIND = "combined"
ITEM = "mpi.combined"
RANKS = 2  # processes of the job (the case of one process uses the first)

# The simulator's reduced configuration: 39 sample images pooled to 7x7, 49-8-10,
# batch 19, one epoch: 3 steps, the rows split 10/9 over the two ranks twice and 1/0
# once (the last batch holds one image), a few seconds of CPU per rank. Batches of more
# than 8 rows on each rank reach past a 8-row block of a reduction kernel.
SIM_DATA = {"source": dataset.SAMPLE, "val_fraction": 0.1, "seed": 0, "pool": 4, "limit": 90,
            "rows": 39}
SIM_MODE = {"hidden": [8], "batch": 19, "epochs": 1, "lr": 0.5, "lam": 1e-3, "loss": "ce",
            "seed": 0}
# On a GPU with MNIST: CME 213's grading network (784-100-10, batch 800, lambda 1e-4) on
# 4,001 images for 2 epochs: 12 steps, 400/400 rows and a last batch of one image (1/0).
GPU_DATA = {"val_fraction": 0.1, "seed": 0, "pool": 1, "limit": None, "rows": 4001}
GPU_MODE = {"hidden": [100], "batch": 800, "epochs": 2, "lr": 0.001, "lam": 1e-4,
            "loss": "ce", "seed": 0}


def plan(on_gpu: bool, mnist: str | None) -> dict:
    """The job's configuration: data (arguments of nnkit.dataset.load, and how many
    training rows to keep), mode (TrainConfig fields) and a description for the feedback.
    mnist: MNIST's folder, or None where it is missing (the reduced configuration then
    runs on the GPU too)."""
    if on_gpu and mnist:
        return {"data": {**GPU_DATA, "source": mnist}, "mode": GPU_MODE,
                "description": "MNIST, 4,001 images, 784-100-10, batch 800, rate 0.001, "
                               "lambda 1e-4, 2 epochs (12 steps)"}
    return {"data": SIM_DATA, "mode": SIM_MODE,
            "description": "reduced configuration: 39 sample images pooled to 7x7, 49-8-10, "
                           "batch 19, rate 0.5, lambda 1e-3, 1 epoch (3 steps)"}


# Calls of each network function recorded in full and replayed on every rank of a case:
# the first (a network that behaves at its first call only is caught), the last (right
# parameters put in place at the end of a wrong training) and one drawn from the run's
# secret, as Part 2's training job does.
AUDITED_CALLS = 3


def cases(job_plan: dict, secret: int = 0) -> list[dict]:
    """Case 0: one process; case 1: two ranks (both: the same data and mode), each with
    the numbers of the calls its ranks record in full (`audit_calls`)."""
    total = len(steps(job_plan))
    out = []
    for p in (1, RANKS):
        rng = np.random.default_rng(derived(secret, "mpi", KIND, "audit", p))
        drawn = rng.integers(0, max(total, 1), AUDITED_CALLS - 2)
        out.append({"ranks": p, "mode": job_plan["mode"],
                    "audit_calls": sorted({0, max(total - 1, 0), *(int(x) for x in drawn)})})
    return out


def label(case: dict) -> str:
    return "your network in one process" if case["ranks"] == 1 else \
        f"your network on {case['ranks']} ranks under your Part 3 functions"


def training_data(job_plan: dict, secret: int) -> Split:
    """The training rows of the job, in an order drawn from the secret and perturbed by
    it (a rank that loads the data from the kit learns nothing of what rank 0 holds)."""
    spec = {k: v for k, v in job_plan["data"].items() if k != "rows"}
    train = dataset.load(**spec).train
    rng = np.random.default_rng(derived(secret, "mpi", KIND))
    order = rng.permutation(len(train))[:job_plan["data"]["rows"]]
    noise = rng.uniform(0.0, 1.0 / 64, size=(len(order), train.images.shape[1]))
    return Split((train.images[order] + noise.astype(np.float32)).astype(np.float32),
                 train.labels[order].astype(np.int64))


def rank_inputs(data: Split, ranks: int = RANKS) -> list[dict[str, np.ndarray]]:
    """Rank 0 holds the training rows; the others are given nothing."""
    return [{"train/images": data.images, "train/labels": data.labels}] + \
        [{} for _ in range(ranks - 1)]


def steps(job_plan: dict) -> list[int]:
    """The rows of every minibatch of the training, in order (for the tolerance)."""
    return minibatches(job_plan["data"]["rows"], job_plan["mode"])
