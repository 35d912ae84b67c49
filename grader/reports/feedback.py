"""Feedback for one graded submission: a Markdown and an HTML report, with plots.

The input is the dict of `SubmissionResult.to_json()` (grader/results.py), read generically:
every item gets a table of its checks whatever their keys, and each plot is drawn only when
its data is present:

- checks with `gflops` (and `solution_gflops`, `cublas_gflops`): GFLOP/s per benchmark case;
- figures `relative_max_norm` / `relative_l2_norm` (one value per parameter), with the
  figure `tolerance` as a line;
- checks with `worst_error_over_bound`: each case's worst error over its bound, against 1.

Text from results (student messages above all: any unicode, `<`, `|`, newlines) is escaped
for HTML and made safe for Markdown; long messages are shortened in tables and shown whole
below them. The plots are PNG files in `<name>_files/` beside the two reports, referenced by
relative links, so the folder can be copied or opened from disk as it is.

The helpers without a leading underscore are shared with grader/reports/gradescope.py and
grader/reports/summary.py.
"""

from __future__ import annotations

import html
import json
import math
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from matplotlib.figure import Figure

from grader.reports.report import safe_name
from grader.results import FAIL, NOT_GRADED, PARTIAL, PASS
from grader.safe_io import clean_text

CELL_LIMIT = 200  # characters of a message shown in a table cell
NORM_KEYS = ("relative_max_norm", "relative_l2_norm")

# ---------------------------------------------------------------------------------------------
# Text: results can hold anything a student's code printed or raised.

