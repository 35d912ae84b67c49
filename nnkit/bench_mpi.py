"""Scaling benchmark of Part 3: time per epoch, speedup and efficiency over 1, 2, 4 ranks.

    python -m nnkit bench-mpi [--ranks 1,2,4] [--modes data,model] [--hidden 1024]
        [--batch 800] [--epochs 2] [--impl reference | solution --gemm cublas]
        [--json results/bench_mpi.json] [--plot results/bench_mpi.png]

For every mode and rank count, one MPI job (mpiexec next to this interpreter, else on the
PATH) trains the network for --epochs epochs; the figure is the fastest epoch. Modes:
`data` (data parallel, gradients combined by --reduce), `model` (W1 by rows, W2 by columns;
NumPy on every rank), `average` (model averaging every --every minibatches), `resident`
(nnkit.device_parallel: training set and gradients on the GPUs, NCCL's all-reduce or, with
--reduce ring, the ring over NCCL send/recv; per-layer overlap unless --no-overlap; one GPU
per rank, so rank counts above the GPUs of the machine are skipped and said so; without a
GPU, NumPy over MPI as a stand-in). The resident mode also profiles one more epoch with
every phase waited for, to show where a step's time goes (compute, idle, reduce). Each rank
runs with one BLAS thread, so a rank is a core: on CPU ranks the 1-rank run uses one core
and the speedup is that of ranks, not of threads. With --impl solution on a machine with
several GPUs, rank r uses GPU r mod count (one GPU per rank).

After training, each job times one reduce of a buffer as large as the network's
parameters with every strategy (MPI's Allreduce, the kit's ring, the implementation's
ring, butterfly and hopping-ring mixing) and counts the bytes each rank sends.

(Over 400 lines: one command whose MPI workers, tables and plots share its result
records; the workers come first, then the tables, then the plots.)
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

MODES = ("data", "model", "average", "resident")


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
    p.add_argument("--no-overlap", action="store_true",
                   help="resident mode: reduce the whole gradient after backward")
    p.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto",
                   help="resident mode: GPUs with NCCL, or the NumPy/MPI stand-in (auto: GPUs "
                        "when there are any)")
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--batch", type=int, default=800)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--lam", type=float, default=1e-4)
    p.add_argument("--data", default=None,
                   help="MNIST folder (default data/mnist), 'sample', or (resident mode) "
                        "'random': random images of MNIST's shape, for timing only")
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


def _time_device_reduces(comm: Any, transport: Any, xp: Any, size_floats: int,
                         repeats: int) -> dict:
    """Milliseconds per call (median of the ranks' max) and bytes rank 0 sends, for one sum
    of size_floats float32 values on the devices: NCCL's all-reduce and the NCCL ring."""
    from mpi4py import MPI

    from nnkit.device_reduce import chunk_bounds, ring_allreduce, ring_bytes

    p = comm.Get_size()
    buffer = xp.asarray(np.random.default_rng(comm.Get_rank()).uniform(
        -1, 1, size_floats).astype(np.float32))
    scratch = xp.empty(chunk_bounds(size_floats, p)[1] + 1, xp.float32)
    link = "NCCL" if type(transport).__name__ == "NcclTransport" else "MPI stand-in"
    strategies = {f"device all-reduce ({link})": (transport.allreduce,
                                                  int(2 * (p - 1) / p * 4 * size_floats)),
                  f"device ring ({link} send/recv)": (
                      lambda b: ring_allreduce(transport, b, scratch),
                      ring_bytes(size_floats, p))}
    out = {}
    for name, (fn, sent) in strategies.items():
        times = []
        for _ in range(repeats + 1):
            work = buffer.copy()
            transport.synchronize()
            comm.Barrier()
            start = time.perf_counter()
            fn(work)
            transport.synchronize()
            times.append(comm.allreduce(time.perf_counter() - start, op=MPI.MAX))
        out[name] = {"ms": 1e3 * float(np.median(times[1:])), "bytes_sent_rank0": sent}
    return out


def _random_data(limit: int | None) -> Any:
    """Random images of MNIST's shape (54,000 training rows of 784 pixels), the same on
    every rank: for timing where the MNIST files are not at hand (--data random)."""
    from nnkit.dataset import Dataset
    from nnkit.mnist import Split

    n = min(limit or 54_000, 54_000)
    rng = np.random.default_rng(0)
    train = Split(rng.uniform(0, 1, (n, 784)).astype(np.float32),
                  rng.integers(0, 10, n).astype(np.int64))
    empty = Split(np.zeros((0, 784), np.float32), np.zeros(0, np.int64))
    return Dataset(train, empty, empty)


def resident_worker(spec: dict) -> int:
    """One MPI job of the resident mode: every rank reads the data itself (the same files,
    the same split) and keeps it on its device."""
    from mpi4py import MPI

    from nnkit import dataset, network
    from nnkit.device_parallel import array_module, make_transport, train_resident
    from nnkit.training import TrainConfig

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    config = TrainConfig(**{**spec["config"], "hidden": tuple(spec["config"]["hidden"])})
    data = _random_data(spec["limit"]) if spec["data"] == "random" else \
        dataset.load(spec["data"], 0.1, config.seed, spec["pool"], spec["limit"])
    params = network.glorot_uniform(config.sizes(data.features), config.seed)
    transport = make_transport(comm, spec["device"])
    xp = array_module(transport)
    _, history = train_resident(comm, transport, xp, data.train.images, data.train.labels,
                                params, config, reduce=spec["reduce"],
                                overlap=spec["overlap"], profile=True)
    sent = comm.gather(history.bytes_per_step, root=0)
    profiles = comm.gather(history.profile, root=0)
    devices = comm.gather(getattr(transport, "device", "CPU"), root=0)
    n_params = sum(W.size + b.size for W, b in zip(params.weights, params.biases, strict=True))
    reduces = _time_device_reduces(comm, transport, xp, n_params, spec["repeats"])
    if rank == 0:
        # Per phase, the mean over the ranks (idle is what the fastest ranks wait).
        profile = {k: float(np.mean([p[k] for p in profiles])) for k in profiles[0]}
        result = {"ranks": comm.Get_size(), "epoch_seconds": [e.seconds for e in
                                                              history.epochs],
                  "steps_per_epoch": history.steps // max(config.epochs, 1),
                  "bytes_per_step": sent, "devices": devices, "parameters": n_params,
                  "train_images": len(data.train), "features": data.features,
                  "reduces": reduces, "profile": profile, "link": transport.describe()}
        Path(spec["out"]).write_text(json.dumps(result))
    return 0


def worker(spec: dict) -> int:
    if spec["mode"] == "resident":
        return resident_worker(spec)
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
    if mode == "resident":  # no scatter: every rank reads its rows on its own device
        return reduce, reduce
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


def _resident_device(choice: str) -> tuple[str, int, str]:
    """(gpu or cpu, GPUs on this machine, a sentence for the report) for the resident mode."""
    from nnkit.backend import device_count, probe_gpu

    count, why_not = device_count()
    usable, detail = probe_gpu()
    if choice == "cpu" or (choice == "auto" and not usable):
        reason = "" if choice == "cpu" else f" ({detail})"
        return "cpu", count, f"NumPy on CPU ranks, MPI in place of NCCL{reason}"
    if not usable:
        raise SystemExit(f"nnkit bench-mpi: --device gpu, but {detail or why_not}")
    from nnkit.nccl_transport import NcclUnavailable, load_nccl

    try:
        version = load_nccl().get_version()  # before any job: say what is missing once
    except NcclUnavailable as err:
        raise SystemExit(f"nnkit bench-mpi: resident mode on GPUs: {err}") from None
    return "gpu", count, f"one GPU per rank ({count} on this machine: {detail}), NCCL {version}"


def step_table(results: list[dict]) -> str:
    """Where a step's time goes, from the profiled epoch (phases waited for one by one),
    beside the step of the real (overlapped) epochs."""
    lines = ["where a step's time goes, ms (profiled epoch, every phase waited for; "
             "idle: waiting for the slowest rank)",
             f"{'mode':<10}{'ranks':>6}{'step':>9}{'compute':>9}{'idle':>8}{'reduce':>8}"
             f"{'profiled':>10}{'reduce %':>10}"]
    for r in results:
        prof = r.get("profile")
        if not prof:
            continue
        step = 1e3 * r["seconds"] / max(r["steps_per_epoch"], 1)
        lines.append(f"{r['mode']:<10}{r['ranks']:>6}{step:>9.3f}{prof['compute']:>9.3f}"
                     f"{prof['idle']:>8.3f}{prof['reduce']:>8.3f}{prof['step']:>10.3f}"
                     f"{prof['reduce'] / max(prof['step'], 1e-12):>10.0%}")
    return "\n".join(lines)


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
    lines.append(f"{'strategy':<38}" + "".join(f"{str(r['ranks']) + ' ranks':>22}"
                                               for r in rows))
    for name in names:
        cells = []
        for r in rows:
            cell = r["reduces"].get(name)
            cells.append(f"{cell['ms']:>9.3f} ({cell['bytes_sent_rank0'] / 1e6:.3f} MB)"
                         if cell else "-")
        lines.append(f"{name:<38}" + "".join(f"{c:>22}" for c in cells))
    return "\n".join(lines)


def _plot_steps(ax: Any, rows: list[dict]) -> None:
    """Stacked bars: a profiled step's compute, idle and reduce, per run."""
    labels = [f"{r['mode']}\n{r['ranks']} rank(s)" for r in rows]
    bottom = np.zeros(len(rows))
    for phase, colour in (("compute", "#4477aa"), ("idle", "#bbbbbb"), ("reduce", "#ee6677")):
        values = np.array([r["profile"][phase] for r in rows])
        ax.bar(labels, values, bottom=bottom, color=colour, label=phase)
        bottom += values
    ax.set_title("a profiled step, ms")
    ax.grid(alpha=0.3, axis="y")
    ax.legend()


def plot(results: list[dict], path: Path, title: str) -> None:
    from matplotlib.figure import Figure

    profiled = [r for r in results if r.get("profile")]
    fig = Figure(figsize=(16 if profiled else 12, 3.8), layout="constrained")
    axes = fig.subplots(1, 4 if profiled else 3)
    for mode in dict.fromkeys(r["mode"] for r in results):
        rows = [r for r in results if r["mode"] == mode]
        ranks = [r["ranks"] for r in rows]
        axes[0].plot(ranks, [r["seconds"] for r in rows], "o-", label=mode)
        axes[1].plot(ranks, [r["speedup"] for r in rows], "o-", label=mode)
        axes[2].plot(ranks, [100 * r["efficiency"] for r in rows], "o-", label=mode)
    top = max(r["ranks"] for r in results)
    axes[1].plot([1, top], [1, top], "--", color="#999999", label="ideal")
    if profiled:
        _plot_steps(axes[3], profiled)
    for ax, name in zip(axes, ("seconds per epoch", "speedup over 1 rank", "efficiency, %"),
                        strict=False):
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
    device, gpus, why = _resident_device(args.device) if "resident" in modes else ("", 0, "")
    results, skipped = [], []
    for mode in modes:
        for ranks in args.ranks:
            if mode == "resident" and device == "gpu" and ranks > gpus:
                skipped.append(f"resident, {ranks} ranks: skipped, this machine has {gpus} "
                               "GPU(s) and NCCL needs one GPU per rank")
                print(skipped[-1], file=sys.stderr)
                continue
            spec = {"mode": mode, "config": config, "impl": args.impl, "gemm": args.gemm,
                    "reduce": "allreduce" if mode == "model" and args.reduce not in
                    ("allreduce", "ring") else args.reduce, "every": args.every,
                    "data": args.data, "pool": args.pool, "limit": args.limit,
                    "repeats": args.repeats, "device": device,
                    "overlap": not args.no_overlap}
            if mode == "resident" and spec["reduce"] not in ("allreduce", "ring"):
                print("nnkit bench-mpi: the resident mode reduces by allreduce or ring",
                      file=sys.stderr)
                return 2
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
    if not results:
        print("nnkit bench-mpi: nothing ran", file=sys.stderr)
        return 1
    for mode in modes:
        rows = [r for r in results if r["mode"] == mode]
        base = next((r["seconds"] for r in rows if r["ranks"] == 1), None)
        for r in rows:
            r["speedup"] = base / r["seconds"] if base else float("nan")
            r["efficiency"] = r["speedup"] / r["ranks"]
    first = results[0]
    sizes = f"{first['features']}-{args.hidden}-10"
    network = "the kit's network (CuPy/NumPy)" if modes == ["resident"] else f"impl {args.impl}"
    images = "random images" if args.data == "random" else "images"
    title = (f"{sizes}, batch {args.batch}, {first['train_images']} {images}, {network}; "
             f"fastest of {args.epochs} epoch(s)" + ("; yielding MPICH" if args.polite else ""))
    print(title)
    print(f"devices of the ranks (largest run): {', '.join(results[-1]['devices'])}")
    if "resident" in modes:
        print(f"resident mode: {why}" + ("" if args.no_overlap else
                                          ", per-layer overlap of reduce and backward"))
    print(table(results))
    for line in skipped:
        print(line)
    if any("profile" in r for r in results):
        print()
        print(step_table(results))
    for mode in dict.fromkeys(r["mode"] for r in results):
        print()
        print(reduce_table([r for r in results if r["mode"] == mode]))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"title": title, "results": results,
                                         "skipped": skipped}, indent=1))
    if args.plot:
        plot(results, args.plot, title)
        print(f"plot: {args.plot}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
