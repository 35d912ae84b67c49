"""The combined item's side of a Part 3 grading job (grader/worker/mpi.py runs it): the
submission's own Part 2 network trained alone and under its Part 3 functions, with its
calls audited as Part 2's training job audits them, and the set-up that loads the
backend before anything submitted is imported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from grader.worker.common import mark
from grader.worker.jobs import MpiJob


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


def device_set_up(job: MpiJob, submission: Path) -> Any:
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
