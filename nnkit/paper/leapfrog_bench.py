"""Leapfrogging measured against its formula: backward-pass time for k = 1..4 threads.

For each net (depth hidden layers of one width, MNIST-sized input and output) and one
batch of random data, with BLAS on one thread per call:

    f1  the forward pass                         (equation 2, all layers)
    f2  the delta chain: output delta, then      (equation 5)
        every layer's delta below
    f3  every layer's weight and bias gradients  (equations 6, 7)

each the fastest of `repeats` timings, and f = f1 + f2 + f3. Then a forward pass plus
plain backpropagation (nnkit.paper.leapfrog.plain_backward: the reference's backward
without evaluating the loss), and a forward pass plus leapfrogging with k = 1..4 threads in
both variants. The paper predicts the saving on the whole pass as
(1 - 1/k) f3 / f. Its model has k processors; on c < k cores the work cannot finish before
work / c, so next to the formula stands the best these cores allow:

    paper      backward >= max(f2 + f3/k, (k f2 + f3) / min(k, c))   (k chains)
    pipelined  backward >= max(f2 + f3/k, (f2 + f3) / min(k, c))     (one chain)

Timings of all configurations are interleaved repeat by repeat, so a change in the
machine's load touches all of them alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnkit import network
from nnkit.paper.arraynet import delta_down, output_delta, weight_gradient
from nnkit.paper.blas import blas_threads, cores
from nnkit.paper.leapfrog import NUMPY, VARIANTS, Leapfrog, plain_backward
from nnkit.progress import Progress

INPUT, CLASSES = 784, 10


@dataclass(frozen=True)
class Net:
    depth: int  # hidden layers
    width: int

    @property
    def sizes(self) -> list[int]:
        return [INPUT] + [self.width] * self.depth + [CLASSES]

    @property
    def name(self) -> str:
        return f"{self.depth}x{self.width}"


def _best(fn: Callable[[], Any], times: list[float]) -> None:
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)


def _problem(net: Net, batch: int, seed: int = 0) -> tuple[network.Params, np.ndarray,
                                                           np.ndarray]:
    rng = np.random.default_rng(seed)
    params = network.glorot_uniform(net.sizes, seed)
    X = rng.random((batch, INPUT), dtype=np.float32)
    return params, X, rng.integers(0, CLASSES, batch)


def measure_net(net: Net, batch: int, repeats: int, ks: list[int], lam: float = 1e-4,
                bar: Progress | None = None) -> list[dict]:
    """One row per (variant, k), each with f1, f2, f3, plain and leapfrog times."""
    params, X, labels = _problem(net, batch)
    W = params.weights
    L = len(W)
    c = cores()
    times: dict[Any, list[float]] = {}
    runners = {(v, k): Leapfrog(k, v) for v in VARIANTS for k in ks}
    with blas_threads(1):
        acts = network.forward(params, X)

        def chain() -> None:
            _, dZ = output_delta(np, acts[-1], labels, "ce")
            for layer in range(L - 1, 0, -1):
                dZ = delta_down(NUMPY, dZ, W[layer], acts[layer])

        # The weight gradients need deltas: take the true ones, computed once, off the clock.
        deltas = [output_delta(np, acts[-1], labels, "ce")[1]]
        for layer in range(L - 1, 0, -1):
            deltas.append(delta_down(NUMPY, deltas[-1], W[layer], acts[layer]))

        def weights() -> None:
            for depth, dZ in enumerate(deltas):
                weight_gradient(NUMPY, dZ, acts[L - 1 - depth], W[L - 1 - depth], lam)

        jobs: dict[Any, Callable[[], Any]] = {
            "f1": lambda: network.forward(params, X),
            "f2": chain,
            "f3": weights,
            "plain_backward": lambda: plain_backward(params, acts, labels, lam),
        }
        for key, runner in runners.items():
            jobs[key] = lambda r=runner: r.backward(params, acts, labels, lam)
        for job in jobs.values():  # warm-up: thread pools, page faults
            job()
        for _ in range(repeats):
            for key, job in jobs.items():
                _best(job, times.setdefault(key, []))
            if bar:
                bar.update(net.name)
    for runner in runners.values():
        runner.close()
    best = {key: min(v) for key, v in times.items()}
    f1, f2, f3 = best["f1"], best["f2"], best["f3"]
    f = f1 + f2 + f3
    plain = f1 + best["plain_backward"]
    rows = []
    for (variant, k) in runners:
        backward = best[(variant, k)]
        work = (k * f2 + f3) if variant == "paper" else (f2 + f3)
        bound = max(f2 + f3 / k, work / min(k, c))
        rows.append({
            "net": net.name, "depth": net.depth, "width": net.width, "batch": batch,
            "variant": variant, "k": k, "cores": c,
            "f1": f1, "f2": f2, "f3": f3, "f": f,
            "plain_backward": best["plain_backward"], "plain": plain,
            "backward": backward, "pass": f1 + backward,
            "saving": 1.0 - (f1 + backward) / plain,
            "predicted": (1.0 - 1.0 / k) * f3 / f,
            "backward_saving": 1.0 - backward / best["plain_backward"],
            "backward_predicted": (1.0 - 1.0 / k) * f3 / (f2 + f3),
            "bound_saving": 1.0 - (f1 + bound) / f,
        })
    return rows


def run(nets: list[Net], batch: int, repeats: int, ks: list[int]) -> list[dict]:
    rows: list[dict] = []
    with Progress(len(nets) * repeats, "leapfrog") as bar:
        for net in nets:
            rows += measure_net(net, batch, repeats, ks, bar=bar)
    return rows


def table(rows: list[dict]) -> str:
    """Markdown: per net and k, times in ms and savings in %, both variants."""
    lines = ["| net | batch | f1 / f2 / f3 ms | plain pass ms | k | variant | pass ms | "
             "saving | formula (1-1/k)·f3/f | best on these cores |",
             "| --- | ---: | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(
            f"| {r['net']} | {r['batch']} | {1e3 * r['f1']:.1f} / {1e3 * r['f2']:.1f} / "
            f"{1e3 * r['f3']:.1f} | {1e3 * r['plain']:.1f} | {r['k']} | {r['variant']} | "
            f"{1e3 * r['pass']:.1f} | {100 * r['saving']:.1f}% | {100 * r['predicted']:.1f}% | "
            f"{100 * r['bound_saving']:.1f}% |")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# The GPU: the same measurement with k CUDA streams (CuPy), timed with CUDA events


def measure_net_gpu(net: Net, batch: int, repeats: int, ks: list[int],
                    lam: float = 1e-4) -> list[dict]:
    """As measure_net, on the GPU: leapfrogging with k streams (variant "streams")."""
    import cupy

    from nnkit.paper.arraynet import forward, numpy_ops
    from nnkit.paper.leapfrog import CupyStreams, StreamLeapfrog

    ops = numpy_ops(cupy)
    params, X_host, labels_host = _problem(net, batch)
    W = [cupy.asarray(w) for w in params.weights]
    b = [cupy.asarray(v) for v in params.biases]
    X, labels = cupy.asarray(X_host), cupy.asarray(labels_host)
    L = len(W)
    acts = forward(ops, W, b, X)
    deltas = [output_delta(cupy, acts[-1], labels, "ce")[1]]
    for layer in range(L - 1, 0, -1):
        deltas.append(delta_down(ops, deltas[-1], W[layer], acts[layer]))
    api = CupyStreams()
    leapers = {k: StreamLeapfrog(k, cupy, api) for k in ks}

    def chain() -> None:
        _, dZ = output_delta(cupy, acts[-1], labels, "ce")
        for layer in range(L - 1, 0, -1):
            dZ = delta_down(ops, dZ, W[layer], acts[layer])

    def weights() -> None:
        for depth, dZ in enumerate(deltas):
            weight_gradient(ops, dZ, acts[L - 1 - depth], W[L - 1 - depth], lam)

    jobs: dict[Any, Callable[[], Any]] = {"f1": lambda: forward(ops, W, b, X), "f2": chain,
                                          "f3": weights}
    for k, leaper in leapers.items():
        jobs[k] = lambda r=leaper: r.backward(W, acts, labels, lam)
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    times: dict[Any, list[float]] = {}
    for job in jobs.values():
        job()
    cupy.cuda.Device().synchronize()
    for _ in range(repeats):
        for key, job in jobs.items():
            start.record()
            job()
            stop.record()
            stop.synchronize()
            times.setdefault(key, []).append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    best = {key: min(v) for key, v in times.items()}
    f1, f2, f3 = best["f1"], best["f2"], best["f3"]
    f = f1 + f2 + f3
    plain = f1 + best[1]
    return [{"net": net.name, "depth": net.depth, "width": net.width, "batch": batch,
             "variant": "streams", "k": k, "cores": 0, "f1": f1, "f2": f2, "f3": f3, "f": f,
             "plain_backward": best[1], "plain": plain, "backward": best[k],
             "pass": f1 + best[k], "saving": 1.0 - (f1 + best[k]) / plain,
             "predicted": (1.0 - 1.0 / k) * f3 / f,
             "backward_saving": 1.0 - best[k] / best[1],
             "backward_predicted": (1.0 - 1.0 / k) * f3 / (f2 + f3),
             "bound_saving": (1.0 - 1.0 / k) * f3 / f} for k in ks]
