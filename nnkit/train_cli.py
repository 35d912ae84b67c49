"""`python -m nnkit train`: train the network on MNIST with one implementation.

    python -m nnkit train --impl reference    (784-1024-10, batch 32, rate 0.5, lambda 1e-5,
                                               20 epochs: 97.97% test accuracy, measured)
    python -m nnkit train --impl solution --gemm register ...      (GPU)
    python -m nnkit train --impl starter --data sample --limit 200 --pool 4 --hidden 16 \\
        --batch 50 --epochs 2 --gemm naive                           (small enough for the
                                                                      CUDA simulator)
    mpiexec -n 4 python -m nnkit train --mpi --impl solution ...    (Part 3: data parallel
                                                                      over 4 MPI ranks)
    mpiexec -n 4 python -m nnkit train --mpi --resident ...         (the same, everything on
                                                                      the GPUs, NCCL)

Prints the training loss and validation accuracy after every epoch, the test accuracy at
the end, and with --save writes the parameters (W1, b1, W2, ...) and the settings to .npz.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from nnkit import dataset, network
from nnkit.backend import select
from nnkit.collectives import STRATEGIES
from nnkit.sim_cost import SIMULATOR_LIMIT_S, simulator_seconds
from nnkit.submission import SubmissionError, resolve
from nnkit.training import (
    GEMM_CHOICES,
    DeviceRunner,
    EpochRecord,
    ReferenceRunner,
    TrainConfig,
    make_gemm,
    train,
)

REFERENCE = "reference"


def _hidden(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected sizes like 1024 or 1024,1024") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: hidden sizes must be positive integers")
    return sizes


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nnkit train", description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--impl", default=REFERENCE,
                   help="reference (NumPy on the CPU), solution, starter, or a folder")
    p.add_argument("--hidden", type=_hidden, default=(1024,), help="hidden sizes, e.g. 1024,1024")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--lr", type=float, default=0.5, help="learning rate")
    p.add_argument("--lam", type=float, default=1e-5, help="L2 regularisation strength")
    p.add_argument("--loss", choices=network.LOSSES, default="ce",
                   help="ce: softmax + cross-entropy; mse: sigmoid + squared error")
    p.add_argument("--seed", type=int, default=0, help="initial weights and batch order")
    p.add_argument("--val-fraction", type=float, default=0.1)
    p.add_argument("--gemm", choices=GEMM_CHOICES, default="register",
                   help="the GEMM under a GPU implementation (host: NumPy, for the "
                        "simulator; VERSION+thin: thin products to kernels made for them)")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                   help="precision of the reference")
    p.add_argument("--data", default=None,
                   help="folder with the MNIST files (default data/mnist), or 'sample'")
    p.add_argument("--limit", type=int, default=None, help="use only the first N images")
    p.add_argument("--pool", type=int, default=1, help="average PxP pixel patches (1, 2, 4)")
    p.add_argument("--save", type=Path, default=None, help="write the parameters here (.npz)")
    p.add_argument("--force", action="store_true",
                   help="run even when the simulator would take very long")
    mpi = p.add_argument_group("MPI (Part 3): mpiexec -n N python -m nnkit train --mpi ...")
    mpi.add_argument("--mpi", action="store_true",
                     help="train across the ranks of the MPI job (data parallel by default)")
    mpi.add_argument("--reduce", choices=STRATEGIES, default="allreduce",
                     help="how ranks combine: allreduce (allreduce_gradients), ring "
                          "(ring_allreduce); butterfly and hopping mix models, with "
                          "--average-every")
    mpi.add_argument("--average-every", type=int, default=0, metavar="K",
                     help="model averaging every K minibatches instead of gradient "
                          "all-reduce (0: off)")
    mpi.add_argument("--resident", action="store_true",
                     help="device-resident data parallelism: the training set and gradients "
                          "stay on the GPUs (one per rank), summed by NCCL; the kit's network")
    mpi.add_argument("--model-parallel", action="store_true",
                     help="split W1 by rows and W2 by columns across the ranks (one hidden "
                          "layer, --impl reference)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.epochs < 1:  # the config allows 0 (an untrained network); a command does not
        print(f"nnkit train: --epochs must be at least 1 (got {args.epochs}): with 0 "
              "nothing would be trained", file=sys.stderr)
        return 2
    config = TrainConfig(args.hidden, args.batch, args.epochs, args.lr, args.lam, args.loss,
                         args.seed)
    if args.mpi:
        try:
            config.validate()
        except ValueError as err:
            print(f"nnkit train: {err}", file=sys.stderr)
            return 2
        from nnkit.mpi_cli import main_mpi

        return main_mpi(args, config)
    try:
        config.validate()
        if args.limit is not None and args.limit < 1:
            raise ValueError("--limit must be at least 1")
        data = dataset.load(args.data, args.val_fraction, args.seed, args.pool, args.limit)
    except (ValueError, OSError) as err:
        print(f"nnkit train: {err}", file=sys.stderr)
        return 2
    params = network.glorot_uniform(config.sizes(data.features), args.seed,
                                    np.float64 if args.dtype == "float64" else np.float32)
    if args.impl == REFERENCE:
        runner = ReferenceRunner(params, config)
        where = f"NumPy on the CPU ({args.dtype})"
    else:
        try:
            folder = resolve(args.impl)
        except SubmissionError as err:
            print(f"nnkit train: {err}", file=sys.stderr)
            return 2
        backend = select()
        estimate = config.epochs * simulator_seconds(config, data.features, len(data.train),
                                                     args.gemm == "host")
        if not backend.on_gpu and estimate > SIMULATOR_LIMIT_S and not args.force:
            print(f"nnkit train: no GPU, and in the CUDA simulator (every CUDA thread is a "
                  f"Python thread) this run would take about {estimate / 3600:.1f} hours.\n"
                  "Options: --impl reference (the NumPy network, fast on the CPU); a small "
                  "run such as --data sample --limit 200 --pool 4 --hidden 16 --batch 50 "
                  "--epochs 2; or --force.", file=sys.stderr)
            return 2
        try:
            runner = DeviceRunner(folder, params, config, make_gemm(args.gemm, folder))
        except (SubmissionError, ValueError) as err:
            print(f"nnkit train: {err}", file=sys.stderr)
            return 2
        where = f"{args.impl} with GEMM '{args.gemm}' on {backend.describe()}"
    print(f"Training {'-'.join(map(str, config.sizes(data.features)))} on "
          f"{len(data.train)} images ({len(data.val)} held out for validation), {where}",
          file=sys.stderr)

    def report(record: EpochRecord) -> None:
        val = "-" if record.val_accuracy is None else f"{record.val_accuracy:.2%}"
        print(f"epoch {record.epoch:3d}: loss {record.loss:.4f}  validation accuracy {val}  "
              f"({record.seconds:.2f} s)", flush=True)

    history = train(runner, data, config, show_progress=True, on_epoch=report)
    final = runner.params()
    test_acc = float((runner.predict(data.test.images) == data.test.labels).mean())
    print(f"test accuracy: {test_acc:.2%} on {len(data.test)} images")
    if args.save:
        meta = {"config": vars(args) | {"hidden": list(config.hidden), "save": str(args.save)},
                "test_accuracy": test_acc, "history": history.to_json()}
        args.save.parent.mkdir(parents=True, exist_ok=True)
        np.savez(args.save, **final.named(), meta=np.array(json.dumps(meta, default=str)))
        print(f"parameters saved to {args.save}", file=sys.stderr)
    return 0
