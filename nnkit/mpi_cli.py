"""`mpiexec -n N python -m nnkit train --mpi ...`: the train command's MPI branch.

Every rank runs main_mpi; rank 0 reads the data, prints and saves. The training itself is
nnkit.mpi_train (data parallelism, model averaging), nnkit.model_parallel (--model-parallel)
or nnkit.device_parallel (--resident: the training set and the gradients stay on the GPUs).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from nnkit import network
from nnkit.mpi_train import (
    DeviceEngine,
    HostEngine,
    MpiFunctions,
    bind_device,
    check_strategy,
    folder_functions,
    kit_functions,
    train_mpi,
)
from nnkit.training import EpochRecord, TrainConfig


def _say(comm: Any, text: str, **kwargs: Any) -> None:
    if comm.Get_rank() == 0:
        print(text, **kwargs)


def main_mpi(args: Any, config: TrainConfig) -> int:
    """The train command's --mpi branch: every rank runs this; rank 0 reads the data,
    prints and saves."""
    from mpi4py import MPI

    from nnkit import dataset

    if args.resident:
        return main_resident(args, config)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    problem = None
    data = None
    if rank == 0:
        try:
            if args.limit is not None and args.limit < 1:
                raise ValueError("--limit must be at least 1")
            data = dataset.load(args.data, args.val_fraction, args.seed, args.pool, args.limit)
            if args.model_parallel and len(config.hidden) != 1:
                raise ValueError("model parallelism splits one hidden layer: give one "
                                 "--hidden size")
            if args.model_parallel and args.impl != "reference":
                raise ValueError("model parallelism runs the NumPy network on every rank: "
                                 "use --impl reference")
            check_strategy(args.reduce, 0 if args.model_parallel else args.average_every, size)
            if args.impl != "reference":
                _refuse_slow_simulation(args, config, data)
        except (ValueError, OSError) as err:
            problem = str(err)
    problem = comm.bcast(problem, root=0)
    if problem:
        _say(comm, f"nnkit train --mpi: {problem}", file=sys.stderr)
        return 2
    features = comm.bcast(data.features if rank == 0 else None, root=0)
    params = network.glorot_uniform(config.sizes(features), args.seed) if rank == 0 else None
    params = comm.bcast(params, root=0)  # one copy of the initial weights for every rank
    mode = ("model parallel (W1 by rows, W2 by columns)" if args.model_parallel else
            f"model averaging every {args.average_every} minibatches ({args.reduce})"
            if args.average_every else f"data parallel, gradients combined by {args.reduce}")

    if args.model_parallel:
        from nnkit.model_parallel import train_model_parallel

        where = "NumPy on every rank"
        _say(comm, f"Training {'-'.join(map(str, config.sizes(features)))} on {size} "
             f"rank(s), {mode}, {where}", file=sys.stderr)

        def report_mp(record: EpochRecord) -> None:
            print(f"epoch {record.epoch:3d}: loss {record.loss:.4f}  "
                  f"({record.seconds:.2f} s)", flush=True)

        final, history = train_model_parallel(
            comm, data.train if rank == 0 else None, config, params, strategy=args.reduce,
            on_epoch=report_mp)
        predict = (lambda X: network.predict(final, X.astype(np.float32))) if rank == 0 \
            else None
    else:
        try:
            engine, fns, where = _engine_for(args, params, config, comm)
            ok = True
        except Exception as err:  # noqa: BLE001 - reported, then every rank stops together
            ok, where = False, f"{type(err).__name__}: {err}"
        if not all(comm.allgather(ok)):
            _say(comm, f"nnkit train --mpi: {where}", file=sys.stderr)
            return 2
        n_images = comm.bcast(len(data.train) if rank == 0 else None, root=0)
        _say(comm, f"Training {'-'.join(map(str, config.sizes(features)))} on {n_images} "
             f"images with {size} rank(s), {mode}; {where}", file=sys.stderr)

        evaluate = validation_accuracy(data)

        history = train_mpi(comm, engine, data.train if rank == 0 else None, config, fns,
                            strategy=args.reduce, average_every=args.average_every,
                            evaluate=evaluate, on_epoch=report)
        final = engine.host_params() if rank == 0 else None
        predict = engine.predict if rank == 0 else None
    sent = comm.gather(history.bytes_per_step, root=0)
    if rank != 0:
        return 0
    test_acc = float((predict(data.test.images) == data.test.labels).mean())
    print(f"test accuracy: {test_acc:.2%} on {len(data.test)} images")
    print(f"bytes sent per step, by rank: {', '.join(f'{b:,.0f}' for b in sent)}",
          file=sys.stderr)
    if args.save:
        _save(args, config, final, size, test_acc, history)
    return 0


def _save(args: Any, config: TrainConfig, final: network.Params, size: int, test_acc: float,
          history: Any) -> None:
    import json

    meta = {"config": vars(args) | {"hidden": list(config.hidden), "save": str(args.save)},
            "ranks": size, "test_accuracy": test_acc,
            "history": [record.__dict__ for record in history.epochs]}
    args.save.parent.mkdir(parents=True, exist_ok=True)
    np.savez(args.save, **final.named(), meta=np.array(json.dumps(meta, default=str)))
    print(f"parameters saved to {args.save}", file=sys.stderr)


def _engine_for(args: Any, params: network.Params, config: TrainConfig,
                comm: Any) -> tuple[Any, MpiFunctions, str]:
    """The engine and Part 3 functions that --impl names, with the rank's device bound."""
    if args.impl == "reference":
        return HostEngine(params, config), kit_functions(), "NumPy on every rank, the kit's " \
                                                            "MPI functions"
    from nnkit.submission import resolve
    from nnkit.training import make_gemm

    folder = resolve(args.impl)
    device = bind_device(comm)  # before anything touches CUDA
    engine = DeviceEngine(folder, params, config, make_gemm(args.gemm, folder))
    fns = folder_functions(folder, need_ring=args.reduce == "ring")
    return engine, fns, f"{args.impl}'s network (GEMM '{args.gemm}') and MPI functions; " \
                        f"rank 0 on {device}"


