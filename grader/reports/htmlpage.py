"""One submission's feedback as an HTML page, and the page and table helpers the class
summary shares.
"""

from __future__ import annotations

from urllib.parse import quote

from grader.reports.markdown import (
    _figure_scalars,
    _figure_tables,
    _long_messages,
    _numeric_columns,
)
from grader.reports.plots import Plot
from grader.reports.reading import (
    check_columns,
    check_failed,
    failures_first,
    not_graded_note,
    points_text,
    total_text,
)
from grader.reports.text import anchor, esc, format_value, label, shorten
from grader.results import FAIL, PARTIAL, PASS

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
