"""What one submission's feedback shows, laid out for its two templates:
templates/feedback.html.j2 and templates/feedback.md.j2 draw the same view.

Nothing here is escaped or formatted for a page: each template environment does that
(grader/reports/templating.py), so a value cannot reach a page unescaped by being
forgotten here. Table cells are shortened to one line of CELL_LIMIT characters; long
check messages are listed whole below their table.
"""

from __future__ import annotations

from grader.checks import simperf
from grader.reports.plots import Plot
from grader.reports.reading import (
    check_columns,
    check_failed,
    failures_first,
    figure_scalars,
    figure_table,
    long_messages,
    not_graded_note,
    numeric_columns,
    points_text,
    total_text,
)
from grader.reports.templating import Badge, Link, Table
from grader.reports.text import anchor, format_value, label, shorten
from grader.results import FAIL


def _checks(item: dict) -> dict | None:
    checks = item["checks"]
    if not checks:
        return None
    columns = check_columns(checks)
    ordered = failures_first(checks)
    rows: list[list[str | Link | Badge]] = [
        [shorten(format_value(k, c.get(k))) for k in columns] for c in ordered]
    return {"count": len(checks), "failed": sum(check_failed(c) for c in checks),
            "long": long_messages(ordered),
            "table": Table([label(k) for k in columns], rows, numeric_columns(columns, checks),
                           ["failed" if check_failed(c) else "" for c in ordered])}


def _item(n: int, item: dict, plots: list[Plot]) -> dict:
    message = item["message"]
    table = figure_table(item["figures"])
    return {
        "n": n, "anchor": anchor(n), "id": item["id"], "title": item["title"],
        "points": points_text(item), "status": item["status"], "message": message,
        # a message of several lines keeps them; a long one wraps in a block of its own
        "multiline": "\n" in message.strip() or len(message) > 300,
        "scalars": [(k, shorten(v)) for k, v in figure_scalars(item["figures"])],
        "figure_table": None if table is None else Table(
            table[0], [[shorten(c) for c in r] for r in table[1]],
            set(range(1, len(table[0])))),
        "images": [(p.path.name, p.caption) for p in plots],
        "checks": _checks(item),
        "memory_traffic": _memory_traffic(item["figures"].get(simperf.KEY)),
    }


def _memory_traffic(value: object) -> dict | None:
    """The simulator's memory-traffic counts beside the solution's (feedback only)."""
    laid = simperf.table(value)
    if laid is None:
        return None
    headers, rows, notes = laid
    return {"table": Table(headers, [[shorten(c) for c in r] for r in rows],
                           set(range(1, len(headers)))),
            "notes": notes}


def feedback_view(result: dict, plots: list[list[Plot]], rel: str) -> dict:
    """The template context of a normalized result (reading.normalize); `plots` has one
    list per item, `rel` is the folder of the PNG files relative to the report."""
    items = result["items"]
    note = not_graded_note(result)
    rows: list[list[str | Link | Badge]] = [
        [str(n), Link(f"#{anchor(n)}", it["title"]), points_text(it), Badge(it["status"]),
         shorten(it["message"])] for n, it in enumerate(items, 1)]
    return {
        "title": f"Feedback: {result['name']}", "name": result["name"],
        "backend": result["backend"], "total": total_text(result),
        "notes": ([note] if note else []) + result["notes"], "rel": rel,
        "items": [_item(n, it, plots[n - 1] if n <= len(plots) else [])
                  for n, it in enumerate(items, 1)],
        "summary": Table(["#", "item", "points", "status", "message"], rows, {0, 2},
                         ["failed" if it["status"] == FAIL else "" for it in items]),
    }
