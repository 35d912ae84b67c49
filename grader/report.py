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


PART_TITLES = {"gemm": "Part 1, GEMM", "net": "Part 2, the network", "mpi": "Part 3, MPI"}


def _header(item_id: str) -> str:
    short = item_id.split(".", 1)[1]
    return short.replace(".correctness", "").replace(".performance", " speed")


def _grid(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=True)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "-" * len(line)]
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in rows]
    return out


def table(results: list[SubmissionResult], backend: str) -> str:
    """Plain-text tables: one per part (a column per item), then the totals."""
    if not results:
        return "no submissions graded"
    parts = list(dict.fromkeys(item.id.split(".")[0] for item in results[0].items))
    out = [f"Backend: {backend}"]
    for part in parts:
        ids = [item.id for item in results[0].items if item.id.startswith(part + ".")]
        rows = []
        for r in results:
            mine = [it for it in r.items if it.id in ids]
            graded = [it for it in mine if it.points is not None]
            subtotal = (f"{sum(it.points for it in graded):g}/"
                        f"{sum(it.max_points for it in graded):g}")
            rows.append([r.name, *[_cell(it.points, it.max_points, it.status) for it in mine],
                         subtotal])
        out += ["", PART_TITLES.get(part, part)]
        out += _grid(["submission", *map(_header, ids), "part"], rows)
    if len(parts) > 1:
        out += ["", "Totals"]
        out += _grid(["submission", "total"],
                     [[r.name, f"{r.total:g}/{r.max_total:g}"] for r in results])
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
