"""Part 1, version 3 (register blocking), over A, B and C: the 16 x 64 tile of C that one
block of (16, 4) threads computes, the 16 x 4 piece of A it stages in shared memory per
step of 4 along K, and one thread's tile: a column of 16 sums of C in registers, fed by 4
values of B it loads itself. The tile sizes are those of handouts/part1-gemm.md; the
matrices are drawn to scale, in elements, for a small M x N x K."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.patches import Patch, Rectangle

TILE_M, TILE_N, STEP_K = 16, 64, 4     # the block's tile of C, and the step along K
M, N, K = 48, 192, 24                  # the drawn matrices: 3 x 3 tiles, 6 steps along K
BLOCK = (1, 1)                         # (blockIdx.y, blockIdx.x) of the block shown
STEP = 2                               # the step along K shown (k = 8 .. 11)
THREAD = (1, 4)                        # (threadIdx.y, threadIdx.x) of the thread shown
GAP = 9

LIGHT, SHARED, REGISTERS, OWN = "#bbdefb", "#ffb74d", "#6a1b9a", "#1565c0"


def _box(ax, x, y, w, h, face, edge="none", lw=0.0, z=1):
    ax.add_patch(Rectangle((x, y), w, h, facecolor=face, edgecolor=edge, linewidth=lw,
                           zorder=z))


def _grid(ax, x0, y0, w, h, dx, dy):
    """Faint lines every dx columns and dy rows: the tiles of a matrix."""
    for x in range(dx, w, dx):
        ax.plot([x0 + x, x0 + x], [y0, y0 + h], color="#90a4ae", lw=0.6, zorder=2)
    for y in range(dy, h, dy):
        ax.plot([x0, x0 + w], [y0 + y, y0 + y], color="#90a4ae", lw=0.6, zorder=2)


def draw(path: Path, dpi: int = 110) -> Path:
    by, bx = BLOCK
    t = THREAD[0] * 16 + THREAD[1]
    row0, col0, k0 = by * TILE_M, bx * TILE_N, STEP * STEP_K
    j = col0 + t
    ax_, ay = 0, K + GAP                 # A's corner
    bx_, by_ = K + GAP, 0                # B's corner
    cx, cy = K + GAP, K + GAP            # C's corner

    fig, ax = plt.subplots(figsize=(11.5, 5.2))
    # A: the block's rows, and this step's piece (shared memory)
    _box(ax, ax_, ay + row0, K, TILE_M, LIGHT)
    _box(ax, ax_ + k0, ay + row0, STEP_K, TILE_M, SHARED, z=3)
    _grid(ax, ax_, ay, K, M, STEP_K, TILE_M)
    # B: the block's columns, this step's rows of them, and the thread's 4 values
    _box(ax, bx_ + col0, by_, TILE_N, K, LIGHT)
    _box(ax, bx_ + col0, by_ + k0, TILE_N, STEP_K, "#ffe0b2", z=2)
    _box(ax, bx_ + j, by_ + k0, 1, STEP_K, REGISTERS, z=4)
    _grid(ax, bx_, by_, N, K, TILE_N, STEP_K)
    # C: the block's tile and the thread's column of 16 sums
    _box(ax, cx + col0, cy + row0, TILE_N, TILE_M, LIGHT)
    _box(ax, cx + j, cy + row0, 1, TILE_M, OWN, z=4)
    _grid(ax, cx, cy, N, M, TILE_N, TILE_M)
    for x, y, w, h, name in ((ax_, ay, K, M, "A   (M × K)"), (bx_, by_, N, K, "B   (K × N)"),
                             (cx, cy, N, M, "C   (M × N)")):
        _box(ax, x, y, w, h, "none", "#263238", 1.4, z=5)
        ax.text(x + w / 2, y + h + 2.2, name, ha="center", va="top", fontsize=13)
    # the step along K, on both operands
    ax.annotate(f"k = {k0} … {k0 + STEP_K - 1}", xy=(ax_ + k0 + STEP_K / 2, ay - 0.3),
                xytext=(ax_ + k0 + STEP_K / 2, ay - 3.2), ha="center", fontsize=11,
                arrowprops={"arrowstyle": "-[", "lw": 0.8})
    ax.annotate(f"thread t = {t}: column j = {j}", xy=(cx + j + 0.5, cy + row0 + TILE_M),
                xytext=(cx + col0 + TILE_N + 8, cy + M + 2.2), fontsize=11.5, va="top",
                arrowprops={"arrowstyle": "->", "lw": 0.9})
    ax.set_xlim(-1, K + GAP + N + 1)
    ax.set_ylim(K + GAP + M + 6, -4.5)
    ax.set_aspect("equal")
    ax.axis("off")
    legend = [
        Patch(color=LIGHT, label=f"one block of (16, 4) = 64 threads: a {TILE_M} × {TILE_N} "
                                 "tile of C, from 16 rows of A and 64 columns of B"),
        Patch(color=SHARED, label=f"per step of {STEP_K} along K: the {TILE_M} × {STEP_K} "
                                  "piece of A, staged in shared memory (one element a thread)"),
        Patch(color="#ffe0b2", label=f"per step: the {STEP_K} × {TILE_N} piece of B, read "
                                     "from global memory, never staged in shared memory"),
        Patch(color=REGISTERS, label=f"thread t's {STEP_K} values of B this step, loaded into "
                                     "registers (neighbouring threads, neighbouring columns)"),
        Patch(color=OWN, label=f"thread t's tile: one column of {TILE_M} sums of C, in "
                               "registers (cuda.local.array)"),
    ]
    ax.legend(handles=legend, loc="upper left", bbox_to_anchor=(0.0, -0.01), fontsize=11.5,
              frameon=False, ncol=1)
    ax.set_title("Version 3, register blocking: thread t = threadIdx.y · 16 + threadIdx.x "
                 "owns\ncolumn j = blockIdx.x · 64 + t of its block's tile", fontsize=13)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, metadata={"Software": None}, bbox_inches="tight")
    plt.close(fig)
    return path
