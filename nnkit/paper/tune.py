"""`python -m nnkit tune`: the paper's learning-rate grid on a 5:1 train/validation split.

    python -m nnkit tune [--quick] [--nets 1h,2h] [--loss ce|mse] [--batch 32] [--epochs 3]
        [--impl blas-all] [--grid 0.001,0.002,0.01,0.1,0.5,1.0] [--out results/paper]

The 60,000 training images are split 50,000 / 10,000 (the paper's 5:1), every rate of the
grid trains from the same Glorot weights on the same batches, and the validation accuracy
after each epoch is recorded. The rate with the best final validation accuracy is then
scored once on the test set, as the paper chooses its rate. Any implementation of the
benchmark can train (they compute the same network); BLAS on all cores is the fastest on a
CPU. --quick: 6,000 images (5,000 / 1,000), Net-1h, one epoch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from nnkit import dataset, network
from nnkit.paper import impls, machine, plots
from nnkit.paper.bench import NETS, load_data
from nnkit.training import TrainConfig, train

GRID = [0.001, 0.002, 0.01, 0.1, 0.5, 1.0]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nnkit tune", description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="6,000 images, Net-1h, one epoch: under a minute on two cores")
    p.add_argument("--nets", default=None, help="1h, 2h (default both; quick 1h)")
    p.add_argument("--width", type=int, default=None, help="hidden width instead of 1024")
    p.add_argument("--grid", default=",".join(map(str, GRID)))
    p.add_argument("--loss", choices=network.LOSSES, default="ce")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--epochs", type=int, default=None, help="default 3, quick 1")
    p.add_argument("--lam", type=float, default=1e-4)
    p.add_argument("--impl", default="blas-all", choices=list(impls.IMPLS))
    p.add_argument("--data", default=None, help="MNIST folder (default data/mnist) or 'sample'")
    p.add_argument("--limit", type=int, default=None, help="use only the first N images")
    p.add_argument("--out", type=Path, default=Path("results/paper"))
    return p


def run_grid(impl: impls.Impl, data: dataset.Dataset, net: str, hidden: tuple[int, ...],
             grid: list[float], base: TrainConfig) -> list[dict]:
    rows = []
    for lr in grid:
        config = TrainConfig(hidden, base.batch, base.epochs, lr, base.lam, base.loss, 0)
        params = network.glorot_uniform(config.sizes(data.features), seed=0)
        with impls.threads_for(impl):
            runner = impl.make(params, config)
            history = train(runner, data, config, evaluate=True)
        final = history.epochs[-1]
        rows.append({"net": net, "lr": lr, "val_accuracy": final.val_accuracy,
                     "val_by_epoch": [e.val_accuracy for e in history.epochs],
                     "loss": final.loss, "seconds": sum(e.seconds for e in history.epochs),
                     "test_accuracy": None, "_runner": runner})
        print(f"tune: {net} lr {lr}: validation {100 * final.val_accuracy:.2f}% "
              f"(loss {final.loss:.4f})", file=sys.stderr, flush=True)
    ok = [r for r in rows if np.isfinite(r["loss"])]
    if ok:
        best = max(ok, key=lambda r: r["val_accuracy"])
        predicted = best["_runner"].predict(data.test.images)
        best["test_accuracy"] = float(np.mean(predicted == data.test.labels))
        best["best"] = True
    for r in rows:
        del r["_runner"]
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| net | learning rate | validation accuracy by epoch | final loss | "
             "test accuracy (best rate only) |", "| --- | ---: | --- | ---: | ---: |"]
    for r in rows:
        by_epoch = ", ".join(f"{100 * v:.2f}%" for v in r["val_by_epoch"])
        test = f"**{100 * r['test_accuracy']:.2f}%**" if r.get("best") else ""
        lines.append(f"| {r['net']} | {r['lr']} | {by_epoch} | {r['loss']:.4f} | {test} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    impl = impls.IMPLS[args.impl]
    ok, why = impls.available(impl)
    if not ok:
        print(f"nnkit tune: {args.impl} cannot run here: {why}", file=sys.stderr)
        return 2
    grid = [float(x) for x in args.grid.split(",") if x.strip()]
    nets = (args.nets or ("1h" if args.quick else "1h,2h")).split(",")
    epochs = args.epochs or (1 if args.quick else 3)
    limit = args.limit or (6000 if args.quick else None)
    data = load_data(args.data, limit)
    base = TrainConfig((1,), args.batch, epochs, 0.1, args.lam, args.loss, 0)
    info = machine.describe()
    rows = []
    for net in nets:
        hidden = tuple(args.width or h for h in NETS[net.strip()])
        rows += run_grid(impl, data, f"Net-{net.strip()}", hidden, grid, base)
    describe = machine.summary(machine.finish(info))
    report = (f"# Learning-rate grid\n\n{describe}\n\n{len(data.train)} training / "
              f"{len(data.val)} validation images (5:1), {len(data.test)} test images; "
              f"{args.impl}, loss {args.loss}, batch {args.batch}, λ {args.lam}, "
              f"{epochs} epoch(s) per rate.\n\n{table(rows)}\n")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tune.md").write_text(report)
    (args.out / "tune.json").write_text(json.dumps(rows, indent=1))
    plots.tune_figure(rows, args.out / "tune.png",
                      f"Validation accuracy after {epochs} epoch(s), batch {args.batch}, "
                      f"{args.loss}: {describe}")
    print(report)
    return 0
