"""The plots of an item's feedback, drawn only when their data is present.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.reports.reading import case_name, check_failed
from grader.reports.text import NORM_KEYS, clean, finite, is_numeric, label, number

# Plots: drawn on matplotlib's Agg canvas through Figure objects, without pyplot, so that no
# global state or GUI backend is involved and nothing stays open after saving.


def new_figure(**kwargs: object) -> Any:
    """A matplotlib Figure. matplotlib is imported here, at the first plot, not with the
    module: it is a second of CPU, and a grading run whose items have no figures to plot
    (a class of stubs, one kernel checked) draws none."""
    from matplotlib.figure import Figure

    return Figure(**kwargs)


@dataclass
class Plot:
    path: Path
    caption: str


_COLORS = {"mine": "#1f77b4", "solution": "#7f7f7f", "cublas": "#2ca02c",
           "ok": "#4c9a2a", "bad": "#c0392b", "line": "#333333"}


def _plain(text: object, width: int = 0) -> str:
    """Text for a matplotlib label: '$' escaped so that mathtext never parses it."""
    s = " ".join(clean(text).split()).replace("$", r"\$")
    return "\n".join(textwrap.wrap(s, width)) if width and s else s


def _margins(fig: Any, left: float, bottom: float, top: float = 0.35,
             right: float = 0.2) -> None:
    """Fixed margins, in inches, around the one axes. By hand rather than matplotlib's
    constrained layout, which measured every label and took 40% of a plot's time (about
    a second of CPU per graded submission)."""
    width, height = fig.get_size_inches()
    fig.subplots_adjust(left=min(left / width, 0.6), right=1 - right / width,
                        bottom=min(bottom / height, 0.6), top=1 - top / height)


def _lines(labels: list[str]) -> int:
    return max([label.count("\n") + 1 for label in labels] or [1])


def _size(n: int, per: float, base: float, least: float) -> float:
    """Inches for n bars or groups, capped so that a very long list stays a sane image."""
    return min(max(least, base + per * n), 30.0)


def _log_floor(values: list[float]) -> float:
    """Where zeros go on a log axis: a decade below the smallest positive value (or 1)."""
    positive = [v for v in values if v > 0]
    return min([*positive, 1.0]) / 10


def _plot_performance(item: dict, path: Path) -> bool:
    rows = [c for c in item["checks"] if (finite(c.get("gflops")) or 0) > 0]
    if not rows:
        return False
    series = [(key, name, _COLORS[color]) for key, name, color in (
        ("gflops", "this submission", "mine"), ("solution_gflops", "solution", "solution"),
        ("cublas_gflops", "cuBLAS", "cublas"))
        if any((finite(c.get(key)) or 0) > 0 for c in rows)]
    fig = new_figure(figsize=(_size(len(rows), 1.8, 2, 6), 4.0))
    ax = fig.add_subplot()
    width = 0.8 / len(series)
    everything = []
    for j, (key, name, color) in enumerate(series):
        values = [finite(c.get(key)) or math.nan for c in rows]
        everything += [v for v in values if v > 0]
        xs = [i + (j - (len(series) - 1) / 2) * width for i in range(len(rows))]
        bars = ax.bar(xs, [v if v > 0 else math.nan for v in values], width, label=name,
                      color=color)
        ax.bar_label(bars, labels=[number(v) if v > 0 else "" for v in values],
                     fontsize=7, padding=2)
    if max(everything) / min(everything) > 30:  # cuBLAS at 4096³ dwarfs a naive kernel
        ax.set_yscale("log")
    ax.margins(y=0.15)
    ticks = [_plain(case_name(c, n), 18) for n, c in enumerate(rows)]
    ax.set_xticks(range(len(rows)), ticks, fontsize=8)
    _margins(fig, left=0.8, bottom=0.3 + 0.14 * _lines(ticks))
    ax.set_ylabel("GFLOP/s (higher is better)")
    ax.set_title(_plain(item["title"]), fontsize=10)
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=100)
    return True


def _plot_norms(item: dict, path: Path) -> bool:
    figures = item["figures"]
    series = [k for k in NORM_KEYS if isinstance(figures.get(k), dict)]
    params: list[str] = []
    for key in series:
        params += [p for p, v in figures[key].items()
                   if finite(v) is not None and p not in params]
    if not params:
        return False
    values = {k: [finite(figures[k].get(p)) for p in params] for k in series}
    tolerance = finite(figures.get("tolerance"))
    floor = _log_floor([v for vs in values.values() for v in vs if v is not None])
    fig = new_figure(figsize=(_size(len(params) * len(series), 0.9, 2, 5), 3.6))
    ax = fig.add_subplot()
    width = 0.8 / len(series)
    for j, key in enumerate(series):
        xs = [i + (j - (len(series) - 1) / 2) * width for i in range(len(params))]
        heights = [max(v, floor) if v is not None else math.nan for v in values[key]]
        bars = ax.bar(xs, heights, width, label=label(key), color=("#1f77b4", "#ff7f0e")[j])
        ax.bar_label(bars, labels=[number(v) if v is not None else "" for v in values[key]],
                     fontsize=7, padding=2)
    if tolerance is not None and tolerance > 0:
        ax.axhline(tolerance, color=_COLORS["bad"], linestyle="--",
                   label=f"tolerance {number(tolerance)}")
    ax.set_yscale("log")
    ax.margins(y=0.2)
    ticks = [_plain(p, 14) for p in params]
    ax.set_xticks(range(len(params)), ticks, fontsize=8)
    _margins(fig, left=0.8, bottom=0.3 + 0.14 * _lines(ticks))
    ax.set_ylabel("relative error (lower is better)")
    ax.set_title(_plain(item["title"]), fontsize=10)
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=100)
    return True


def _ratio(value: object) -> float | None:
    """A number as a float, infinities and NaN included (an int too large for a float is
    infinite); anything else None."""
    if not is_numeric(value):
        return None
    try:
        return float(value)
    except OverflowError:
        return math.inf


def _error_label(v: float | None) -> str:
    if v is None:
        return "no error figure (see the message)"
    return "NaN" if math.isnan(v) else number(v)


def _plot_errors(item: dict, path: Path) -> bool:
    checks = [c for c in item["checks"] if "worst_error_over_bound" in c]
    values = [_ratio(c.get("worst_error_over_bound")) for c in checks]
    known = [v for v in values if v is not None and math.isfinite(v)]
    if not known and not any(v is not None and math.isinf(v) for v in values):
        return False
    floor, top = _log_floor(known), max([*known, 1.0]) * 30
    # Infinite ratios (output written where it must not be, say) run off the right edge.
    widths = [top if v is not None and math.isinf(v) else max(v, floor) if v in known
              else math.nan for v in values]
    fig = new_figure(figsize=(8.0, _size(len(checks), 0.28, 1.2, 2)))
    ax = fig.add_subplot()
    colors = [_COLORS["bad"] if check_failed(c) or (v or 0) > 1 else _COLORS["ok"]
              for c, v in zip(checks, values, strict=True)]
    bars = ax.barh(range(len(checks)), widths, color=colors)
    ax.bar_label(bars, labels=[number(v) if v in known else "" for v in values],
                 fontsize=7, padding=3)
    for y, v in enumerate(values):
        if v is not None and math.isinf(v):
            ax.text(top / 1.5, y, "∞", va="center", ha="right", fontsize=9, color="white")
        elif v not in known:
            ax.text(floor, y, _error_label(v), va="center", fontsize=7, color="#555555")
    ax.axvline(1.0, color=_COLORS["line"], linestyle="--")
    ax.set_xscale("log")
    ax.set_xlim(floor / 2, top)
    ax.set_ylim(len(checks) - 0.5, -0.5)  # first case on top, NaN rows kept in the frame
    ticks = [_plain(case_name(c, n)) for n, c in enumerate(checks)]
    ax.set_yticks(range(len(checks)), ticks, fontsize=7)
    # (7-point text: about 0.053 inch a character; the axes keep 5.6 inches, which the
    # x label needs)
    left = 0.3 + 0.053 * max([len(t) for t in ticks] or [1])
    fig.set_size_inches(max(8.0, left + 5.6), fig.get_size_inches()[1])
    _margins(fig, left=left, bottom=0.5)
    ax.set_xlabel("worst |error| / float32 bound (dashed line: the bound; at most 1 passes)")
    ax.set_title(_plain(item["title"]), fontsize=10)
    fig.savefig(path, dpi=100)
    return True


_PLOTS = (
    ("gflops", _plot_performance, "GFLOP/s per benchmark case: this submission, the "
                                  "solution and cuBLAS"),
    ("norms", _plot_norms, "Relative error per parameter, against the tolerance"),
    ("errors", _plot_errors, "Worst error over its bound per case (1 = the bound; ∞ = "
                             "wrong in a way no finite error measures, such as a write "
                             "out of bounds)"),
)


def make_plots(item: dict, folder: Path, prefix: str) -> list[Plot]:
    """The plots of one (normalized) item whose data is present, saved in `folder`."""
    plots = []
    for kind, draw, caption in _PLOTS:
        path = folder / f"{prefix}_{kind}.png"
        folder.mkdir(parents=True, exist_ok=True)  # removed again by the caller if unused
        if draw(item, path):
            plots.append(Plot(path, caption))
    return plots


# ---------------------------------------------------------------------------------------------
