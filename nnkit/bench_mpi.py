"""Scaling benchmark of Part 3: time per epoch, speedup and efficiency over 1, 2, 4 ranks.

    python -m nnkit bench-mpi [--ranks 1,2,4] [--modes data,model] [--hidden 1024]
        [--batch 800] [--epochs 2] [--impl reference | solution --gemm cublas]
        [--json results/bench_mpi.json] [--plot results/bench_mpi.png]

For every mode and rank count, one MPI job (mpiexec next to this interpreter, else on the
PATH) trains the network for --epochs epochs; the figure is the fastest epoch. Modes:
`data` (data parallel, gradients combined by --reduce), `model` (W1 by rows, W2 by columns;
NumPy on every rank), `average` (model averaging every --every minibatches). Each rank
runs with one BLAS thread, so a rank is a core: on CPU ranks the 1-rank run uses one core
and the speedup is that of ranks, not of threads. With --impl solution on a machine with
several GPUs, rank r uses GPU r mod count (one GPU per rank).

After training, each job times one reduce of a buffer as large as the network's
parameters with every strategy (MPI's Allreduce, the kit's ring, the implementation's
ring, butterfly and hopping-ring mixing) and counts the bytes each rank sends.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

MODES = ("data", "model", "average")


def _ranks(text: str) -> list[int]:
    values = [int(x) for x in text.split(",") if x.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected rank counts like 1,2,4")
    return values


def parser() -> argparse.ArgumentParser:
    from nnkit.collectives import STRATEGIES
    from nnkit.training import GEMM_CHOICES

    p = argparse.ArgumentParser(prog="python -m nnkit bench-mpi",
                                description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--ranks", type=_ranks, default=[1, 2, 4])
    p.add_argument("--modes", default="data,model",
                   help="comma-separated subset of " + ", ".join(MODES))
    p.add_argument("--impl", default="reference",
                   help="reference (NumPy), or solution/starter/a folder (its network on the "
                        "ranks' GPUs, its MPI functions)")
    p.add_argument("--gemm", choices=GEMM_CHOICES, default="cublas")
    p.add_argument("--reduce", choices=STRATEGIES, default="allreduce",
                   help="data mode: how gradients are combined; average mode: how models")
    p.add_argument("--every", type=int, default=4, help="average mode: minibatches per average")
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--batch", type=int, default=800)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--lam", type=float, default=1e-4)
    p.add_argument("--data", default=None, help="MNIST folder (default data/mnist) or 'sample'")
    p.add_argument("--limit", type=int, default=None, help="use only the first N images")
    p.add_argument("--pool", type=int, default=1)
    p.add_argument("--repeats", type=int, default=20, help="timed calls per reduce strategy")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per MPI job")
    p.add_argument("--polite", action="store_true",
                   help="MPICH's waiting ranks yield their core instead of spinning (helps "
                        "on small or oversubscribed machines; adds latency per message)")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--plot", type=Path, default=None, help="PNG of time, speedup, efficiency")
    return p


# --------------------------------------------------------------------------------------
# Inside the MPI job


def _time_reduces(comm: Any, size_floats: int, impl_ring: Any, repeats: int) -> dict:
    """Milliseconds per call (median over ranks' max) and bytes sent by rank 0, for one
    reduce of size_floats float32 values with each strategy."""
    from mpi4py import MPI

    from nnkit import collectives

    size = comm.Get_size()
    buffer = np.random.default_rng(comm.Get_rank()).uniform(-1, 1, size_floats).astype(
        np.float32)
    strategies: dict[str, Any] = {
        "MPI Allreduce": lambda c, b: c.Allreduce(MPI.IN_PLACE, b, op=MPI.SUM),
        "ring (kit)": collectives.ring_allreduce,
    }
    if impl_ring is not None:
        strategies["ring (implementation)"] = impl_ring
    if size > 1 and size & (size - 1) == 0:

        def butterfly_full(c: Any, b: np.ndarray) -> None:
            for stage in range(collectives.log2_ranks(size)):
                collectives.butterfly_mix(c, b, stage)

        strategies["butterfly, 1 round"] = lambda c, b: collectives.butterfly_mix(c, b, 0)
        strategies["butterfly, log2 p rounds (exact)"] = butterfly_full
    strategies["hopping ring, 1 round"] = lambda c, b: collectives.hopping_ring_mix(c, b, 0)
    out = {}
    for name, fn in strategies.items():
        times = []
        counted = collectives.CountingComm(comm)
        for _ in range(repeats + 1):
            work = buffer.copy()
            comm.Barrier()
            start = time.perf_counter()
            fn(counted, work)
            times.append(comm.allreduce(time.perf_counter() - start, op=MPI.MAX))
        out[name] = {"ms": 1e3 * float(np.median(times[1:])),
                     "bytes_sent_rank0": comm.bcast(counted.bytes_sent // (repeats + 1), 0)}
    return out


def worker(spec: dict) -> int:
    from mpi4py import MPI

    from nnkit import dataset, network
    from nnkit.mpi_train import (
        DeviceEngine,
        HostEngine,
        bind_device,
        folder_functions,
        kit_functions,
        train_mpi,
    )
    from nnkit.training import TrainConfig, make_gemm

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    config = TrainConfig(**{**spec["config"], "hidden": tuple(spec["config"]["hidden"])})
    data = dataset.load(spec["data"], 0.1, config.seed, spec["pool"], spec["limit"]) \
        if rank == 0 else None
    features = comm.bcast(data.features if rank == 0 else None, root=0)
    n_train = comm.bcast(len(data.train) if rank == 0 else None, root=0)
    params = network.glorot_uniform(config.sizes(features), config.seed)
    impl_ring = None
    where = "NumPy"
    if spec["mode"] == "model":
        from nnkit.model_parallel import train_model_parallel

        _, history = train_model_parallel(comm, data.train if rank == 0 else None, config,
                                          params, strategy=spec["reduce"])
    else:
        if spec["impl"] == "reference":
            engine, fns = HostEngine(params, config), kit_functions()
        else:
            from nnkit.submission import resolve

            folder = resolve(spec["impl"])
            where = bind_device(comm)
            engine = DeviceEngine(folder, params, config, make_gemm(spec["gemm"], folder))
            fns = folder_functions(folder, need_ring=spec["reduce"] == "ring")
            try:
                impl_ring = folder_functions(folder, need_ring=True).ring_allreduce
            except Exception:  # noqa: BLE001 - the reduce table just leaves it out
                impl_ring = None
        history = train_mpi(comm, engine, data.train if rank == 0 else None, config, fns,
                            strategy=spec["reduce"],
                            average_every=spec["every"] if spec["mode"] == "average" else 0)
    sent = comm.gather(history.bytes_per_step, root=0)
    devices = comm.gather(where, root=0)
    n_params = sum(W.size + b.size for W, b in zip(params.weights, params.biases, strict=True))
    reduces = _time_reduces(comm, n_params, impl_ring, spec["repeats"])
    if rank == 0:
        result = {"ranks": size, "epoch_seconds": [e.seconds for e in history.epochs],
                  "steps_per_epoch": history.steps // max(config.epochs, 1),
                  "bytes_per_step": sent, "devices": devices, "parameters": n_params,
                  "train_images": n_train, "features": features, "reduces": reduces}
        Path(spec["out"]).write_text(json.dumps(result))
    return 0


# --------------------------------------------------------------------------------------
# The parent: one MPI job per (mode, ranks), then the table and the plot


def formula_bytes(mode: str, ranks: int, config: dict, features: int, n_params: int,
                  n_train: int) -> tuple[float, float]:
    """Bytes per training step (rank 0, any other rank) by the handout's formulas, for a
    full batch: data parallel, root scatters (p-1)/p of the batch (4d bytes of image and 8
    of label per row), and every rank sends 2(p-1)/p of the 4P bytes of gradients; model
    parallel, every rank sends 2(p-1)/p of the n x C logits. Averages over the epoch's
    batches, as measured."""
    p = ranks
    slices = [min(config["batch"], n_train - s) for s in range(0, n_train, config["batch"])]
    ring = 2 * (p - 1) / p
    if mode == "model":
        per = float(np.mean([ring * 4 * n * 10 for n in slices]))
        return per, per
    reduce = ring * 4 * n_params
    if mode == "average":
        reduce /= config.get("every", 1)
    from nnkit.collectives import split_counts

    scatter = float(np.mean([(n - split_counts(n, p)[0]) * (4 * features + 8) for n in slices]))
    return scatter + reduce, reduce


def run_job(spec: dict, ranks: int, timeout: float, polite: bool = False) -> dict:
    from nnkit.collectives import mpiexec_command, rank_environment

    with tempfile.TemporaryDirectory(prefix="bench-mpi-") as tmp:
        spec_path, out = Path(tmp) / "spec.json", Path(tmp) / "result.json"
        spec_path.write_text(json.dumps({**spec, "out": str(out)}))
        command = [*mpiexec_command(ranks), sys.executable, "-m", "nnkit.bench_mpi",
                   "--worker", str(spec_path)]
        done = subprocess.run(command, env=rank_environment(polite=polite),
                              capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0 or not out.exists():
            raise RuntimeError(f"{ranks} rank(s): the MPI job failed (status "
                               f"{done.returncode}): {done.stderr.strip()[-2000:]}")
        return json.loads(out.read_text())


def table(results: list[dict]) -> str:
    lines = [f"{'mode':<8}{'ranks':>6}{'s/epoch':>10}{'speedup':>9}{'efficiency':>11}"
             f"{'MB/step rank 0':>16}{'MB/step other':>15}{'formula 0 / other':>20}"]
    for r in results:
        other = max(r["bytes_per_step"][1:], default=0.0)
        lines.append(f"{r['mode']:<8}{r['ranks']:>6}{r['seconds']:>10.3f}{r['speedup']:>9.2f}"
                     f"{r['efficiency']:>11.0%}{r['bytes_per_step'][0] / 1e6:>16.3f}"
                     f"{other / 1e6:>15.3f}"
                     f"{r['formula'][0] / 1e6:>11.3f} / {r['formula'][1] / 1e6:.3f}")
    return "\n".join(lines)


def reduce_table(results: list[dict]) -> str:
    rows = [r for r in results if r["mode"] == results[0]["mode"]]
    names = list(dict.fromkeys(n for r in rows for n in r["reduces"]))
    lines = [f"one reduce of {rows[0]['parameters']:,} floats "
             f"({4 * rows[0]['parameters'] / 1e6:.2f} MB): ms per call (bytes sent by rank 0)"]
    lines.append(f"{'strategy':<32}" + "".join(f"{str(r['ranks']) + ' ranks':>22}"
                                               for r in rows))
    for name in names:
        cells = []
        for r in rows:
            cell = r["reduces"].get(name)
            cells.append(f"{cell['ms']:>9.3f} ({cell['bytes_sent_rank0'] / 1e6:.3f} MB)"
                         if cell else "-")
        lines.append(f"{name:<32}" + "".join(f"{c:>22}" for c in cells))
    return "\n".join(lines)


def plot(results: list[dict], path: Path, title: str) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 3.8), layout="constrained")
    axes = fig.subplots(1, 3)
    for mode in dict.fromkeys(r["mode"] for r in results):
        rows = [r for r in results if r["mode"] == mode]
        ranks = [r["ranks"] for r in rows]
        axes[0].plot(ranks, [r["seconds"] for r in rows], "o-", label=mode)
        axes[1].plot(ranks, [r["speedup"] for r in rows], "o-", label=mode)
        axes[2].plot(ranks, [100 * r["efficiency"] for r in rows], "o-", label=mode)
    top = max(r["ranks"] for r in results)
    axes[1].plot([1, top], [1, top], "--", color="#999999", label="ideal")
    for ax, name in zip(axes, ("seconds per epoch", "speedup over 1 rank", "efficiency, %"),
                        strict=True):
        ax.set_xlabel("ranks")
        ax.set_title(name)
        ax.set_xticks(sorted({r["ranks"] for r in results}))
        ax.grid(alpha=0.3)
        ax.legend()
    axes[0].set_ylim(bottom=0)
    fig.suptitle(title.replace("$", r"\$"))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        return worker(json.loads(Path(argv[1]).read_text()))
    args = parser().parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or any(m not in MODES for m in modes):
        print(f"nnkit bench-mpi: --modes: choose from {', '.join(MODES)}", file=sys.stderr)
        return 2
    config = {"hidden": [args.hidden], "batch": args.batch, "epochs": args.epochs,
              "lr": args.lr, "lam": args.lam, "loss": "ce", "seed": 0}
    results = []
    for mode in modes:
        for ranks in args.ranks:
            spec = {"mode": mode, "config": config, "impl": args.impl, "gemm": args.gemm,
                    "reduce": "allreduce" if mode == "model" and args.reduce not in
                    ("allreduce", "ring") else args.reduce, "every": args.every,
                    "data": args.data, "pool": args.pool, "limit": args.limit,
                    "repeats": args.repeats}
            print(f"{mode}, {ranks} rank(s) ...", file=sys.stderr, flush=True)
            try:
                got = run_job(spec, ranks, args.timeout, args.polite)
            except (RuntimeError, FileNotFoundError, subprocess.TimeoutExpired) as err:
                print(f"nnkit bench-mpi: {err}", file=sys.stderr)
                return 1
            got["mode"] = mode
            got["seconds"] = min(got["epoch_seconds"])
            got["formula"] = formula_bytes(mode, ranks, {**config, "every": args.every},
                                           got["features"], got["parameters"],
                                           got["train_images"])
            results.append(got)
    for mode in modes:
        rows = [r for r in results if r["mode"] == mode]
        base = next((r["seconds"] for r in rows if r["ranks"] == 1), None)
        for r in rows:
            r["speedup"] = base / r["seconds"] if base else float("nan")
            r["efficiency"] = r["speedup"] / r["ranks"]
    first = results[0]
    sizes = f"{first['features']}-{args.hidden}-10"
    title = (f"{sizes}, batch {args.batch}, {first['train_images']} images, impl {args.impl}; "
             f"fastest of {args.epochs} epoch(s)" + ("; yielding MPICH" if args.polite else ""))
    print(title)
    print(f"devices of the ranks (largest run): {', '.join(results[-1]['devices'])}")
    print(table(results))
    print()
    print(reduce_table(results))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"title": title, "results": results}, indent=1))
    if args.plot:
        plot(results, args.plot, title)
        print(f"plot: {args.plot}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
