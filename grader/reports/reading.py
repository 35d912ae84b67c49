"""Reading a result for the reports: missing optional fields, odd types and no items at all
are tolerated; checks laid out as a table.
"""

from __future__ import annotations

from grader.reports.report import safe_name
from grader.reports.text import (
    CELL_LIMIT,
    NORM_KEYS,
    NOTES,
    clean,
    finite,
    format_value,
    is_numeric,
    label,
)
from grader.results import FAIL, NOT_GRADED, PARTIAL, PASS
from grader.safe_io import clean_text

# Reading a result: tolerate missing optional fields, odd types and no items at all.


def _status(points: float | None, max_points: float) -> str:
    if points is None:
        return NOT_GRADED
    if points >= max_points:
        return PASS
    return FAIL if points <= 0 else PARTIAL


def normalize_item(item: dict, n: int) -> dict:
    """An item with every field present: id, title, max_points, points (None: not graded),
    status, message, checks (list of dicts), figures (dict)."""
    item_id = clean(item.get("id") or f"item{n + 1}")
    max_points = finite(item.get("max_points")) or 0.0
    points = finite(item.get("points"))
    checks = item.get("checks") if isinstance(item.get("checks"), list) else []
    figures = item.get("figures") if isinstance(item.get("figures"), dict) else {}
    return {
        "id": item_id,
        "title": clean(item.get("title") or item_id),
        "max_points": max_points,
        "points": points,
        "status": clean(item.get("status") or _status(points, max_points)),
        "message": clean(item.get("message") or ""),
        "checks": [c if isinstance(c, dict) else {"value": c} for c in checks],
        "figures": figures,
    }


def normalize(result: dict) -> dict:
    """A result with every field present and the totals computed when missing."""
    raw = result.get("items") if isinstance(result.get("items"), list) else []
    items = [normalize_item(it, n) for n, it in enumerate(raw) if isinstance(it, dict)]
    graded = [it for it in items if it["points"] is not None]
    total = finite(result.get("total"))
    max_total = finite(result.get("max_total"))
    notes = result.get("notes") if isinstance(result.get("notes"), list) else []
    raw_id = result.get("id")
    return {
        "id": raw_id if isinstance(raw_id, str) and safe_name(raw_id) == raw_id
        else safe_name(str(result.get("name") or "submission")),
        "notes": [clean_text(n, 2000) for n in notes[:NOTES]],
        "name": clean(result.get("name") or "submission"),
        "path": clean(result.get("path") or ""),
        "backend": clean(result.get("backend") or "unknown"),
        "items": items,
        "total": total if total is not None else sum(it["points"] for it in graded),
        "max_total": (max_total if max_total is not None
                      else sum(it["max_points"] for it in graded)),
    }


def points_text(item: dict) -> str:
    if item["points"] is None:
        return f"– / {item['max_points']:g}"
    return f"{item['points']:g} / {item['max_points']:g}"


def not_graded_note(result: dict) -> str | None:
    """Which items this run did not grade and why (their messages), or None."""
    skipped = [it for it in result["items"] if it["points"] is None]
    if not skipped:
        return None
    reasons = list(dict.fromkeys(it["message"] for it in skipped if it["message"]))
    worth = sum(it["max_points"] for it in skipped)
    text = (f"{len(skipped)} item(s) worth {worth:g} points were not graded in this run; "
            "the total leaves them out.")
    if reasons:
        text += " Reason: " + "; ".join(reasons)
    return text


def total_text(result: dict) -> str:
    total, max_total = result["total"], result["max_total"]
    share = f" ({total / max_total:.0%})" if max_total > 0 else ""
    return f"{total:g} / {max_total:g} points{share}"


# ---------------------------------------------------------------------------------------------
# Checks as a table


def check_failed(check: dict) -> bool:
    return check.get("passed") is False or str(check.get("status", "")).lower() in (
        "fail", "failed")


def check_columns(checks: list[dict]) -> list[str]:
    """Every key of the checks, first seen first; case and result lead, message ends."""
    keys: list[str] = []
    for check in checks:
        keys += [k for k in check if k not in keys]
    front = [k for k in ("case", "passed") if k in keys]
    back = [k for k in ("message",) if k in keys]
    return front + [k for k in keys if k not in front and k not in back] + back


def failures_first(checks: list[dict]) -> list[dict]:
    return sorted(checks, key=lambda c: not check_failed(c))


def case_name(check: dict, n: int) -> str:
    return clean(check.get("case", f"#{n + 1}"))


# ---------------------------------------------------------------------------------------------
# Figures and long messages, as every report shows them


# Figures with a block of their own in the feedback (grader/checks/simperf.py's table).
OWN_BLOCK_KEYS = frozenset({"memory_traffic"})


def figure_scalars(figures: dict) -> list[tuple[str, str]]:
    return [(label(k), format_value(str(k), v)) for k, v in figures.items()
            if not isinstance(v, dict) and k not in NORM_KEYS and k not in OWN_BLOCK_KEYS]


def figure_table(figures: dict) -> tuple[list[str], list[list[str]]] | None:
    """Figures that are dicts of values (per parameter, say) as one table, or None."""
    keys = [k for k, v in figures.items()
            if isinstance(v, dict) and v and k not in OWN_BLOCK_KEYS]
    if not keys:
        return None
    rows_keys: list[str] = []
    for k in keys:
        rows_keys += [r for r in figures[k] if r not in rows_keys]
    headers = ["", *(label(k) for k in keys)]
    rows = [[clean(r), *(format_value(str(k), figures[k].get(r)) for k in keys)]
            for r in rows_keys]
    return headers, rows


def numeric_columns(columns: list[str], checks: list[dict]) -> set[int]:
    return {n for n, k in enumerate(columns)
            if any(is_numeric(c.get(k)) for c in checks)
            and not any(isinstance(c.get(k), str) for c in checks)}


def long_messages(checks: list[dict]) -> list[tuple[str, str]]:
    """(case, message) of the checks whose message a table cell would cut or flatten."""
    out = []
    for n, c in enumerate(checks):
        message = clean(c.get("message") or "")
        if len(message) > CELL_LIMIT or "\n" in message.strip():
            out.append((case_name(c, n), message))
    return out
