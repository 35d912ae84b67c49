"""Training benchmark: seconds per epoch on MNIST for the GPU network with each GEMM,
against PyTorch running the same network in the same process.

    python -m nnkit bench-train [--impl solution] [--batches 128,800,3200] [--hidden 1024]
                                [--gemms naive,register,register+thin,...] [--products]

Every implementation trains the same 784-hidden-10 network (sigmoid, softmax with
cross-entropy, L2 1e-4, plain SGD) from the same initial weights on the same data, already
on the GPU. The first epoch (compilation, allocator warm-up) is not counted; the figure is
the fastest of the following --epochs epochs. PyTorch runs in float32 with TF32 off.

The GEMMs are the names of `train --gemm`: the versions of Part 1 (naive ... hierarchical),
version 5 (cuda-c), cuBLAS, and any of the kit's versions with "+thin", where the output
layer's products (a dimension of 10) go to kernels made for thin products
(nnkit.thin_dispatch). The last column is how far each network's final weights are from
those of the cuBLAS run, max |W - W_cublas| / max |W_cublas| over all layers: a wrong
kernel shows there, different rounding stays near float32's 1e-7 times the steps taken.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from nnkit import dataset, network
from nnkit.backend import select
from nnkit.submission import resolve
from nnkit.training import GEMM_CHOICES, DeviceRunner, TrainConfig, make_gemm, train

LR, LAM = 0.1, 1e-4
# Every version of the GEMM, each tiled kit version also with the thin-product kernels.
DEFAULT_GEMMS = ("naive,shared,register,register+thin,hierarchical,hierarchical+thin,"
                 "cuda-c,cuda-c+thin,cublas")
REFERENCE_GEMM = "cublas"


def time_kit(folder: Path, gemm: str, data: dataset.Dataset, config: TrainConfig,
             params: network.Params) -> tuple[float, network.Params]:
    """(the fastest epoch after the first, the parameters after the last)."""
    runner = DeviceRunner(folder, params, config, make_gemm(gemm, folder))
    history = train(runner, data, config, evaluate=False)
    return min(e.seconds for e in history.epochs[1:]), runner.params()


def deviation(params: network.Params, reference: network.Params) -> float:
    """max |W - W_ref| / max |W_ref| over every layer's weights."""
    diff = max(float(np.abs(W.astype(np.float64) - R).max())
               for W, R in zip(params.weights, reference.weights, strict=True))
    return diff / max(float(np.abs(R).max()) for R in reference.weights)


def time_torch(data: dataset.Dataset, config: TrainConfig, params: network.Params) -> float:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device("cuda")
    X = torch.tensor(data.train.images, device=device)
    y = torch.tensor(data.train.labels, device=device)
    layers: list = []
    for i, (W, b) in enumerate(zip(params.weights, params.biases, strict=True)):
        linear = torch.nn.Linear(W.shape[1], W.shape[0])
        with torch.no_grad():
            linear.weight.copy_(torch.tensor(W))
            linear.bias.copy_(torch.tensor(b))
        layers += [linear] + ([torch.nn.Sigmoid()] if i < len(params.weights) - 1 else [])
    model = torch.nn.Sequential(*layers).to(device)
    # weight_decay adds lam * W to every parameter's gradient, biases too: exclude them.
    decay = [p for n, p in model.named_parameters() if n.endswith("weight")]
    rest = [p for n, p in model.named_parameters() if n.endswith("bias")]
    opt = torch.optim.SGD([{"params": decay, "weight_decay": config.lam},
                           {"params": rest, "weight_decay": 0.0}], lr=config.lr)
    n = len(data.train)
    times = []
    for epoch in range(config.epochs):
        order = torch.tensor(dataset.epoch_order(n, config.seed, epoch), device=device)
        Xe, ye = X[order], y[order]
        torch.cuda.synchronize()
        start = time.perf_counter()
        for s in dataset.batch_slices(n, config.batch):
            loss = torch.nn.functional.cross_entropy(model(Xe[s]), ye[s])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return min(times[1:])


