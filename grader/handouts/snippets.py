"""The Python code blocks of the handouts, so that tests can run them.

A block fenced as ```python is meant to run on its own, from the kit's root, with the
kit's interpreter. One that cannot (a signature, a fragment of a kernel) is marked by an
HTML comment on the line before its fence, which the rendered page does not show:

    <!-- no-run: why -->
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from grader.handouts.render import parser

NO_RUN = re.compile(r"<!--\s*no-run\b(.*?)-->", re.S)


@dataclass(frozen=True)
class Snippet:
    path: Path
    line: int          # of the opening fence, from 1
    code: str
    runs: bool
    reason: str = ""   # why it does not run, from the marker

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"


def snippets(path: Path) -> list[Snippet]:
    """Every ```python block of the Markdown file `path`, in order."""
    tokens = parser().parse(path.read_text(encoding="utf-8"))
    found = []
    for i, token in enumerate(tokens):
        if token.type != "fence" or token.info.strip().split()[:1] != ["python"]:
            continue
        before = tokens[i - 1] if i else None
        marker = NO_RUN.search(before.content) if before is not None and \
            before.type == "html_block" else None
        line = (token.map[0] + 1) if token.map else 0
        found.append(Snippet(path, line, token.content, marker is None,
                             marker.group(1).strip(" :") if marker else ""))
    return found


def all_snippets(folder: Path) -> list[Snippet]:
    return [s for path in sorted(folder.glob("*.md")) for s in snippets(path)]
