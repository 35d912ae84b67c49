"""The Jinja2 environments of the reports (templates in grader/reports/templates/).

Results hold text a submission controls (its name, its messages, its exceptions), so
escaping is the default in both formats, never a call to remember:

- `*.html.j2`: autoescaped. Each value written with `{{ }}` is cleaned (control
  characters, terminal escapes and bidi overrides removed, as text.clean does) and then
  HTML-escaped, unless it is markup the templates made themselves (a macro's output).
- `*.md.j2`: each value is made one line with every Markdown and HTML special character
  backslash-escaped (text.md_inline), unless a filter of this module made it Markdown on
  purpose (`code`, `block`, `indented_block`, `urlquote`). Markdown tables are drawn by
  an include (_table.md.j2), whose output is not a value and so is not escaped again.

Table cells that are not plain text are `Link`s or `Badge`s, drawn by the templates,
never HTML or Markdown strings built in Python.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from grader.reports.text import clean, md_block, md_code, md_inline
from grader.results import FAIL, PARTIAL, PASS

TEMPLATES = Path(__file__).with_name("templates")


@dataclass(frozen=True)
class Link:
    """A table cell linking to a file beside the page or to an anchor in it (`href` is
    %-quoted when drawn)."""

    href: str
    text: str


@dataclass(frozen=True)
class Badge:
    """A table cell showing an item's status as a coloured label."""

    status: str


@dataclass
class Table:
    """What the `table` macro draws: cells are str, Link or Badge."""

    headers: list[str]
    rows: list[list[str | Link | Badge]]
    right: set[int] = field(default_factory=set)  # columns aligned right (numbers)
    row_classes: list[str] | None = None  # a CSS class per row ("failed"), or None


def badge_kind(status: str) -> str:
    """The CSS class of a status badge."""
    return {PASS: "pass", FAIL: "fail", PARTIAL: "partial"}.get(status, "other")


def _finalize(value: object) -> object:
    # Markup is what a macro returned: drawn by the templates, already escaped, kept whole.
    return value if isinstance(value, Markup) else clean(value)


def _md_finalize(value: object) -> object:
    return value if isinstance(value, Markup) else md_inline(value)


def _indented_block(value: object) -> Markup:
    # under a list item: two spaces, blank lines left blank
    return Markup(textwrap.indent(md_block(value), "  "))


@cache
def environment(markdown: bool) -> Environment:
    """The HTML environment, or with `markdown` the Markdown one."""
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=not markdown,
                      undefined=StrictUndefined,
                      finalize=_md_finalize if markdown else _finalize,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.tests["link"] = lambda value: isinstance(value, Link)
    env.tests["badge"] = lambda value: isinstance(value, Badge)
    env.filters["badge_kind"] = badge_kind
    # "#item-3" stays an anchor; the rest is %-quoted, so nothing in it needs escaping
    env.filters["urlquote"] = lambda value: Markup(quote(str(value), safe="/#"))
    env.filters["code"] = lambda value, in_table=False: Markup(md_code(value, in_table))
    env.filters["block"] = lambda value: Markup(md_block(value))
    env.filters["indented_block"] = _indented_block
    return env


def render(template: str, **context: object) -> str:
    """The named template rendered with `context`. A Markdown page is its blocks with one
    blank line between them, so the blank line a template leaves after its last block
    is dropped."""
    markdown = template.endswith(".md.j2")
    text = environment(markdown).get_template(template).render(**context)
    return text.rstrip("\n") + "\n" if markdown else text
