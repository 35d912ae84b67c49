"""The progression as a picture: every GEMM version and cuBLAS, GFLOP/s over square sizes.

Drawn with matplotlib's object API (no pyplot state), as the rest of the kit does.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

PLOT_SIZES = "256,512,1024,1536,2048,3072,4096"
MARKERS = "osD^v<>p"


def parse_sizes(text: str) -> list[tuple[int, int, int]]:
    sizes = [int(x) for x in text.split(",") if x.strip()]
    if not sizes or min(sizes) < 1:
        raise ValueError(f"sizes {text!r}: expected positive integers, like 256,1024")
    return [(n, n, n) for n in sizes]


def plot_progression(rows: list[dict], path: Path, title: str) -> Path:
    """GFLOP/s of each kernel of `rows` (bench_gemm.run's rows, square shapes) against n."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 4.5), layout="constrained")
    ax = fig.subplots()
    kernels = list(dict.fromkeys(r["kernel"] for r in rows))
    for index, kernel in enumerate(kernels):
        points = sorted((int(r["shape"].split("x")[0]), r["gflops"]) for r in rows
                        if r["kernel"] == kernel and r["gflops"])
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, marker=MARKERS[index % len(MARKERS)], label=kernel,
                    ls="--" if kernel == "cublas" else "-", color="black"
                    if kernel == "cublas" else None)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")  # from the naive kernel's few percent to cuBLAS
    ax.set_xlabel("n (M = N = K = n)")
    ax.set_ylabel("GFLOP/s (float32)")
    ax.set_title("\n".join(textwrap.wrap(title, 90)), fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path
