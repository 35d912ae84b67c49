"""`python -m nnkit COMMAND`: the kit's command line.

    info        which device kernels would run on, and the package versions
    data        fetch MNIST into ./data/mnist (or $NNKIT_DATA), checksums verified
    bench-gemm  GEMM kernels against cuBLAS: a table of GFLOP/s
    train       train the network on MNIST (reference, solution, starter or a folder)
    bench-train seconds per epoch: the GPU network with each GEMM against PyTorch
    bench-mpi   MPI scaling: time per epoch, speedup and bytes sent over 1, 2, 4 ranks
    bench       the paper's comparison: serial, threads, BLAS, GPU over batch sizes;
                leapfrogging against its formula
    tune        the paper's learning-rate grid on a 5:1 train/validation split
    mpirun      -n N -- COMMAND: COMMAND on N local MPI ranks with the kit's mpiexec
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def cmd_info(argv: list[str]) -> int:
    argparse.ArgumentParser(prog="python -m nnkit info").parse_args(argv)
    from importlib.metadata import PackageNotFoundError, version

    from nnkit.backend import select

    print(f"device: {select().describe()}")
    for package in ("numpy", "numba", "numba-cuda", "cupy-cuda13x", "cupy-cuda12x", "mpi4py"):
        try:
            print(f"{package}: {version(package)}")
        except PackageNotFoundError:
            pass
    return 0


def cmd_data(argv: list[str]) -> int:
    import os

    from nnkit.fetch import FetchError, fetch_all
    from nnkit.mnist import default_dir

    parser = argparse.ArgumentParser(prog="python -m nnkit data",
                                     description="fetch MNIST, verifying SHA-256")
    parser.add_argument("--dest", type=Path, default=None,
                        help="default: $NNKIT_DATA or data/mnist")
    parser.add_argument("--source", default=os.environ.get("MNIST_SRC") or None,
                        help="a folder or base URL holding the four .gz files (default: "
                             "$MNIST_SRC, else the public mirrors)")
    args = parser.parse_args(argv)
    dest = args.dest or default_dir()
    try:
        fetch_all(dest, args.source)
    except FetchError as err:
        print(f"nnkit data: {err}", file=sys.stderr)
        return 1
    print(f"MNIST is in {dest}", file=sys.stderr)
    return 0


def cmd_bench_gemm(argv: list[str]) -> int:
    from nnkit.bench_gemm import main

    return main(argv)


def cmd_train(argv: list[str]) -> int:
    from nnkit.train_cli import main

    return main(argv)


def cmd_bench_train(argv: list[str]) -> int:
    from nnkit.bench_train import main

    return main(argv)


def cmd_bench_mpi(argv: list[str]) -> int:
    from nnkit.bench_mpi import main

    return main(argv)


# Two thread pools share the cores in the blas-fused implementation: OpenBLAS's, whose
# idle threads spin for 2^28 cycles after each product by default, and numba's. Spinning
# BLAS threads starve numba's (measured on 16 cores: 0.05x instead of 5-7x). OpenBLAS reads
# its spin time when NumPy loads it and numba its threading layer at the first parallel
# loop, so both are set here, before either is imported; the user's own values win.
BENCH_THREADING = {"OPENBLAS_THREAD_TIMEOUT": "4", "NUMBA_THREADING_LAYER": "workqueue"}


def cmd_bench(argv: list[str]) -> int:
    import os

    for name, value in BENCH_THREADING.items():
        os.environ.setdefault(name, value)
    from nnkit.paper.bench import main

    return main(argv)


def cmd_tune(argv: list[str]) -> int:
    from nnkit.paper.tune import main

    return main(argv)


def cmd_mpirun(argv: list[str]) -> int:
    from nnkit.mpirun import main

    return main(argv)


COMMANDS = {"info": cmd_info, "data": cmd_data, "bench-gemm": cmd_bench_gemm,
            "train": cmd_train, "bench-train": cmd_bench_train, "bench-mpi": cmd_bench_mpi,
            "bench": cmd_bench, "tune": cmd_tune, "mpirun": cmd_mpirun}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print(__doc__, file=sys.stderr)
        if argv and argv[0] not in ("-h", "--help"):
            print(f"unknown command {argv[0]!r}", file=sys.stderr)
            return 2
        return 0 if argv else 2
    from nnkit.backend import BackendError

    try:
        return COMMANDS[argv[0]](argv[1:])
    except BackendError as err:
        print(f"nnkit: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
