"""The network's five GEMM products, one by one, with the layouts the network hands them:
where an epoch's time goes, per GEMM version (bench-train --products).

For 784-H-10 at batch n (nnkit/network.py's conventions, solution/net_2_backprop.py's calls):

    Z1  = X W1^T          n x H x 784   B a transposed view
    Z2  = A1 W2^T         n x 10 x H    B a transposed view          (thin N)
    dW2 = dZ2^T A1 + .    10 x H x n    A a transposed view          (thin M)
    dA1 = dZ2 W2          n x H x 10                                 (thin K)
    dW1 = dZ1^T X + .     H x 784 x n   A a transposed view

Each product is checked against the float64 reference within the float32 bound, then
timed as bench-gemm times (nnkit.bench_gemm_check; alpha 2, beta 5 for all).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nnkit.backend import to_device
from nnkit.bench_gemm_check import ALPHA, BETA, check_and_time
from nnkit.gemm_reference import error_bound, reference
from nnkit.training import make_launcher

FEATURES, CLASSES = 784, 10


def products(batch: int, hidden: int, features: int = FEATURES) -> list[tuple]:
    """(name, A's stored shape, A used transposed, B's stored shape, B used transposed)."""
    n, h = batch, hidden
    return [("Z1 = X W1^T", (n, features), False, (h, features), True),
            ("Z2 = A1 W2^T", (n, h), False, (CLASSES, h), True),
            ("dW2 = dZ2^T A1", (n, CLASSES), True, (n, h), False),
            ("dA1 = dZ2 W2", (n, CLASSES), False, (CLASSES, h), False),
            ("dW1 = dZ1^T X", (n, h), True, (n, features), False)]


def measure(folder: Path, gemms: list[str], batch: int, hidden: int, repeats: int = 10,
            features: int = FEATURES) -> list[dict]:
    """One row per product and GEMM: status, best seconds, and the ratio to cuBLAS when
    "cublas" is among `gemms`."""
    rng = np.random.default_rng(batch + hidden)
    rows = []
    for name, a_shape, a_t, b_shape, b_t in products(batch, hidden, features):
        A_h, B_h = (rng.uniform(-1, 1, s).astype(np.float32) for s in (a_shape, b_shape))
        opA, opB = (A_h.T if a_t else A_h), (B_h.T if b_t else B_h)
        C_h = rng.uniform(-1, 1, (opA.shape[0], opB.shape[1])).astype(np.float32)
        expected = reference(opA, opB, C_h, ALPHA, BETA)
        bound = error_bound(opA, opB, C_h, ALPHA, BETA)
        A, B, C0 = to_device(A_h), to_device(B_h), to_device(C_h)
        A, B = (A.T if a_t else A), (B.T if b_t else B)
        M, K = opA.shape
        for gemm in gemms:
            try:
                launch = make_launcher(gemm, folder)
            except (ValueError, ImportError) as err:  # cuda-c without a GPU, say
                status, seconds = f"{type(err).__name__}: {err}"[:120], None
            else:
                status, seconds = check_and_time(launch, A, B, C0, expected, bound, repeats)
            rows.append({"batch": batch, "product": name, "shape": f"{M}x{opB.shape[1]}x{K}",
                         "gemm": gemm, "status": status, "seconds": seconds})
    base = {(r["batch"], r["product"]): r["seconds"] for r in rows if r["gemm"] == "cublas"}
    for r in rows:
        ref = base.get((r["batch"], r["product"]))
        r["over_cublas"] = r["seconds"] / ref if r["seconds"] and ref else None
    return rows


def format_products(rows: list[dict]) -> str:
    """Per product and GEMM, then the five products' sum per GEMM and batch."""
    lines = [f"{'batch':>6}  {'product':<16} {'M x N x K':<16} {'gemm':<20} {'ms':>8}  "
             f"{'x cuBLAS':>8}  status"]
    for r in rows:
        ms = f"{r['seconds'] * 1e3:8.3f}" if r["seconds"] else f"{'-':>8}"
        ratio = f"{r['over_cublas']:8.2f}" if r["over_cublas"] else f"{'-':>8}"
        lines.append(f"{r['batch']:>6}  {r['product']:<16} {r['shape']:<16} {r['gemm']:<20} "
                     f"{ms}  {ratio}  {r['status']}")
    lines.append("")
    lines.append(f"{'batch':>6}  {'gemm':<20} {'ms, all five':>12}")
    totals: dict[tuple[int, str], float | None] = {}
    for r in rows:
        key = (r["batch"], r["gemm"])
        if r["seconds"] is None or totals.get(key, 0.0) is None:
            totals[key] = None
        else:
            totals[key] = totals.get(key, 0.0) + r["seconds"]
    for (batch, gemm), total in totals.items():
        cell = f"{total * 1e3:12.3f}" if total is not None else f"{'failed':>12}"
        lines.append(f"{batch:>6}  {gemm:<20} {cell}")
    return "\n".join(lines)
