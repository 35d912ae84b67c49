"""One submission's feedback in Markdown.
"""

from __future__ import annotations

import textwrap
from urllib.parse import quote

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
from grader.reports.text import (
    CELL_LIMIT,
    format_value,
    label,
    md_block,
    md_code,
    md_inline,
)

# Markdown


def md_table(headers: list[str], rows: list[list[str]], right: set[int] | None = None) -> str:
    """A pipe table; headers and cells must already be escaped with md_inline."""
    right = right or set()
    rule = ["---:" if n in right else "---" for n in range(len(headers))]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(rule) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


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
                              numeric_columns(columns, checks)), ""]
    long = long_messages(ordered)
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
    scalars = figure_scalars(item["figures"])
    if scalars:
        out += [f"- {md_inline(k)}: {md_inline(v, CELL_LIMIT)}" for k, v in scalars] + [""]
    table = figure_table(item["figures"])
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
