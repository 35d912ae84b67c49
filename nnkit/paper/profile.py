"""Where a BLAS training step spends its time: in the matrix products or elsewhere.

BLAS parallelises the products only. The rest of a step (sigmoids, the softmax, the
elementwise products of the deltas, the L2 term and the update) is NumPy on one core, so
by Amdahl's law a share s of the step outside the products caps the speedup on c cores at
1 / (s + (1 - s) / c). The step is the reference's, timed through nnkit.paper.arraynet with
NumPy's own products wrapped in a clock.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from nnkit import network
from nnkit.dataset import Dataset
from nnkit.paper.arraynet import ArrayRunner, Ops
from nnkit.paper.blas import cores
from nnkit.paper.impls import Impl, threads_for
from nnkit.training import TrainConfig


class _Clocked:
    """NumPy's products, adding the seconds they take to `spent`."""

    def __init__(self) -> None:
        self.spent = 0.0

    def wrap(self, product: Any) -> Any:
        def timed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            start = time.perf_counter()
            out = product(a, b)
            self.spent += time.perf_counter() - start
            return out

        return timed


def products_share(impl: Impl, config: TrainConfig, data: Dataset, steps: int) -> dict:
    """{'step_s', 'products_s', 'share_outside', 'amdahl_cap'} over `steps` timed steps."""
    clock = _Clocked()
    ops = Ops(np, clock.wrap(lambda a, b: a @ b.T), clock.wrap(lambda a, b: a.T @ b),
              clock.wrap(lambda a, b: a @ b))
    params = network.glorot_uniform(config.sizes(data.features), seed=0)
    X = np.ascontiguousarray(data.train.images[:config.batch])
    y = data.train.labels[:config.batch]
    with threads_for(impl):
        runner = ArrayRunner(ops, params, config)
        runner.step(X, y)  # warm-up
        best_step, best_products = float("inf"), 0.0
        for _ in range(steps):
            clock.spent = 0.0
            start = time.perf_counter()
            runner.step(X, y)
            elapsed = time.perf_counter() - start
            if elapsed < best_step:
                best_step, best_products = elapsed, clock.spent
    outside = 1.0 - best_products / best_step
    return {"batch": config.batch, "step_s": best_step, "products_s": best_products,
            "share_outside": outside,
            "amdahl_cap": 1.0 / (outside + (1.0 - outside) / cores())}


def table(rows: list[dict]) -> str:
    if not rows:
        return ""
    lines = ["### Where the BLAS version's step goes", "",
             "| net | implementation | batch | step ms | in products ms | outside products "
             f"| Amdahl's cap on {cores()} cores |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        cap = f"{r['amdahl_cap']:.1f}×" if r["impl"] == "blas-1" else "–"
        lines.append(f"| {r['net']} | {r['impl']} | {r['batch']} | {1e3 * r['step_s']:.1f} | "
                     f"{1e3 * r['products_s']:.1f} | {100 * r['share_outside']:.0f}% | {cap} |")
    lines += ["", "The cap is the speedup over one thread that parallel products alone allow: "
              "the one-thread share outside them stays on one core whatever BLAS does."]
    return "\n".join(lines)
