"""The handouts (handouts/*.md) as HTML pages: one Jinja2 template, a small stylesheet
inlined into every page, links between handouts rewritten to .html, images copied.

Every relative link is checked while rendering: a handout that is not there, an anchor
that no heading of its page makes, or an image or file that does not exist is an error,
listed with its page, and nothing counts as built. Nothing is fetched from the network:
the pages open from disk, and the formulas are Unicode text in preformatted blocks.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

import jinja2
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.token import Token

TEMPLATES = Path(__file__).parent / "templates"
# The reading order of the overview; handouts not named here follow alphabetically.
ORDER = ("overview", "part1-gemm", "part2-network", "part3-mpi", "part4-paper", "reports",
         "points")
MIN_TOC = 4  # sections a page needs to get a table of contents
SHORT = {"overview": "Overview", "part1-gemm": "1 GEMM", "part2-network": "2 Network",
         "part3-mpi": "3 MPI", "part4-paper": "4 Paper", "reports": "Reports",
         "points": "Points"}


class BrokenLinkError(RuntimeError):
    """One or more links or images of the handouts point at nothing."""


@dataclass
class Page:
    source: Path
    title: str = ""
    anchors: set[str] = field(default_factory=set)
    sections: list[tuple[str, str]] = field(default_factory=list)  # (anchor, text) of h2s
    html: str = ""
    files: set[Path] = field(default_factory=set)  # local files it shows or links to

    @property
    def name(self) -> str:
        return self.source.stem


def parser() -> MarkdownIt:
    """CommonMark with GitHub's tables, as the handouts are written for; every image is
    also a link to itself, since a wide figure is scaled down to the text's width."""
    md = MarkdownIt("commonmark").enable("table")
    md.add_render_rule("image", _linked_image)
    return md


def _linked_image(self, tokens: list[Token], idx: int, options, env) -> str:
    src = escapeHtml(str(tokens[idx].attrGet("src")))
    return f'<a class="figure" href="{src}">{self.image(tokens, idx, options, env)}</a>'


def slug(text: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to
    hyphens (so that links written against the rendered repository still work)."""
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def _heading_ids(tokens: list[Token]) -> tuple[str, set[str], list[tuple[str, str]]]:
    """Sets an id on every heading; returns the first heading's text, all the ids, and
    the (id, text) of the second-level headings, for the page's table of contents."""
    title, seen, sections = "", set(), []
    for opening, inline in zip(tokens, tokens[1:], strict=False):
        if opening.type != "heading_open":
            continue
        text = inline.content
        title = title or text
        base, n = slug(text), 0
        anchor = base
        while anchor in seen:  # GitHub's rule for repeated headings
            n += 1
            anchor = f"{base}-{n}"
        seen.add(anchor)
        opening.attrSet("id", anchor)
        if opening.tag == "h2":
            sections.append((anchor, text.replace("`", "")))
    return title.replace("`", ""), seen, sections


def _is_local(target: str) -> bool:
    parts = urlsplit(target)
    return not (parts.scheme or parts.netloc or target.startswith("/"))


def _rewrite(page: Page, target: str, pages: dict[str, Page], src: Path,
             errors: list[str]) -> str:
    """The href or src to write for `target` of `page`; problems go to `errors`."""
    if not _is_local(target):
        return target
    path_part, _, fragment = target.partition("#")
    if not path_part:  # an anchor on the same page
        if fragment not in page.anchors:
            errors.append(f"{page.source.name}: no heading makes #{fragment}")
        return target
    resolved = (page.source.parent / unquote(path_part)).resolve()
    if resolved.suffix == ".md" and resolved.parent == src.resolve():
        other = pages.get(resolved.stem)
        if other is None:
            errors.append(f"{page.source.name}: links to {path_part}, which is not a handout")
        elif fragment and fragment not in other.anchors:
            errors.append(f"{page.source.name}: {path_part} has no heading for #{fragment}")
        return path_part[:-3] + ".html" + (f"#{fragment}" if fragment else "")
    if not resolved.is_file():
        errors.append(f"{page.source.name}: {path_part} does not exist")
    elif resolved.is_relative_to(src.resolve()):
        page.files.add(resolved)
    else:
        errors.append(f"{page.source.name}: {path_part} lies outside the handouts folder")
    return target


def _fix_links(page: Page, tokens: list[Token], pages: dict[str, Page], src: Path,
               errors: list[str]) -> None:
    for token in tokens:
        for child in token.children or ():
            attr = {"link_open": "href", "image": "src"}.get(child.type)
            if attr:
                child.attrSet(attr, _rewrite(page, str(child.attrGet(attr)), pages, src,
                                             errors))


def ordered(sources: list[Path]) -> list[Path]:
    rank = {name: i for i, name in enumerate(ORDER)}
    return sorted(sources, key=lambda p: (rank.get(p.stem, len(ORDER)), p.stem))


def render_all(src: Path) -> list[Page]:
    """Every handout of `src` rendered (the HTML of its body); BrokenLinkError lists every
    link, anchor or image that points at nothing."""
    md = parser()
    sources = ordered(sorted(src.glob("*.md")))
    parsed = {}
    for source in sources:
        tokens = md.parse(source.read_text(encoding="utf-8"))
        page = Page(source)
        page.title, page.anchors, page.sections = _heading_ids(tokens)
        parsed[page.name] = (page, tokens)
    pages = {name: page for name, (page, _) in parsed.items()}
    errors: list[str] = []
    for page, tokens in parsed.values():
        _fix_links(page, tokens, pages, src, errors)
        page.html = md.renderer.render(tokens, md.options, {})
    if errors:
        raise BrokenLinkError("broken links in the handouts:\n  " + "\n  ".join(errors))
    return list(pages.values())


def _environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                              autoescape=jinja2.select_autoescape(["html"]),
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True)


def build(src: Path, out: Path) -> list[Path]:
    """Render every handout of `src` into `out` (NAME.html), with the local files they show
    (images) copied beside them at the same relative paths; returns the pages written."""
    pages = render_all(src)
    template = _environment().get_template("page.html")
    style = (TEMPLATES / "style.css").read_text(encoding="utf-8")
    nav = [(page.name + ".html", SHORT.get(page.name, page.title)) for page in pages]
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for page in pages:
        # the table of contents goes under the page's title, for pages long enough
        head, cut, rest = page.html.partition("</h1>\n")
        if not cut:
            head, rest = "", page.html
        html = template.render(title=page.title, head=head + cut, body=rest, nav=nav,
                               style=style, current=page.name + ".html",
                               toc=page.sections if len(page.sections) >= MIN_TOC else [])
        target = out / f"{page.name}.html"
        target.write_text(html, encoding="utf-8")
        written.append(target)
        for file in page.files:
            copy = out / file.relative_to(src.resolve())
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(file, copy)
    return written