def _refuse_slow_simulation(args: Any, config: TrainConfig, data: Any) -> None:
    """The train command's guard against runs the CUDA simulator would take hours over."""
    from nnkit.backend import select
    from nnkit.sim_cost import SIMULATOR_LIMIT_S, simulator_seconds

    if select().on_gpu or args.force:
        return
    estimate = config.epochs * simulator_seconds(config, data.features, len(data.train),
                                                 args.gemm == "host")
    if estimate > SIMULATOR_LIMIT_S:
        raise ValueError(f"no GPU, and in the CUDA simulator this run would take about "
                         f"{estimate / 3600:.1f} hours per rank. Use --impl reference, a "
                         "small run (--data sample --limit 200 --pool 4 --hidden 16 "
                         "--batch 50 --epochs 2 --gemm host), or --force.")


def main_resident(args: Any, config: TrainConfig) -> int:
    """--mpi --resident: nnkit.device_parallel, one GPU per rank, NCCL between them. Every
    rank reads the data itself (the same files, the same split) and keeps it on its GPU."""
    from mpi4py import MPI

    from nnkit import dataset
    from nnkit.device_parallel import REDUCES, array_module, train_resident
    from nnkit.nccl_transport import NcclTransport, NcclUnavailable

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    problem, data, transport = None, None, None
    try:
        if args.model_parallel or args.average_every:
            raise ValueError("--resident is data parallelism with a gradient all-reduce: "
                             "leave out --model-parallel and --average-every")
        if args.reduce not in REDUCES:
            raise ValueError(f"--resident reduces by {' or '.join(REDUCES)}")
        if args.impl != "reference":
            raise ValueError("--resident runs the kit's own network (CuPy, cuBLAS) on every "
                             "GPU; leave out --impl")
        data = dataset.load(args.data, args.val_fraction, args.seed, args.pool, args.limit)
        transport = NcclTransport(comm)
    except (ValueError, OSError, NcclUnavailable) as err:
        problem = str(err)
    problems = [p for p in comm.allgather(problem) if p]
    if problems:
        _say(comm, f"nnkit train --mpi --resident: {problems[0]}", file=sys.stderr)
        if "host-staged" not in problems[0] and any(w in problems[0] for w in
                                                      ("GPU", "CuPy", "NCCL")):
            _say(comm, "without GPUs, run the host-staged path: nnkit train --mpi "
                 "(leave out --resident)", file=sys.stderr)
        return 2
    params = network.glorot_uniform(config.sizes(data.features), args.seed)
    _say(comm, f"Training {'-'.join(map(str, config.sizes(data.features)))} on "
         f"{len(data.train)} images with {size} rank(s), data parallel and device-resident, "
         f"gradients summed by {args.reduce}; {transport.describe()}", file=sys.stderr)

    evaluate = validation_accuracy(data)

    net, history = train_resident(comm, transport, array_module(transport), data.train.images,
                                  data.train.labels, params, config, reduce=args.reduce,
                                  evaluate=evaluate, on_epoch=report)
    if rank != 0:
        return 0
    test_acc = float((net.predict(data.test.images) == data.test.labels).mean())
    print(f"test accuracy: {test_acc:.2%} on {len(data.test)} images")
    print(f"bytes sent per step by rank 0: {history.bytes_per_step:,.0f}", file=sys.stderr)
    if args.save:
        _save(args, config, net.host_params(), size, test_acc, history)
    return 0


def validation_accuracy(data: Any) -> Callable[[Any], float | None]:
    """A model's accuracy on the validation split (None without one), for the epoch log."""
    def evaluate(model: Any) -> float | None:
        if not len(data.val):
            return None
        return float((model.predict(data.val.images) == data.val.labels).mean())

    return evaluate


def report(record: EpochRecord) -> None:
    """One epoch's line on standard output (rank 0 only)."""
    val = "-" if record.val_accuracy is None else f"{record.val_accuracy:.2%}"
    print(f"epoch {record.epoch:3d}: loss {record.loss:.4f}  validation accuracy "
          f"{val}  ({record.seconds:.2f} s)", flush=True)
