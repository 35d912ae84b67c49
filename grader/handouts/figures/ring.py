"""The ring all-reduce of Part 3 on p = 4 ranks, step by step: which chunk each rank sends
to its right-hand neighbour, and what every rank holds after each step.

The schedule is the handout's (handouts/part3-mpi.md): in reduce-scatter step s, rank r
sends chunk (r - s) mod p and adds the chunk (r - s - 1) mod p it receives; in all-gather
step s it sends chunk (r + 1 - s) mod p and copies the chunk (r - s) mod p it receives.
The picture is drawn from a simulation of that schedule, so it cannot disagree with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, Rectangle

CHUNKS = "ABCDEFGH"


@dataclass
class Step:
    phase: str                      # "reduce-scatter" or "all-gather"
    number: int                     # s, from 0
    sent: list[int]                 # sent[r]: the chunk rank r sends to rank r + 1
    held: list[list[frozenset]]     # held[r][c]: whose contributions rank r's chunk c sums


def schedule(p: int) -> list[Step]:
    """The 2(p - 1) steps of the ring on p ranks, each with the state after it."""
    held = [[frozenset([r]) for _ in range(p)] for r in range(p)]
    steps = []
    for phase, send_of, combine in (
            ("reduce-scatter", lambda r, s: (r - s) % p, lambda mine, got: mine | got),
            ("all-gather", lambda r, s: (r + 1 - s) % p, lambda mine, got: got)):
        for s in range(p - 1):
            sent = [send_of(r, s) for r in range(p)]
            new = [row[:] for row in held]
            for r in range(p):
                right = (r + 1) % p
                new[right][sent[r]] = combine(held[right][sent[r]], held[r][sent[r]])
            held = new
            steps.append(Step(phase, s, sent, held))
    return steps


def _label(chunk: int, ranks: frozenset, p: int) -> str:
    if len(ranks) == p:
        return f"Σ{CHUNKS[chunk]}"
    return CHUNKS[chunk] + "".join(str(r) for r in sorted(ranks))


def _colour(ranks: frozenset, p: int) -> str:
    if len(ranks) == p:
        return "#2e7d32"  # complete: the sum over every rank
    shades = ["#e3f2fd", "#90caf9", "#42a5f5", "#1565c0"]
    return shades[min(len(ranks), len(shades)) - 1]


def _panel(ax, held, p: int, title: str, sent: list[int] | None, fresh: set) -> None:
    """One state: a row per rank, a column per chunk; the chunks just received are framed
    in orange and the chunk each rank sent is marked with an arrow to the rank below."""
    ax.set_xlim(-0.5, p + 1.0)
    ax.set_ylim(p + 0.1, -0.9)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title, fontsize=12)
    for c in range(p):
        ax.text(c + 0.5, -0.35, CHUNKS[c], ha="center", va="center", fontsize=11,
                color="#555")
    for r in range(p):
        ax.text(-0.1, r + 0.5, str(r), ha="right", va="center", fontsize=12)
        for c in range(p):
            ranks = held[r][c]
            complete = len(ranks) == p
            edge = "#ef6c00" if (r, c) in fresh else "#78909c"
            ax.add_patch(Rectangle((c + 0.04, r + 0.04), 0.92, 0.92, facecolor=_colour(ranks, p),
                                   edgecolor=edge, linewidth=2.4 if (r, c) in fresh else 0.8))
            dark = complete or len(ranks) >= 3
            ax.text(c + 0.5, r + 0.5, _label(c, ranks, p), ha="center", va="center",
                    fontsize=11, color="white" if dark else "#0d2238",
                    fontweight="bold" if complete else "normal")
    if sent:
        for r, c in enumerate(sent[:-1]):  # to the same chunk one rank down
            ax.add_patch(FancyArrowPatch((c + 0.85, r + 0.75), (c + 0.85, r + 1.25),
                                         arrowstyle="-|>", mutation_scale=9,
                                         color="#ef6c00", linewidth=1.3))
        # the last rank's message wraps round to rank 0: an arc beside the grid
        ax.add_patch(FancyArrowPatch((p + 0.08, p - 0.5), (p + 0.08, 0.5),
                                     connectionstyle="arc3,rad=0.3", arrowstyle="-|>",
                                     mutation_scale=9, color="#ef6c00", linewidth=1.3))
        ax.text(p + 0.78, p / 2, f"{CHUNKS[sent[-1]]}: {p - 1} → 0", rotation=90,
                ha="center", va="center", fontsize=10, color="#ef6c00")


def _ring(ax, p: int) -> None:
    """The ring itself: rank r sends to r + 1 and receives from r - 1, modulo p."""
    import math

    ax.set_xlim(-1.6, 1.6)
    ax.set_ylim(-1.6, 1.6)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title("the ring: rank r sends to r + 1", fontsize=12)
    where = [(math.sin(2 * math.pi * r / p), math.cos(2 * math.pi * r / p)) for r in range(p)]
    for r, (x, y) in enumerate(where):
        nx, ny = where[(r + 1) % p]
        ax.add_patch(FancyArrowPatch((x, y), (nx, ny), connectionstyle="arc3,rad=-0.25",
                                     arrowstyle="-|>", mutation_scale=12, color="#ef6c00",
                                     shrinkA=16, shrinkB=16, linewidth=1.5))
        ax.add_patch(plt.Circle((x, y), 0.32, facecolor="#eceff1", edgecolor="#455a64"))
        ax.text(x, y, str(r), ha="center", va="center", fontsize=14)


def draw(path: Path, p: int = 4, dpi: int = 110) -> Path:
    steps = schedule(p)
    fig, axes = plt.subplots(2, p, figsize=(3.0 * p, 7.6))
    start = [[frozenset([r]) for _ in range(p)] for r in range(p)]
    _panel(axes[0][0], start, p, "start: each rank's own values\n"
           "(A0: rank 0's chunk A)", None, set())
    _ring(axes[1][0], p)
    for step in steps:
        ax = axes[0 if step.phase == "reduce-scatter" else 1][step.number + 1]
        fresh = {((r + 1) % p, c) for r, c in enumerate(step.sent)}
        rule = ("sends (r − s) mod p, adds" if step.phase == "reduce-scatter"
                else "sends (r + 1 − s) mod p, copies")
        _panel(ax, step.held, p, f"{step.phase}, step s = {step.number}\n{rule}",
               step.sent, fresh)
    fig.suptitle(f"Ring all-reduce on p = {p} ranks (rows: ranks 0 … {p - 1}; columns: "
                 "chunks A, B, …)\nB01 = chunk B summed over ranks 0 and 1;  ΣB = the "
                 "complete sum;  orange frame: just received", fontsize=13)
    fig.tight_layout(rect=(0, 0, 1, 0.93), h_pad=2.0)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, metadata={"Software": None})
    plt.close(fig)
    return path