def format_table(rows: list[dict], title: str) -> str:
    """The report: one line per batch size and implementation."""
    lines = [title, f"{'batch':>6}  {'implementation':<28} {'s/epoch':>9}  {'x PyTorch':>9}  "
                    f"{'W from cuBLAS':>13}"]
    for r in rows:
        seconds = r["seconds_per_epoch"]
        cells = [f"{seconds:9.4f}" if seconds is not None else f"{'failed':>9}",
                 f"{r['over_pytorch']:9.2f}" if r["over_pytorch"] else f"{'-':>9}",
                 f"{r['from_cublas']:13.1e}" if r["from_cublas"] is not None else f"{'-':>13}"]
        lines.append(f"{r['batch']:>6}  {r['implementation']:<28} {cells[0]}  {cells[1]}  "
                     f"{cells[2]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m nnkit bench-train",
                                description=__doc__.splitlines()[0])
    p.add_argument("--impl", default="solution")
    p.add_argument("--batches", default="128,800,3200")
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--gemms", default=DEFAULT_GEMMS,
                   help=f"comma-separated names of train --gemm (default {DEFAULT_GEMMS})")
    p.add_argument("--epochs", type=int, default=3, help="epochs per run, the first not counted")
    p.add_argument("--data", default=None, help="MNIST folder (default data/mnist)")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--products", action="store_true",
                   help="also time the network's five GEMM products one by one, per GEMM "
                        "(nnkit/bench_products.py)")
    args = p.parse_args(argv)
    gemms = [g.strip() for g in args.gemms.split(",") if g.strip()]
    choices = [g for g in GEMM_CHOICES if g != "host"]  # the host stands in for the simulator
    unknown = [g for g in gemms if g not in choices]
    if unknown:
        p.error(f"--gemms: unknown {unknown}; choose from {', '.join(choices)}")
    if not select().on_gpu:
        print("nnkit bench-train: needs a GPU (in the simulator an epoch takes hours)",
              file=sys.stderr)
        return 2
    if args.epochs < 2:
        p.error("--epochs must be at least 2 (the first one is not counted)")
    data = dataset.load(args.data, 0.1, 0)
    folder = resolve(args.impl)
    rows = []
    for batch in (int(b) for b in args.batches.split(",")):
        config = TrainConfig((args.hidden,), batch, args.epochs, LR, LAM)
        params = network.glorot_uniform(config.sizes(data.features), 0)
        results: dict[str, float | None] = {}
        finals: dict[str, network.Params] = {}
        try:
            results["pytorch"] = time_torch(data, config, params)
        except ImportError:
            print("PyTorch is not installed: no comparison", file=sys.stderr)
        for gemm in gemms:
            name = f"{args.impl}+{gemm}"
            try:
                results[name], finals[gemm] = time_kit(folder, gemm, data, config, params)
            except Exception as err:  # noqa: BLE001 - one failing GEMM leaves the others' rows
                print(f"  batch {batch} {gemm}: failed: {type(err).__name__}: {err}"[:400],
                      file=sys.stderr)
                results[name] = None
                continue
            print(f"  batch {batch} {gemm}: {results[name]:.4f} s", file=sys.stderr)
        base = results.get("pytorch")
        reference = finals.get(REFERENCE_GEMM)
        for name, seconds in results.items():
            gemm = name.removeprefix(f"{args.impl}+")
            rows.append({"batch": batch, "implementation": name, "seconds_per_epoch": seconds,
                         "over_pytorch": seconds / base if base and seconds else None,
                         "from_cublas": deviation(finals[gemm], reference)
                         if reference is not None and gemm in finals else None})
    print(format_table(rows, f"Seconds per epoch, {len(data.train)} images, "
                             f"784-{args.hidden}-10, lr {LR}, lambda {LAM}, "
                             f"{args.epochs} epochs, on {select().describe()}"))
    report: dict = {"epochs": rows}
    if args.products:
        from nnkit.bench_products import format_products, measure

        report["products"] = [r for batch in args.batches.split(",")
                              for r in measure(folder, gemms, int(batch), args.hidden)]
        print()
        print(format_products(report["products"]))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report if args.products else rows, indent=2))
    return 0
