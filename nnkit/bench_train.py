"""Training benchmark: seconds per epoch on MNIST for the GPU network with each GEMM,
against PyTorch running the same network in the same process.

    python -m nnkit bench-train [--impl solution] [--batches 128,800,3200] [--hidden 1024]

Every implementation trains the same 784-hidden-10 network (sigmoid, softmax with
cross-entropy, L2 1e-4, plain SGD) from the same initial weights on the same data, already
on the GPU. The first epoch (compilation, allocator warm-up) is not counted; the figure is
the fastest of the following --epochs epochs. PyTorch runs in float32 with TF32 off.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from nnkit import dataset, network
from nnkit.backend import select
from nnkit.gemm import KERNELS
from nnkit.submission import resolve
from nnkit.training import DeviceRunner, TrainConfig, make_gemm, train

LR, LAM = 0.1, 1e-4


def time_kit(folder: Path, gemm: str, data: dataset.Dataset, config: TrainConfig,
             params: network.Params) -> float:
    runner = DeviceRunner(folder, params, config, make_gemm(gemm, folder))
    history = train(runner, data, config, evaluate=False)
    return min(e.seconds for e in history.epochs[1:])


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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m nnkit bench-train",
                                description=__doc__.splitlines()[0])
    p.add_argument("--impl", default="solution")
    p.add_argument("--batches", default="128,800,3200")
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--gemms", default=",".join([*KERNELS, "cublas"]))
    p.add_argument("--epochs", type=int, default=3, help="epochs per run, the first not counted")
    p.add_argument("--data", default=None, help="MNIST folder (default data/mnist)")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
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
        results = {}
        try:
            results["pytorch"] = time_torch(data, config, params)
        except ImportError:
            print("PyTorch is not installed: no comparison", file=sys.stderr)
        for gemm in args.gemms.split(","):
            results[f"{args.impl}+{gemm}"] = time_kit(folder, gemm, data, config, params)
            print(f"  batch {batch} {gemm}: {results[f'{args.impl}+{gemm}']:.4f} s",
                  file=sys.stderr)
        base = results.get("pytorch")
        for name, seconds in results.items():
            rows.append({"batch": batch, "implementation": name, "seconds_per_epoch": seconds,
                         "over_pytorch": seconds / base if base else None})
    print(f"Seconds per epoch, {len(data.train)} images, 784-{args.hidden}-10, lr {LR}, "
          f"lambda {LAM}, on {select().describe()}")
    print(f"{'batch':>6}  {'implementation':<20} {'s/epoch':>9}  {'x PyTorch':>9}")
    for r in rows:
        ratio = f"{r['over_pytorch']:9.2f}" if r["over_pytorch"] else f"{'-':>9}"
        print(f"{r['batch']:>6}  {r['implementation']:<20} {r['seconds_per_epoch']:9.4f}  {ratio}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2))
    return 0
