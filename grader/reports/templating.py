"""The Jinja2 environment of the HTML reports (templates in grader/reports/templates/).

Autoescaping is on for every template: results hold text a submission controls (its name,
its messages, its exceptions), so each value written with `{{ }}` is cleaned (control
characters, terminal escapes and bidi overrides removed, as text.clean does) and then
HTML-escaped, unless it is markup the templates made themselves (a macro's output).
Table cells that are not plain text are `Link`s or `Badge`s, drawn by the macros in
_macros.html.j2, never HTML strings built here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from grader.reports.text import clean
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


@cache
def environment() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True,
                      undefined=StrictUndefined, finalize=_finalize,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.tests["link"] = lambda value: isinstance(value, Link)
    env.tests["badge"] = lambda value: isinstance(value, Badge)
    env.filters["badge_kind"] = badge_kind
    env.filters["urlquote"] = lambda value: quote(str(value), safe="/#")  # "#item-3" stays
    return env


def render(template: str, **context: object) -> str:
    """The named template rendered with `context`."""
    return environment().get_template(template).render(**context)
