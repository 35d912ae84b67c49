"""Text and numbers in reports: results can hold anything a student's code printed or
raised, escaped here for HTML and made safe for Markdown.
"""

from __future__ import annotations

import html
import json
import math
import re

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
    if isinstance(value, list) and value and len(value) <= 50 and all(map(is_numeric, value)):
        return ", ".join(format_value(key, v) for v in value)  # each epoch's seconds, say
    return json.dumps(value, ensure_ascii=False, default=str)


def is_numeric(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# ---------------------------------------------------------------------------------------------
