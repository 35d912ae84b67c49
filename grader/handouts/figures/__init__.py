"""The handouts' diagrams, each drawn by a script from the kit's own numbers, so that a
change of design is redrawn rather than repainted:

    register-tiling.png   Part 1, version 3: the block tile and a thread's tile over A, B, C
    network-shapes.png    Part 2: 784 -> H -> 10, the shape of every product, batch on rows
    ring-allreduce.png    Part 3: the ring all-reduce on 4 ranks, step by step

`make figures` (python -m grader.handouts.figures) writes them into handouts/img/.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display

from grader.handouts.figures import ring, shapes, tiling  # noqa: E402  (after the backend)

FIGURES: dict[str, Callable[..., Path]] = {
    "register-tiling.png": tiling.draw,
    "network-shapes.png": shapes.draw,
    "ring-allreduce.png": ring.draw,
}


def draw_all(out: Path, dpi: int | None = None) -> list[Path]:
    """Every figure into `out`; `dpi` overrides each figure's own (tests draw small)."""
    extra = {} if dpi is None else {"dpi": dpi}
    return [draw(out / name, **extra) for name, draw in FIGURES.items()]
