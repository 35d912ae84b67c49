"""Part 2: the network 784 -> H -> 10 as matrix products, the n samples of a batch on the
rows: the shape of every operand and result, forward and backward, and the gemm flags
that compute it (the products table of handouts/part2-network.md). Boxes grow with the
square root of a dimension, so that 10 and 1024 both stay visible."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

D, C = 784, 10          # pixels, classes
HIDDEN, BATCH = 1024, 800   # the sizes the dimensions are drawn at
# One product per row: (formula, gemm call, [(name, rows, cols, colour) x 3])
DATA, WEIGHT, ACT, GRAD = "#cfd8dc", "#ffcc80", "#90caf9", "#ef9a9a"
PRODUCTS = [
    ("forward", "Z₁ = X W₁ᵀ + b₁,  A₁ = σ(Z₁)", "gemm(X, W1, Z1, trans_b=True)",
     [("X", "n", "784", DATA), ("W₁ᵀ", "784", "H", WEIGHT), ("Z₁, A₁", "n", "H", ACT)]),
    ("forward", "Z₂ = A₁ W₂ᵀ + b₂,  P = softmax(Z₂)", "gemm(A1, W2, Z2, trans_b=True)",
     [("A₁", "n", "H", ACT), ("W₂ᵀ", "H", "10", WEIGHT), ("Z₂, P", "n", "10", ACT)]),
    ("backward", "dW₂ = dZ₂ᵀ A₁ + λ W₂", "gemm(dZ2, A1, copy(W2), beta=λ, trans_a=True)",
     [("dZ₂ᵀ", "10", "n", GRAD), ("A₁", "n", "H", ACT), ("dW₂", "10", "H", GRAD)]),
    ("backward", "dA₁ = dZ₂ W₂", "gemm(dZ2, W2, dA1)",
     [("dZ₂", "n", "10", GRAD), ("W₂", "10", "H", WEIGHT), ("dA₁", "n", "H", GRAD)]),
    ("backward", "dW₁ = dZ₁ᵀ X + λ W₁", "gemm(dZ1, X, copy(W1), beta=λ, trans_a=True)",
     [("dZ₁ᵀ", "H", "n", GRAD), ("X", "n", "784", DATA), ("dW₁", "H", "784", GRAD)]),
]
SIZES = {"n": BATCH, "H": HIDDEN, "784": D, "10": C}


def extent(dim: str) -> float:
    """Drawn length of a dimension: the square root, so that 10 is not a hairline."""
    return 0.35 + 1.6 * math.sqrt(SIZES[dim] / HIDDEN)


def draw(path: Path, dpi: int = 110) -> Path:
    row_height = max(extent(d) for d in SIZES) + 1.1
    fig, ax = plt.subplots(figsize=(11.5, 1.55 * len(PRODUCTS) + 0.8))
    y = 0.0
    phase = None
    for kind, formula, call, boxes in PRODUCTS:
        if kind != phase:
            ax.text(-0.2, y - 0.15, kind, fontsize=11, fontweight="bold", va="bottom")
            phase = kind
        ax.text(0.0, y + 0.55, formula, fontsize=10.5, va="center")
        ax.text(0.0, y + 1.0, call, fontsize=8.5, va="center", family="monospace",
                color="#37474f")
        x = 7.2
        for i, (name, rows, cols, colour) in enumerate(boxes):
            w, h = extent(cols), extent(rows)
            ax.add_patch(Rectangle((x, y + 0.3), w, h, facecolor=colour, edgecolor="#37474f",
                                   linewidth=1.0))
            ax.text(x + w / 2, y + 0.05, name, ha="center", va="bottom", fontsize=10)
            ax.text(x + w / 2, y + 0.3 + h + 0.05, f"{rows} × {cols}", ha="center",
                    va="top", fontsize=8.5, color="#37474f")
            x += w + 0.25
            if i < 2:
                ax.text(x + 0.05, y + 0.3 + h / 2, "·" if i == 0 else "→", ha="center",
                        va="center", fontsize=14)
                x += 0.35
        y += row_height + 0.25
    ax.set_xlim(-0.3, 15.6)
    ax.set_ylim(y - 0.2, -0.55)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(f"784 → H → 10 with a batch of n samples as the rows (drawn at n = {BATCH},"
                 f" H = {HIDDEN})\ngrey: data, orange: weights, blue: activations, "
                 "red: gradients", fontsize=10.5)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, metadata={"Software": None}, bbox_inches="tight")
    plt.close(fig)
    return path
