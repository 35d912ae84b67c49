"""A class summary of a grading run: totals, their spread and each item's pass rate.

`summarize` computes the figures from the result dicts (SubmissionResult.to_json());
`write_summary` writes them as summary.md and summary.html (templates/summary.*.j2) with
a histogram of the totals.
An item's pass rate is the share of submissions with full points on it among those where
it was graded; submissions where it was not graded (no GPU, say) leave it out.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from grader.reports.plots import new_figure
from grader.reports.reading import normalize
from grader.reports.templating import Badge, Link, Table, render

HISTOGRAM = "summary_totals.png"


def _stats(values: list[float]) -> dict:
    if not values:
        return {"mean": None, "median": None, "min": None, "max": None}
    return {"mean": statistics.fmean(values), "median": statistics.median(values),
            "min": min(values), "max": max(values)}


def _item_rates(results: list[dict]) -> list[dict]:
    """Per item id, first seen first: how many graded it, how many got full points."""
    rows: dict[str, dict] = {}
    for result in results:
        for it in result["items"]:
            row = rows.setdefault(it["id"], {"id": it["id"], "title": it["title"],
                                             "max_points": it["max_points"], "graded": 0,
                                             "full": 0, "points": []})
            if it["points"] is None:
                continue
            row["graded"] += 1
            row["full"] += it["points"] >= it["max_points"]
            row["points"].append(it["points"])
    for row in rows.values():
        row["pass_rate"] = row["full"] / row["graded"] if row["graded"] else None
        row["mean_points"] = statistics.fmean(row.pop("points")) if row["graded"] else None
    return list(rows.values())


def summarize(results: list[dict]) -> dict:
    """The class figures: per submission (name, total, max_total, percent: None when
    nothing was graded), statistics of the totals in points and in percent of max_total,
    and per item its pass rate (None where no submission had it graded)."""
    data = [normalize(r) for r in results]
    subs = [{"name": d["name"], "id": d["id"], "total": d["total"], "max_total": d["max_total"],
             "percent": 100 * d["total"] / d["max_total"] if d["max_total"] > 0 else None}
            for d in data]
    percents = [s["percent"] for s in subs if s["percent"] is not None]
    return {"count": len(subs), "submissions": subs,
            "points": _stats([s["total"] for s in subs]), "percent": _stats(percents),
            "items": _item_rates(data)}


def _histogram(percents: list[float], path: Path) -> None:
    fig = new_figure(figsize=(7.0, 3.5), layout="constrained")
    ax = fig.add_subplot()
    # Eleven bins so that a perfect score has its own bar, not one shared with 90%.
    edges = [*range(0, 101, 10), 110]
    ax.hist([min(p, 100.0) for p in percents], bins=edges, color="#1f77b4",
            edgecolor="white")
    ax.set_xticks([5 + e for e in edges[:-1]],
                  [f"{e}–{e + 10}" if e < 100 else "100" for e in edges[:-1]], fontsize=8)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("total, % of the points graded")
    ax.set_ylabel("submissions")
    ax.set_title(f"Totals of {len(percents)} submission(s)", fontsize=10)
    fig.savefig(path, dpi=100)


def _fmt(value: float | None, suffix: str = "", spec: str = ".1f") -> str:
    return "–" if value is None else f"{value:{spec}}{suffix}"


def _stats_rows(summary: dict) -> list[list[str]]:
    return [[name, _fmt(summary["points"][key], "", "g"), _fmt(summary["percent"][key], "%")]
            for name, key in (("mean", "mean"), ("median", "median"), ("min", "min"),
                              ("max", "max"))]


def _item_rows(summary: dict) -> list[list[str]]:
    return [[row["title"], row["id"], f"{row['graded']}", f"{row['full']}",
             _fmt(None if row["pass_rate"] is None else 100 * row["pass_rate"], "%", ".0f"),
             f"{_fmt(row['mean_points'], '', '.2f')} / {row['max_points']:g}"]
            for row in summary["items"]]


_ITEM_HEADERS = ["item", "id", "graded", "full points", "pass rate", "mean points"]
_SUB_HEADERS = ["submission", "total", "max", "%"]


def _sub_rows(summary: dict) -> list[list[str]]:
    return [[s["name"], f"{s['total']:g}", f"{s['max_total']:g}", _fmt(s["percent"], "%")]
            for s in summary["submissions"]]


def _tables(summary: dict, feedback: dict[str, str]) -> dict:
    """The three tables of the summary pages; `feedback` maps a submission's id to the
    file of its feedback report, which its name links to."""
    rows: list[list[str | Link | Badge]] = []
    for s, r in zip(summary["submissions"], _sub_rows(summary), strict=True):
        link = feedback.get(s["id"])
        rows.append([Link(link, r[0]) if link else r[0], *r[1:]])
    return {"totals": Table(["", "points", "% of graded"], _stats_rows(summary), {1, 2}),
            "items": Table(_ITEM_HEADERS, _item_rows(summary), {2, 3, 4, 5}),
            "submissions": Table(_SUB_HEADERS, rows, {1, 2, 3})}


def write_summary(results: list[dict], out_dir: Path) -> Path:
    """Write summary.md, summary.html and the histogram summary_totals.png (when any
    submission had points graded) to `out_dir`; return the path of summary.html.

    Submissions whose feedback report `<id>.html` (write_feedback) is already in
    `out_dir` are linked to it.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = summarize(results)
    percents = [s["percent"] for s in summary["submissions"] if s["percent"] is not None]
    plot_path = out_dir / HISTOGRAM
    plot_path.unlink(missing_ok=True)
    plot = None
    # A histogram of one total says nothing the table does not; skipping it also spares a
    # one-submission run (`make check`) matplotlib's import.
    if len(percents) >= 2:
        _histogram(percents, plot_path)
        plot = plot_path.name
    ids = [s["id"] for s in summary["submissions"]]  # report.safe_name: never "summary"
    html_links = {i: f"{i}.html" for i in ids if (out_dir / f"{i}.html").exists()}
    md_links = {i: f"{i}.md" for i in ids if (out_dir / f"{i}.md").exists()}
    for page, links in (("summary.md", md_links), ("summary.html", html_links)):
        text = render(f"{page}.j2", title="Class summary", count=summary["count"], plot=plot,
                      **_tables(summary, links))
        (out_dir / page).write_text(text, encoding="utf-8")
    html_path = out_dir / "summary.html"
    return html_path
