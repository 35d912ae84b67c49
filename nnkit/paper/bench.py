"""`python -m nnkit bench`: the paper's comparison over minibatch sizes, and leapfrogging.

    python -m nnkit bench [sweep|leapfrog|all] [--quick] [--impls naive,threads,...]
        [--nets 1h,2h] [--batches 1,8,...] [--seconds 5] [--out results/paper]

sweep: for Net-1h (784-1024-10) and Net-2h (784-1024-1024-10), every implementation that
can run here (nnkit.paper.impls; the others are listed with the reason) trains from the
same Glorot weights on MNIST's 50,000 training images (the paper's 5:1 split) for a fixed
time per batch size (nnkit.paper.measure). Reported per implementation and batch: seconds
per epoch of 50,000 images, GFLOP/s (operation count in nnkit.paper.flops) and its share
of the device's roofline (a large SGEMM measured in the same run), speedup over its
serial counterpart and over the naive serial version at the same batch size, and the
test accuracy reached within the time budget. Every ratio is taken within one run.

leapfrog: backward-pass time with k = 1..4 threads against the formula (1 - 1/k) f3/f
(nnkit.paper.leapfrog_bench); on a GPU also with k CUDA streams.

Writes bench.md, bench.json, time.png, gflops.png, speedup.png, leapfrog.md,
leapfrog.json and leapfrog.png into --out. --quick: a few batch sizes, one second per
cell, a smaller leapfrog set: a few minutes on two cores.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from nnkit import dataset, network
from nnkit.paper import flops, impls, leapfrog_bench, machine, plots, profile
from nnkit.paper.measure import measure_together
from nnkit.progress import Progress
from nnkit.training import TrainConfig

NETS = {"1h": (1024,), "2h": (1024, 1024)}
FULL_BATCHES = [1, 8, 32, 128, 512, 800, 3200]
QUICK_BATCHES = [1, 128, 3200]
VAL_FRACTION = 1 / 6  # the paper's 5:1 split of the 60,000 training images
LEAPFROG_FULL = [leapfrog_bench.Net(d, w) for w in (1024, 2048, 4096) for d in (4, 8, 12)]
LEAPFROG_QUICK = [leapfrog_bench.Net(4, 1024), leapfrog_bench.Net(8, 1024)]


def load_data(source: str | None, limit: int | None) -> dataset.Dataset:
    """MNIST with the paper's 5:1 split; without a downloaded copy, the bundled sample
    (said on stderr; the report's image counts show it too)."""
    from nnkit.mnist import FILES, default_dir

    if source is None and not all((default_dir() / f).exists() for f in FILES.values()):
        print(f"nnkit: no MNIST in {default_dir()} (run `make data`): using the bundled "
              "600-image sample, so the figures are only a smoke test", file=sys.stderr)
        source = dataset.SAMPLE
    return dataset.load(source, VAL_FRACTION, 0, limit=limit)


def _ints(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected numbers like 1,32,800") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected positive numbers")
    return values


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nnkit bench", description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("what", nargs="?", choices=("sweep", "leapfrog", "all"), default="all")
    p.add_argument("--quick", action="store_true",
                   help=f"batches {QUICK_BATCHES}, 1 s a cell, leapfrog on 4 and 8 layers "
                        "of 1024")
    p.add_argument("--impls", default=None,
                   help="comma-separated subset of " + ", ".join(impls.IMPLS) +
                        " (default: all; those that cannot run here are skipped)")
    p.add_argument("--network", default=None,
                   help="whose Part 2 network the gpu-* implementations run: solution "
                        "(default where the kit has it), starter, or a folder")
    p.add_argument("--nets", default="1h,2h", help="1h, 2h")
    p.add_argument("--width", type=int, default=None,
                   help="hidden width instead of 1024 (small runs and tests)")
    p.add_argument("--batches", type=_ints, default=None,
                   help=f"default {FULL_BATCHES}")
    p.add_argument("--seconds", type=float, default=None,
                   help="training time per implementation and batch (default 5, quick 1)")
    p.add_argument("--rounds", type=int, default=None,
                   help="the budget is cut into rounds, taken in turn by the implementations; "
                        "the fastest round counts (default 3, quick 2)")
    p.add_argument("--lr", type=float, default=0.5,
                   help="the kit's training default (97.97%% test accuracy on Net-1h)")
    p.add_argument("--lam", type=float, default=1e-4)
    p.add_argument("--loss", choices=network.LOSSES, default="ce")
    p.add_argument("--data", default=None, help="MNIST folder (default data/mnist) or 'sample'")
    p.add_argument("--limit", type=int, default=None, help="use only the first N images")
    p.add_argument("--leapfrog-nets", default=None,
                   help="DEPTHxWIDTH,... (default 4,8,12 x 1024,2048,4096; quick 4x1024,8x1024)")
    p.add_argument("--leapfrog-batch", type=int, default=128)
    p.add_argument("--leapfrog-repeats", type=int, default=None, help="default 5, quick 3")
    p.add_argument("--out", type=Path, default=Path("results/paper"))
    return p


# --------------------------------------------------------------------------------------
# The sweep


def choose(names: str | None) -> tuple[list[impls.Impl], list[str]]:
    """(implementations to run, 'name: why not' for those that cannot run here)."""
    wanted = list(impls.IMPLS) if names is None else [n.strip() for n in names.split(",")
                                                     if n.strip()]
    unknown = [n for n in wanted if n not in impls.IMPLS]
    if unknown:
        raise SystemExit(f"nnkit bench: unknown implementation(s) {', '.join(unknown)}; "
                         f"choose from {', '.join(impls.IMPLS)}")
    run, skipped = [], []
    for name in wanted:
        ok, why = impls.available(impls.IMPLS[name])
        (run.append(impls.IMPLS[name]) if ok else skipped.append(f"{name}: {why}"))
    return run, skipped


def add_ratios(rows: list[dict]) -> None:
    """Speedups over the serial counterpart and over naive serial, same net and batch."""
    index = {(r["net"], r["batch"], r["impl"]): r for r in rows}
    for r in rows:
        serial = index.get((r["net"], r["batch"], impls.IMPLS[r["impl"]].serial))
        naive = index.get((r["net"], r["batch"], "naive"))
        r["speedup_serial"] = serial["seconds_per_epoch"] / r["seconds_per_epoch"] \
            if serial else None
        r["speedup_naive"] = naive["seconds_per_epoch"] / r["seconds_per_epoch"] \
            if naive else None


def sweep(args: argparse.Namespace, chosen: list[impls.Impl], peaks: dict[str, float],
          data: dataset.Dataset) -> list[dict]:
    batches = args.batches or (QUICK_BATCHES if args.quick else FULL_BATCHES)
    seconds = args.seconds or (1.0 if args.quick else 5.0)
    rounds = args.rounds or (2 if args.quick else 3)
    nets = [n.strip() for n in args.nets.split(",") if n.strip()]
    n = len(data.train)
    rows = []
    with Progress(len(nets) * len(batches) * len(chosen) * rounds, "bench") as bar:
        for net in nets:
            for batch in batches:
                hidden = tuple(args.width or h for h in NETS[net])
                config = TrainConfig(hidden, batch, 1, args.lr, args.lam, args.loss, seed=0)
                sizes = config.sizes(data.features)
                params = network.glorot_uniform(sizes, seed=0)
                where = f"Net-{net} batch {batch}"
                bar.show(f"{where}: starting")
                found = measure_together(
                    chosen, params, config, data, seconds, rounds,
                    on_round=lambda impl, where=where: bar.update(f"{where} {impl.name}"))
                for impl, m in zip(chosen, found, strict=True):
                    if m is None:
                        continue
                    epoch = m.seconds_per_image * n
                    rate = flops.per_epoch(sizes, n, batch) / epoch / 1e9
                    roof = _roofline(impl, peaks)
                    rows.append({
                        "net": f"Net-{net}", "sizes": sizes, "impl": impl.name,
                        "device": impl.device, "batch": batch, "seconds_per_epoch": epoch,
                        "gflops": rate, "roofline": roof,
                        "of_roofline": rate / peaks[roof] if roof else None,
                        "images": m.images, "steps": m.steps, "rounds": m.rounds,
                        "test_accuracy": m.test_accuracy, "budget_s": seconds})
    add_ratios(rows)
    return rows


def _roofline(impl: impls.Impl, peaks: dict[str, float]) -> str | None:
    """Which measured peak bounds this implementation: its device, one core or all."""
    if impl.device == "gpu":
        return "GPU" if "GPU" in peaks else None
    single = impl.serial == impl.name
    return next((k for k in peaks if k.startswith("CPU") and (k.endswith("1 core") == single)),
                None)


def sweep_table(rows: list[dict]) -> str:
    lines = []
    for net in dict.fromkeys(r["net"] for r in rows):
        mine = [r for r in rows if r["net"] == net]
        lines += [f"### {net} ({'-'.join(map(str, mine[0]['sizes']))})", "",
                  "| implementation | batch | s/epoch | GFLOP/s | of roofline | × serial "
                  "counterpart | × naive serial | test accuracy |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for impl in dict.fromkeys(r["impl"] for r in mine):
            for r in (r for r in mine if r["impl"] == impl):
                ratio = lambda v: f"{v:.2f}" if v else "–"  # noqa: E731
                share = f"{100 * r['of_roofline']:.1f}%" if r["of_roofline"] else "–"
                lines.append(
                    f"| {impl} | {r['batch']} | {r['seconds_per_epoch']:.4g} | "
                    f"{r['gflops']:.3g} | {share} | {ratio(r['speedup_serial'])} | "
                    f"{ratio(r['speedup_naive'])} | {100 * r['test_accuracy']:.1f}% |")
        lines.append("")
    return "\n".join(lines)


def pivot_table(rows: list[dict], key: str, fmt: str) -> str:
    """One Markdown table per net: implementations down, batch sizes across."""
    lines = []
    for net in dict.fromkeys(r["net"] for r in rows):
        mine = [r for r in rows if r["net"] == net]
        batches = sorted({r["batch"] for r in mine})
        cell = {(r["impl"], r["batch"]): r.get(key) for r in mine}
        lines += [f"| {net} | " + " | ".join(f"batch {b}" for b in batches) + " |",
                  "| --- |" + " ---: |" * len(batches)]
        for impl in dict.fromkeys(r["impl"] for r in mine):
            values = [cell.get((impl, b)) for b in batches]
            lines.append(f"| {impl} | " + " | ".join(
                format(v, fmt) if v is not None else "–" for v in values) + " |")
        lines.append("")
    return "\n".join(lines)


def implementation_list(chosen: list[impls.Impl], skipped: list[str]) -> str:
    lines = [f"- `{i.name}`: {i.what} (serial counterpart: `{i.serial}`)" for i in chosen]
    lines += [f"- skipped: {s}" for s in skipped]
    return "\n".join(lines)


def blas_profile(args: argparse.Namespace, data: dataset.Dataset) -> list[dict]:
    """Where the BLAS version's step time goes, at the sweep's largest batch."""
    batch = max(args.batches or (QUICK_BATCHES if args.quick else FULL_BATCHES))
    nets = [n.strip() for n in args.nets.split(",") if n.strip()]
    rows = []
    for net in nets:
        hidden = tuple(args.width or h for h in NETS[net])
        config = TrainConfig(hidden, batch, 1, args.lr, args.lam, args.loss, seed=0)
        for impl in ("blas-1", "blas-all"):
            rows.append({"net": f"Net-{net}", "impl": impl, **profile.products_share(
                impls.IMPLS[impl], config, data, steps=2 if args.quick else 5)})
    return rows


# --------------------------------------------------------------------------------------
# Leapfrogging


def _leapfrog_nets(text: str | None, quick: bool) -> list[leapfrog_bench.Net]:
    if not text:
        return LEAPFROG_QUICK if quick else LEAPFROG_FULL
    nets = []
    for item in text.split(","):
        depth, _, width = item.strip().partition("x")
        nets.append(leapfrog_bench.Net(int(depth), int(width)))
    return nets


def leapfrog(args: argparse.Namespace) -> list[dict]:
    info = machine.describe()
    nets = _leapfrog_nets(args.leapfrog_nets, args.quick)
    repeats = args.leapfrog_repeats or (3 if args.quick else 5)
    ks = [1, 2, 3, 4]
    rows = leapfrog_bench.run(nets, args.leapfrog_batch, repeats, ks)
    if machine.gpu_name():
        for net in nets:
            rows += leapfrog_bench.measure_net_gpu(net, args.leapfrog_batch, repeats, ks)
    else:
        print("leapfrog: no GPU here; the CUDA-streams version is measured on a GPU",
              file=sys.stderr)
    describe = machine.summary(machine.finish(info))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "leapfrog.json").write_text(json.dumps(rows, indent=1))
    (args.out / "leapfrog.md").write_text(
        f"# Leapfrogging: measured against (1 - 1/k) f3/f\n\n{describe}\n\n"
        f"Batch {args.leapfrog_batch}, fastest of {repeats} repeats, BLAS one thread a "
        f"call, savings on forward + backward against plain backpropagation.\n\n"
        f"{leapfrog_bench.table(rows)}\n")
    plots.leapfrog_figure(rows, args.out / "leapfrog.png",
                          f"Leapfrogging, batch {args.leapfrog_batch}: {describe}")
    return rows


# --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    started = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.network:
        impls.use_network(args.network)
    if args.what in ("sweep", "all"):
        chosen, skipped = choose(args.impls)
        for line in skipped:
            print(f"bench: skipped {line}", file=sys.stderr)
        data = load_data(args.data, args.limit)
        info = machine.describe()
        peaks, sources = machine.peaks(args.quick)
        rows = sweep(args, chosen, peaks, data)
        describe = machine.summary(machine.finish(info))
        roofs = "; ".join(f"{k} {v:,.0f} GFLOP/s ({sources[k]})" for k, v in peaks.items())
        amdahl = blas_profile(args, data) if {"blas-1", "blas-all"} <= {i.name for i in chosen} \
            else []
        report = (f"# The paper's comparison\n\n{describe}\n\n"
                  f"Rooflines (largest SGEMM rate measured in this run): {roofs}.\n\n"
                  f"{len(data.train)} training images an epoch, {len(data.test)} test images; "
                  f"loss {args.loss}, learning rate {args.lr}, λ {args.lam}; "
                  f"{rows[0]['budget_s'] if rows else '?'} s of training per cell.\n\n"
                  f"{implementation_list(chosen, skipped)}\n\n"
                  f"## Seconds per epoch\n\n{pivot_table(rows, 'seconds_per_epoch', '.4g')}\n"
                  f"## Speedup over naive serial\n\n{pivot_table(rows, 'speedup_naive', '.1f')}\n"
                  f"## Every figure\n\n{sweep_table(rows)}\n"
                  f"{profile.table(amdahl)}\n")
        (args.out / "bench.md").write_text(report)
        (args.out / "bench.json").write_text(json.dumps(
            {"machine": info, "peaks": peaks, "peak_sources": sources, "skipped": skipped,
             "rows": rows, "blas_profile": amdahl}, indent=1))
        plots.bench_figures(rows, list(dict.fromkeys(r["net"] for r in rows)), peaks, args.out,
                            describe)
        print(report)
    if args.what in ("leapfrog", "all"):
        rows = leapfrog(args)
        print(leapfrog_bench.table(rows))
    print(f"bench: {time.perf_counter() - started:.0f} s; results in {args.out}",
          file=sys.stderr)
    return 0