# '_' inside a word (gemm_naive) is never emphasis, so it stays as it is for legibility
_MD_SPECIAL = re.compile(r"([\\`*\[\]<>|&~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
NOTES = 20  # notes of a submission shown


def clean(text: object) -> str:
    """`text` as a printable str (safe_io.clean_text): undecodable bytes as \\xNN, terminal
    escape sequences, bidi overrides and control characters but newline and tab gone."""
    return clean_text(text)


def shorten(text: object, limit: int = CELL_LIMIT) -> str:
    """One line of at most `limit` characters, cut at a word where one is near."""
    s = " ".join(clean(text).split())
    if len(s) <= limit:
        return s
    cut = s[: limit - 1]
    space = cut.rfind(" ")
    if space > limit * 0.6:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"


def esc(text: object) -> str:
    """Text escaped for HTML, attribute values included."""
    return html.escape(clean(text), quote=True)


def md_inline(text: object, limit: int | None = None) -> str:
    """Text safe in a Markdown table cell or heading: one line, and every character that
    Markdown or raw HTML would interpret (pipes, tags, emphasis, links) backslash-escaped."""
    s = shorten(text, limit) if limit else " ".join(clean(text).split())
    return _MD_SPECIAL.sub(r"\\\1", s)


def md_code(text: object, in_table: bool = False) -> str:
    """Text as inline code; pipes escaped in a table, where GFM splits cells even in code."""
    s = " ".join(clean(text).split())
    if "`" in s or not s:
        return md_inline(s)
    return f"`{s.replace('|', chr(92) + '|')}`" if in_table else f"`{s}`"


def md_block(text: object) -> str:
    """Text verbatim in a fenced block, the fence longer than any backtick run inside."""
    s = clean(text)
    runs = [len(r) for r in re.findall(r"`+", s)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return f"{fence}text\n{s}\n{fence}"


def file_stem(name: object) -> str:
    """A submission name as a file name: no path separators, no leading dot."""
    stem = re.sub(r"[^\w.-]+", "_", clean(name), flags=re.ASCII).strip("._")
    return stem[:100] or "submission"


def anchor(n: int) -> str:
    """The HTML id of the n-th item's section (by position: ids need not be unique)."""
    return f"item-{n}"


# ---------------------------------------------------------------------------------------------
# Numbers


_LABELS = {
    "passed": "result",
    "worst_error_over_bound": "error / bound",
    "seconds": "time",
    "gflops": "GFLOP/s",
    "solution_gflops": "solution GFLOP/s",
    "cublas_gflops": "cuBLAS GFLOP/s",
    "time_over_solution": "time / solution",
    "share_of_cublas": "share of cuBLAS",
    "worker_seconds": "time in the worker",
    "relative_max_norm": "relative max-norm error",
    "relative_l2_norm": "relative L2 error",
}


def label(key: object) -> str:
    """A column heading for a check or figure key."""
    return _LABELS.get(str(key), clean(key).replace("_", " "))


def finite(value: object) -> float | None:
    """`value` as a float when it is a finite number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        x = float(value)
    except OverflowError:  # an int beyond float's range
        return None
    return x if math.isfinite(x) else None


def number(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    a = abs(x)
    if a == 0:
        return "0"
    if a >= 1e6 or a < 1e-3:
        return f"{x:.3g}"
    if a >= 100:
        return f"{x:,.0f}"
    return f"{x:.4g}"


def format_value(key: str, value: object) -> str:
    """A check's or figure's value for a table, by what its key says it measures."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        if key == "passed":
            return "ok" if value else "FAIL"
        return "yes" if value else "no"
    if isinstance(value, int | float):
        try:
            x = float(value)
        except OverflowError:
            return str(value)
        if not math.isfinite(x):
            return number(x)
        if key == "seconds" or key.endswith("_seconds"):
            return f"{x * 1e3:.3g} ms" if abs(x) < 1 else f"{x:.3g} s"
        if key.startswith("share_"):
            return f"{x:.1%}"
        if key.startswith("time_over_"):
            return f"{x:.2f}×"
        return number(x)
    if isinstance(value, str):
        return clean(value)
    return json.dumps(value, ensure_ascii=False, default=str)


def is_numeric(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# ---------------------------------------------------------------------------------------------
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
# Plots: drawn on matplotlib's Agg canvas through Figure objects, without pyplot, so that no
# global state or GUI backend is involved and nothing stays open after saving.


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
    fig = Figure(figsize=(_size(len(rows), 1.8, 2, 6), 4.0), layout="constrained")
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
    ax.set_xticks(range(len(rows)),
                  [_plain(case_name(c, n), 18) for n, c in enumerate(rows)], fontsize=8)
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
    fig = Figure(figsize=(_size(len(params) * len(series), 0.9, 2, 5), 3.6),
                 layout="constrained")
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
    ax.set_xticks(range(len(params)), [_plain(p, 14) for p in params], fontsize=8)
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
    fig = Figure(figsize=(8.0, _size(len(checks), 0.28, 1.2, 2)), layout="constrained")
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
    ax.set_yticks(range(len(checks)), [_plain(case_name(c, n)) for n, c in enumerate(checks)],
                  fontsize=7)
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
# Markdown


def md_table(headers: list[str], rows: list[list[str]], right: set[int] | None = None) -> str:
    """A pipe table; headers and cells must already be escaped with md_inline."""
    right = right or set()
    rule = ["---:" if n in right else "---" for n in range(len(headers))]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(rule) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _figure_scalars(figures: dict) -> list[tuple[str, str]]:
    return [(label(k), format_value(str(k), v)) for k, v in figures.items()
            if not isinstance(v, dict) and k not in NORM_KEYS]


def _figure_tables(figures: dict) -> tuple[list[str], list[list[str]]] | None:
    """Figures that are dicts of values (per parameter, say) as one table, or None."""
    keys = [k for k, v in figures.items() if isinstance(v, dict) and v]
    if not keys:
        return None
    rows_keys: list[str] = []
    for k in keys:
        rows_keys += [r for r in figures[k] if r not in rows_keys]
    headers = ["", *(label(k) for k in keys)]
    rows = [[clean(r), *(format_value(str(k), figures[k].get(r)) for k in keys)]
            for r in rows_keys]
    return headers, rows


def _numeric_columns(columns: list[str], checks: list[dict]) -> set[int]:
    return {n for n, k in enumerate(columns)
            if any(is_numeric(c.get(k)) for c in checks)
            and not any(isinstance(c.get(k), str) for c in checks)}


def _long_messages(checks: list[dict]) -> list[tuple[str, str]]:
    """(case, message) of the checks whose message a table cell would cut or flatten."""
    out = []
    for n, c in enumerate(checks):
        message = clean(c.get("message") or "")
        if len(message) > CELL_LIMIT or "\n" in message.strip():
            out.append((case_name(c, n), message))
    return out


def _md_checks(item: dict) -> list[str]:
    checks = item["checks"]
    if not checks:
        return []
    failed = sum(check_failed(c) for c in checks)
    columns = check_columns(checks)
    ordered = failures_first(checks)
    rows = [[md_inline(format_value(k, c.get(k)), CELL_LIMIT) for k in columns]
            for c in ordered]
    for row, c in zip(rows, ordered, strict=True):
        if check_failed(c):
            row[0] = f"**{row[0]}**"
    head = f"Checks ({len(checks)}"
    head += f"; {failed} failing, listed first):" if failed else "):"
    out = [head, "", md_table([md_inline(label(k)) for k in columns], rows,
                              _numeric_columns(columns, checks)), ""]
    long = _long_messages(ordered)
    if long:
        out += ["Full messages:", ""]
        for case, message in long:
            out += [f"- {md_inline(case)}:", "", textwrap.indent(md_block(message), "  "), ""]
    return out


def _md_item(n: int, item: dict, plots: list[Plot], rel: str) -> list[str]:
    out = [f"## {n}. {md_inline(item['title'])}", "",
           f"{md_code(item['id'])} · **{points_text(item)}** · {md_inline(item['status'])}",
           ""]
    message = item["message"]
    if message:
        multiline = "\n" in message.strip() or len(message) > 300
        out += [md_block(message) if multiline else md_inline(message), ""]
    scalars = _figure_scalars(item["figures"])
    if scalars:
        out += [f"- {md_inline(k)}: {md_inline(v, CELL_LIMIT)}" for k, v in scalars] + [""]
    table = _figure_tables(item["figures"])
    if table:
        headers, rows = table
        out += [md_table([md_inline(h) for h in headers],
                         [[md_inline(c, CELL_LIMIT) for c in r] for r in rows],
                         set(range(1, len(headers)))), ""]
    for plot in plots:
        out += [f"![{md_inline(plot.caption)}]({rel}/{quote(plot.path.name)})", ""]
    return out + _md_checks(item)


def render_markdown(result: dict, plots: list[list[Plot]], rel: str) -> str:
    """The Markdown report of a normalized result; `plots` has one list per item, `rel` is
    the folder of the PNG files relative to the report."""
    out = [f"# Feedback: {md_inline(result['name'])}", "",
           f"- Backend: {md_inline(result['backend'])}",
           f"- Total: **{total_text(result)}**", ""]
    note = not_graded_note(result)
    if note:
        out += [f"> **Note:** {md_inline(note)}", ""]
    for extra in result["notes"]:
        out += [f"> **Note:** {md_inline(extra)}", ""]
    items = result["items"]
    if not items:
        return "\n".join([*out, "No items were graded.", ""])
    rows = [[str(n), f"{md_inline(it['title'])} ({md_code(it['id'], True)})", points_text(it),
             md_inline(it["status"]), md_inline(it["message"], CELL_LIMIT)]
            for n, it in enumerate(items, 1)]
    out += ["## Summary", "", md_table(["#", "item", "points", "status", "message"], rows,
                                       {0, 2}), ""]
    for n, it in enumerate(items, 1):
        out += _md_item(n, it, plots[n - 1] if n <= len(plots) else [], rel)
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# HTML


CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0;
       color: #222; background: #fafafa; }
main { max-width: 1100px; margin: 0 auto; padding: 1.5em 2em 3em; background: #fff; }
h1 { margin-bottom: 0.3em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.3em 0.6em; text-align: left;
         vertical-align: top; overflow-wrap: break-word; }
th { background: #f0f0f0; white-space: nowrap; } td.num { text-align: right; white-space: nowrap; }
tr.failed td { background: #fdecea; }
.badge { display: inline-block; padding: 0.05em 0.6em; border-radius: 0.8em;
         font-size: 0.85em; font-weight: 600; white-space: nowrap; }
.pass { background: #d4edda; color: #155724; } .fail { background: #f8d7da; color: #721c24; }
.partial { background: #fff3cd; color: #856404; } .other { background: #e2e3e5; color: #383d41; }
.note { background: #fff8e1; border-left: 4px solid #f0ad4e; padding: 0.6em 1em; }
pre { white-space: pre-wrap; overflow-wrap: break-word; background: #f6f8fa;
      padding: 0.6em; border-radius: 4px; }
code { background: #f0f0f0; padding: 0 0.25em; border-radius: 3px; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.85em; color: #555; }
.meta { color: #555; } details { margin: 0.5em 0; }
"""


def badge(status: str) -> str:
    kind = {PASS: "pass", FAIL: "fail", PARTIAL: "partial"}.get(status, "other")
    return f'<span class="badge {kind}">{esc(status)}</span>'


def html_table(headers: list[str], rows: list[list[str]], right: set[int] | None = None,
               row_classes: list[str] | None = None, raw: set[int] | None = None) -> str:
    """A table of text cells, escaped here; the cells of columns in `raw` are HTML already."""
    right, raw = right or set(), raw or set()
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for r, row in enumerate(rows):
        cls = f' class="{row_classes[r]}"' if row_classes and row_classes[r] else ""
        cells = "".join(
            f'<td{" class=num" if n in right else ""}>{c if n in raw else esc(c)}</td>'
            for n, c in enumerate(row))
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def html_page(title: str, body: str) -> str:
    """A standalone page: styles inline, nothing fetched from the network."""
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n"
            f"<body><main>\n{body}\n</main></body>\n</html>\n")


def _html_message(message: str) -> str:
    multiline = "\n" in message.strip() or len(message) > 300
    return f"<pre>{esc(message)}</pre>" if multiline else f"<p>{esc(message)}</p>"


def _html_checks(item: dict) -> str:
    checks = item["checks"]
    if not checks:
        return ""
    failed = sum(check_failed(c) for c in checks)
    columns = check_columns(checks)
    ordered = failures_first(checks)
    rows = [[shorten(format_value(k, c.get(k))) for k in columns] for c in ordered]
    classes = ["failed" if check_failed(c) else "" for c in ordered]
    head = f"{len(checks)} checks" + (f", {failed} failing (listed first)" if failed else "")
    out = [f"<h3>Checks</h3><p class=meta>{esc(head)}</p>",
           html_table([label(k) for k in columns], rows,
                      _numeric_columns(columns, checks), classes)]
    long = _long_messages(ordered)
    if long:
        inner = "".join(f"<p><b>{esc(case)}</b></p><pre>{esc(message)}</pre>"
                        for case, message in long)
        is_open = " open" if len(long) <= 5 else ""  # a few stay in view, many fold away
        out.append(f"<details{is_open}><summary>Full messages ({len(long)})</summary>"
                   f"{inner}</details>")
    return "\n".join(out)


def _html_item(n: int, item: dict, plots: list[Plot], rel: str) -> str:
    out = [f'<h2 id="{anchor(n)}">{n}. {esc(item["title"])}</h2>',
           f'<p class=meta><code>{esc(item["id"])}</code> · <b>{esc(points_text(item))}</b> '
           f"· {badge(item['status'])}</p>"]
    if item["message"]:
        out.append(_html_message(item["message"]))
    scalars = _figure_scalars(item["figures"])
    if scalars:
        out.append("<ul>" + "".join(f"<li>{esc(k)}: {esc(shorten(v))}</li>"
                                    for k, v in scalars) + "</ul>")
    table = _figure_tables(item["figures"])
    if table:
        headers, rows = table
        out.append(html_table(headers, [[shorten(c) for c in r] for r in rows],
                              set(range(1, len(headers)))))
    for plot in plots:
        src = f"{quote(rel)}/{quote(plot.path.name)}"
        out.append(f'<figure><img src="{src}" alt="{esc(plot.caption)}">'
                   f"<figcaption>{esc(plot.caption)}</figcaption></figure>")
    out.append(_html_checks(item))
    return "\n".join(out)


def render_html(result: dict, plots: list[list[Plot]], rel: str) -> str:
    """The HTML report of a normalized result (see render_markdown)."""
    out = [f"<h1>Feedback: {esc(result['name'])}</h1>",
           f"<p class=meta>Backend: {esc(result['backend'])}<br>"
           f"Total: <b>{esc(total_text(result))}</b></p>"]
    note = not_graded_note(result)
    if note:
        out.append(f'<p class="note"><b>Note:</b> {esc(note)}</p>')
    for extra in result["notes"]:
        out.append(f'<p class="note"><b>Note:</b> {esc(extra)}</p>')
    items = result["items"]
    if not items:
        out.append("<p>No items were graded.</p>")
        return html_page(f"Feedback: {result['name']}", "\n".join(out))
    rows = [[str(n), f'<a href="#{anchor(n)}">{esc(it["title"])}</a>',
             points_text(it), badge(it["status"]), shorten(it["message"])]
            for n, it in enumerate(items, 1)]
    classes = ["failed" if it["status"] == FAIL else "" for it in items]
    out += ["<h2>Summary</h2>",
            html_table(["#", "item", "points", "status", "message"], rows, {0, 2}, classes,
                       raw={1, 3})]
    out += [_html_item(n, it, plots[n - 1] if n <= len(plots) else [], rel)
            for n, it in enumerate(items, 1)]
    return html_page(f"Feedback: {result['name']}", "\n".join(out))


# ---------------------------------------------------------------------------------------------


def write_feedback(result: dict, out_dir: Path) -> tuple[Path, Path]:
    """Write `<name>.md` and `<name>.html` for one submission's result (the dict of
    SubmissionResult.to_json()), with their plots in `<name>_files/`; return the two paths.

    `<name>` is the submission's id (report.safe_name: unique, stable, safe). PNG files
    left in `<name>_files/` by an earlier call are removed first, so the folder holds only
    the plots of this result; it is not created when no item has data to plot.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    data = normalize(result)
    stem = data["id"]
    folder = out_dir / f"{stem}_files"
    for old in folder.glob("*.png"):
        old.unlink()
    plots = [make_plots(it, folder, f"{n:02d}_{file_stem(it['id'])}")
             for n, it in enumerate(data["items"], 1)]
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
    md_path, html_path = out_dir / f"{stem}.md", out_dir / f"{stem}.html"
    md_path.write_text(render_markdown(data, plots, folder.name), encoding="utf-8")
    html_path.write_text(render_html(data, plots, folder.name), encoding="utf-8")
    return md_path, html_path
