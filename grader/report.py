"""Reports of a grading run: the terminal table, grades.csv and a JSON file per submission."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from grader.results import NOT_GRADED, SubmissionResult


def _cell(points: float | None, max_points: float, status: str) -> str:
    if status == NOT_GRADED or points is None:
        return "n/g"
    return f"{points:g}/{max_points:g}"


def table(results: list[SubmissionResult], backend: str) -> str:
    """A plain-text table: one row per submission, one column per item."""
    if not results:
        return "no submissions graded"
    item_ids = [item.id for item in results[0].items]
    headers = ["submission"] + [i.removeprefix("gemm.").replace(".correctness", "")
                                .replace(".performance", " speed") for i in item_ids] + ["total"]
    rows = []
    for r in results:
        cells = [_cell(it.points, it.max_points, it.status) for it in r.items]
        rows.append([r.name, *cells, f"{r.total:g}/{r.max_total:g}"])
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=True)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [f"Backend: {backend}", line, "-" * len(line)]
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    if any(it.status == NOT_GRADED for r in results for it in r.items):
        out.append("n/g = not graded in this run (performance needs a GPU); totals leave it out")
    return "\n".join(out)


def failures(results: list[SubmissionResult]) -> str:
    """One line per item that lost points, with the grader's message."""
    lines = []
    for r in results:
        for it in r.items:
            if it.points is not None and it.points < it.max_points:
                lines.append(f"{r.name} / {it.id}: {it.message}")
    return "\n".join(lines)


def write_csv(results: list[SubmissionResult], path: Path) -> None:
    item_ids = [item.id for item in results[0].items] if results else []
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["submission", *item_ids, "total", "max_total"])
        for r in results:
            points = ["" if it.points is None else f"{it.points:g}" for it in r.items]
            writer.writerow([r.name, *points, f"{r.total:g}", f"{r.max_total:g}"])


def write_json(result: SubmissionResult, path: Path) -> None:
    path.write_text(json.dumps(result.to_json(), indent=2, default=float))


def details(results: list[SubmissionResult]) -> str:
    """Every item with every check, for a student reading their own results."""
    lines = []
    for r in results:
        lines.append(f"== {r.name}")
        for it in r.items:
            points = "not graded" if it.points is None else f"{it.points:g}/{it.max_points:g}"
            lines.append(f"  {it.id}: {points}: {it.message}")
            for check in it.checks:
                mark = {True: "ok  ", False: "FAIL"}.get(check.get("passed"), "    ")
                text = check.get("message") or (
                    f"{check['gflops']:.0f} GFLOP/s = {check['share_of_cublas']:.1%} of cuBLAS, "
                    f"{check['time_over_solution']:.2f}x the solution's time")
                lines.append(f"    {mark} {check['case']}: {text}")
    return "\n".join(lines)
